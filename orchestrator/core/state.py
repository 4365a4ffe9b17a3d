"""The state of an execution as a fold over its events: the only state there is.

`apply` is total and pure: an event that does not fit (say, for a subtask the plan does
not name) is a bug in the writer, and raises, because silently skipping it would show a
user a state that the log does not hold. A subtask's state changes only by a move of the
lifecycle table (lifecycle.py); a move the table does not allow is folded all the same,
as it always was, and noted in `anomalies`: the journal refuses to append one, but a log
written before the table existed is read, never refused for its history.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from orchestrator.core import events as ev
from orchestrator.core import guard, integration_fold
from orchestrator.core.execution_state import ExecutionState as ExecutionState
from orchestrator.core.execution_state import ExecutionStatus as ExecutionStatus
from orchestrator.core.execution_state import (
    add_merged,
    move_subtask,
    update_attempt,
    update_subtask,
)
from orchestrator.core.execution_state import initial_state as initial_state
from orchestrator.core.lifecycle import Move
from orchestrator.core.plan import ResolvedSubtask
from orchestrator.core.reasons import Reason, ReasonCode
from orchestrator.core.views import ACTIVE, AttemptView, Overlap


def fold(execution_id: str, events: Iterable[ev.ExecutionEvent]) -> ExecutionState:
    iterator = iter(events)
    first = next(iterator, None)
    if not isinstance(first, ev.ExecutionCreated):
        raise TypeError(f"the log of {execution_id} does not start with execution_created")
    state = initial_state(execution_id, first)
    for seq, event in enumerate(iterator, start=1):
        state = apply(state, event, seq)
    return state


def apply(state: ExecutionState, event: ev.ExecutionEvent, seq: int) -> ExecutionState:
    state = replace(state, seq=seq)
    match event:
        case ev.ExecutionCreated():
            raise ValueError("execution_created may only be the first event")
        case ev.SupervisorStarted(pid=pid, host=host, at=at):
            started_at = state.started_at if state.started_at is not None else (at or None)
            # A stop is asked of one supervisor: whoever resumes the execution goes on.
            running = None in state.review.values()
            return replace(
                state,
                supervisor_pid=pid,
                supervisor_host=host,
                started_at=started_at,
                stop=None,
                check_stopped=False,  # a check a stop cut runs again
                review_cut=running,
            )
        case ev.IntegrationBranchCreated(commit=commit):
            return replace(state, integration_head=commit)
        case ev.SubtaskScheduled(subtask_id=sid, start_commit=commit):
            return move_subtask(state, sid, Move.SCHEDULED, start_commit=commit)
        case ev.WorkspaceCreated(subtask_id=sid, path=path, branch=branch, commit=commit):
            return update_subtask(
                state, sid, worktree=path, branch=branch, head_commit=commit, copied=event.copied
            )
        case ev.AttemptStarted(subtask_id=sid):
            view = state.subtask(sid)
            attempt = _attempt(event, after_changes=event.start_commit != view.start_commit)
            return move_subtask(
                state, sid, Move.ATTEMPT_STARTED, attempts=(*view.attempts, attempt)
            )
        case ev.ResolutionStarted(subtask_id=sid):
            view = state.subtask(sid)
            attempt = _attempt(event, after_changes=True, resolution=event)
            attempts = (*view.attempts, attempt)
            return move_subtask(state, sid, Move.RESOLUTION_STARTED, attempts=attempts, reason=None)
        case ev.ResolutionDeclined(subtask_id=sid, reason=reason):
            declined = Reason(code=reason.code, detail=f"{reason.detail}; it stays conflicted")
            return move_subtask(
                state, sid, Move.RESOLUTION_DECLINED, resolution_declined=True, reason=declined
            )
        case ev.AttemptPaneOpened(subtask_id=sid, pane_id=pane_id, at=at):
            state = update_attempt(state, sid, pane_id=pane_id, started_at=at or None)
            if event.resumed_session is not None:  # recovery's re-opening does not know it
                state = update_attempt(state, sid, resumed_session=event.resumed_session)
            return state
        case ev.ConstraintViolated():
            return _violated(state, event)
        case ev.AttemptInterrupted(subtask_id=sid, recovery_ref=ref, rerun=rerun):
            state = update_attempt(
                state, sid, interrupted=True, recovery_ref=ref, tokens=event.tokens
            )
            # The worktree was reset to the attempt's safe point.
            state = update_subtask(
                state, sid, head_commit=state.subtask(sid).attempts[-1].start_commit
            )
            if rerun:
                return move_subtask(state, sid, Move.INTERRUPTED_RERUN)
            return move_subtask(state, sid, Move.INTERRUPTED, reason=_interrupted(event))
        case ev.SubtaskRerun(subtask_id=sid):
            return _unskip_dependents(move_subtask(state, sid, Move.RERUN, reason=None), sid)
        case ev.AttemptExited(subtask_id=sid):
            return update_attempt(
                state,
                sid,
                exit_code=event.exit_code,
                output_tail=event.output_tail,
                tokens=event.tokens,
                input_tokens=event.input_tokens,
                output_tokens=event.output_tokens,
                cost_usd=event.cost_usd,
                session_id=event.session_id,
                result=event.result,
                is_error=event.is_error,
                api_retries=event.api_retries,
                api_status=event.api_status,
                refusals=event.refusals,
                summary=event.summary,
                written_by_others=event.written_by_others,
            )
        case ev.AttemptCommitted(subtask_id=sid, head_commit=head):
            state = update_attempt(
                state,
                sid,
                head_commit=head,
                changed=event.changed,
                tree=event.tree,
                recovery_ref=event.recovery_ref,
                in_submodules=event.in_submodules,
                paths=event.paths,
                branch_paths=event.branch_paths,
                resolution_check=event.resolution,
            )
            return update_subtask(state, sid, head_commit=head)
        case ev.VerifyFinished(subtask_id=sid):
            judged = state.subtask(sid).attempts[-1].judged
            state = update_attempt(
                state, sid, verify_exit_code=event.exit_code, verify_output_tail=event.output_tail
            )
            if judged:  # a check `stop --now` cut, its attempt judged stopped meanwhile
                return move_subtask(state, sid, Move.VERIFY_FINISHED_LATE)
            return move_subtask(state, sid, Move.VERIFY_FINISHED)
        case ev.AttemptJudged(subtask_id=sid, accepted=accepted, reason=reason):
            state = update_attempt(
                state, sid, accepted=accepted, reason=reason, feedback=event.feedback
            )
            if accepted:
                return move_subtask(state, sid, Move.ACCEPTED, succeeded_at_seq=seq)
            if not event.final:
                # Sent back: another attempt follows, if the limits allow.
                return move_subtask(state, sid, Move.SENT_BACK)
            cut = state.subtask(sid).attempts[-1].cut_by_stop
            move = Move.JUDGED_STOPPED if cut else Move.JUDGED_FAILED
            return move_subtask(state, sid, move, reason=reason)
        case ev.SubtaskMerged(subtask_id=sid, merge_commit=commit):
            state = replace(state, integration_head=commit)
            if state.plan.integration_verify is not None:
                return integration_fold.merged_to_check(state, event)
            return add_merged(state, sid, Move.MERGED, merge=event)
        case ev.IntegrationVerified():
            return integration_fold.verified_alone(state, event)
        case ev.IntegrationChecked():
            return integration_fold.checked(state, event)
        case ev.MergesUndone():
            return integration_fold.undone(state, event)
        case ev.SubtaskConflicted(subtask_id=sid, conflicts=conflicts):
            paths = ", ".join(conflict.path for conflict in conflicts)
            reason = Reason(
                code=ReasonCode.CONFLICT,
                detail=f"{len(conflicts)} path(s) conflict with merged work: {paths}",
            )
            state = integration_fold.conflicted(state, sid)
            return move_subtask(state, sid, Move.CONFLICTED, conflicts=conflicts, reason=reason)
        case ev.SubtaskSkipped(subtask_id=sid, reason=reason, dependency=dependency):
            return move_subtask(state, sid, Move.SKIPPED, reason=reason, skipped_for=dependency)
        case ev.SubtaskFailed(subtask_id=sid, reason=reason):
            state = integration_fold.off_the_queue(state, sid)
            return move_subtask(state, sid, Move.FAILED, reason=reason)
        case ev.StopRequested():
            return _stop_requested(state, event)
        case ev.SubtaskStopped(subtask_id=sid, reason=reason):
            return move_subtask(state, sid, Move.STOPPED, reason=reason)
        case ev.ReviewStepStarted(step=step):
            return replace(state, review={**state.review, step: None})
        case ev.ReviewStepFinished(step=step):
            return replace(state, review={**state.review, step: event}, review_cut=False)
        case ev.WorkspaceReleased(subtask_id=sid):
            return update_subtask(state, sid, worktree=None)
        case ev.ExecutionEnded(status=status):
            return replace(state, ended=status, ended_seq=seq)
        case ev.ExecutionReopened():
            return replace(state, ended=None, ended_seq=None)
        case ev.OverlapFound():
            return _overlap_found(state, event)
        case ev.SubtaskAssigned(subtask_id=sid):
            state.subtask(sid)  # one the plan does not name is a bug in the writer
            return replace(state, assignments={**state.assignments, sid: event})
        case ev.GuardRecorded():
            return replace(state, guard=event)
        case ev.GuardBreached():
            return _guard_breached(state, event)
    raise AssertionError(f"unhandled event {event!r}")  # pragma: no cover


def _attempt(
    event: ev.AttemptStarted | ev.ResolutionStarted,
    *,
    after_changes: bool,
    resolution: ev.ResolutionStarted | None = None,
) -> AttemptView:
    return AttemptView(
        number=event.attempt,
        idempotency_key=event.idempotency_key,
        run_dir=event.run_dir,
        start_commit=event.start_commit,
        after_changes=after_changes,
        resolution=resolution,
    )


def _guard_breached(state: ExecutionState, event: ev.GuardBreached) -> ExecutionState:
    """Each suspect's attempt is cut as a limit cuts one: a running agent is stopped, what
    it left is set aside rather than committed, and the judgement fails it with the
    reason. An attempt a limit or a stop cut already keeps that reason."""
    state = replace(state, breaches=(*state.breaches, event))
    reason = Reason(code=ReasonCode.GUARD_BREACHED, detail=guard.reason_detail(event))
    for sid in event.subtask_ids:
        attempt = state.subtask(sid).current_attempt
        if attempt is not None and not attempt.finished and attempt.stopped_by is None:
            state = update_attempt(state, sid, stopped_by=reason)
    return state


def _overlap_found(state: ExecutionState, event: ev.OverlapFound) -> ExecutionState:
    for subtask_id in event.subtasks:
        state.subtask(subtask_id)  # one the plan does not name is a bug in the writer
    for i, known in enumerate(state.overlaps):
        if known.subtasks == event.subtasks and known.kind == event.kind:
            paths = tuple(dict.fromkeys((*known.paths, *event.paths)))
            overlaps = list(state.overlaps)
            overlaps[i] = replace(known, paths=paths)
            return replace(state, overlaps=tuple(overlaps))
    found = Overlap(event.subtasks, event.kind, tuple(dict.fromkeys(event.paths)), event.at)
    return replace(state, overlaps=(*state.overlaps, found))


def _interrupted(event: ev.AttemptInterrupted) -> Reason:
    saved = f"; its changes are saved on {event.recovery_ref}" if event.recovery_ref else ""
    when = {
        "pane": "its tmux pane went away (the tmux server killed, or the pane closed)",
        "worker": "the worker it ran on was lost (its lease lapsed)",
    }.get(event.cause, "its supervisor stopped")
    return Reason(
        code=ReasonCode.INTERRUPTED,
        detail=(
            f"attempt {event.attempt} was cut short when {when}{saved}; "
            "`kairo-orch resume --rerun-interrupted` runs it again"
        ),
    )


def _stop_requested(state: ExecutionState, event: ev.StopRequested) -> ExecutionState:
    if state.stop == "now" or event.mode == "graceful":
        return replace(state, stop=state.stop or "graceful")
    state = replace(state, stop="now")
    for view in state.subtasks.values():
        attempt = view.current_attempt
        if view.state not in ACTIVE or attempt is None or attempt.finished:
            continue
        if attempt.stopped_by is not None:
            continue  # a constraint is stopping it already, for a reason of its own
        stopped = f"{event.source} stopped the execution"
        if not attempt.exited:
            detail = f"{stopped} while attempt {attempt.number} ran"
        elif _check_to_come(state.spec(view.id), attempt):
            # The check is cut (processes.py ends it) or never starts: its exit status
            # would be the stop's, not a verdict on the work, nor feedback for an agent.
            detail = f"{stopped} before attempt {attempt.number}'s check finished"
        else:
            continue
        reason = Reason(code=ReasonCode.STOPPED, detail=detail)
        state = update_attempt(state, view.id, stopped_by=reason, cut_by_stop=True)
    return state


def _check_to_come(spec: ResolvedSubtask, attempt: AttemptView) -> bool:
    """Whether the attempt's agent exited cleanly and its `verify` has not said yet."""
    return spec.verify is not None and attempt.exit_code == 0 and attempt.verify_exit_code is None


def _violated(state: ExecutionState, event: ev.ConstraintViolated) -> ExecutionState:
    if event.action == "WARN_CONTINUE":
        return replace(state, warned=state.warned | {f"{event.constraint}:{event.subtask_id}"})
    if event.action == "EMERGENCY_STOP" and event.subtask_id is not None:
        attempt = state.subtask(event.subtask_id).current_attempt
        # Of a running attempt; one that answers for an attempt not yet started (a budget
        # spent, a clock run out between attempts) acts as GRACEFUL_EXIT.
        if attempt is not None and attempt.number == event.attempt and not attempt.finished:
            return update_attempt(state, event.subtask_id, stopped_by=event.reason)
    return state  # GRACEFUL_EXIT: the failure that follows it says the rest


def _unskip_dependents(execution: ExecutionState, subtask_id: str) -> ExecutionState:
    """A subtask that runs again makes pending again what was skipped for it, transitively."""
    again = {subtask_id}
    changed = True
    while changed:
        changed = False
        for view in execution.subtasks.values():
            if view.state == "skipped" and view.skipped_for in again and view.id not in again:
                execution = move_subtask(
                    execution, view.id, Move.DEPENDENCY_RERUN, reason=None, skipped_for=None
                )
                again.add(view.id)
                changed = True
    return execution
