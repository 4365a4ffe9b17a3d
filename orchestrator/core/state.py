"""The state of an execution as a fold over its events: the only state there is.

`apply` is total and pure: an event that does not fit (say, for a subtask the plan does
not name) is a bug in the writer, and raises, because silently skipping it would show a
user a state that the log does not hold. A subtask's state changes only by a move of the
lifecycle table (lifecycle.py); a move the table does not allow is folded all the same,
as it always was, and noted in `anomalies`: the journal refuses to append one, but a log
written before the table existed is read, never refused for its history.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from orchestrator.core import events as ev
from orchestrator.core.lifecycle import Anomaly, Move, allowed, target
from orchestrator.core.plan import ResolvedPlan, ResolvedSubtask
from orchestrator.core.reasons import Reason, ReasonCode
from orchestrator.core.views import (
    ACTIVE,
    AttemptView,
    Overlap,
    SubtaskView,
)

ExecutionStatus = Literal["RUNNING", "COMPLETED", "FAILED", "STOPPED"]


@dataclass(frozen=True)
class ExecutionState:
    execution_id: str
    created: ev.ExecutionCreated
    subtasks: Mapping[str, SubtaskView]
    seq: int = 0  # seq of the last event folded in
    supervisor_pid: int | None = None
    supervisor_host: str | None = None
    integration_head: str | None = None
    merged: tuple[str, ...] = ()  # subtask ids in the order they were merged
    ended: ev.EndStatus | None = None
    ended_seq: int | None = None  # the seq of the execution_ended that ended it
    started_at: float | None = None  # unix time of the first supervisor start
    warned: frozenset[str] = frozenset()  # "constraint:subtask" warnings already recorded
    stop: ev.StopMode | None = None  # a stop this supervisor was asked for
    # Each review step recorded as started, in that order, with its outcome (None while it
    # runs or if its supervisor stopped while it ran).
    review: Mapping[ev.ReviewStep, ev.ReviewStepFinished | None] = field(default_factory=dict)
    review_cut: bool = False  # a review step was running when its supervisor stopped
    anomalies: tuple[Anomaly, ...] = ()  # moves the lifecycle does not allow, in log order
    overlaps: tuple[Overlap, ...] = ()  # seen while agents worked, in the order first seen

    @property
    def plan(self) -> ResolvedPlan:
        return self.created.plan

    def subtask(self, subtask_id: str) -> SubtaskView:
        return self.subtasks[subtask_id]

    def spec(self, subtask_id: str) -> ResolvedSubtask:
        return self.plan.subtask(subtask_id)

    @property
    def status(self) -> ExecutionStatus:
        """The status the log alone says; whether a supervisor lives is the caller's to add."""
        return "RUNNING" if self.ended is None else self.ended


def initial_state(execution_id: str, created: ev.ExecutionCreated) -> ExecutionState:
    subtasks = {s.id: SubtaskView(id=s.id) for s in created.plan.subtasks}
    return ExecutionState(execution_id=execution_id, created=created, subtasks=subtasks)


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
                review_cut=running,
            )
        case ev.IntegrationBranchCreated(commit=commit):
            return replace(state, integration_head=commit)
        case ev.SubtaskScheduled(subtask_id=sid, start_commit=commit):
            return _move(state, sid, Move.SCHEDULED, start_commit=commit)
        case ev.WorkspaceCreated(subtask_id=sid, path=path, branch=branch, commit=commit):
            return _update(
                state, sid, worktree=path, branch=branch, head_commit=commit, copied=event.copied
            )
        case ev.AttemptStarted(subtask_id=sid):
            view = state.subtask(sid)
            attempt = AttemptView(
                number=event.attempt,
                idempotency_key=event.idempotency_key,
                run_dir=event.run_dir,
                start_commit=event.start_commit,
                after_changes=event.start_commit != view.start_commit,
            )
            return _move(state, sid, Move.ATTEMPT_STARTED, attempts=(*view.attempts, attempt))
        case ev.AttemptPaneOpened(subtask_id=sid, pane_id=pane_id, at=at):
            state = _update_attempt(state, sid, pane_id=pane_id, started_at=at or None)
            if event.resumed_session is not None:  # recovery's re-opening does not know it
                state = _update_attempt(state, sid, resumed_session=event.resumed_session)
            return state
        case ev.ConstraintViolated():
            return _violated(state, event)
        case ev.AttemptInterrupted(subtask_id=sid, recovery_ref=ref, rerun=rerun):
            state = _update_attempt(
                state, sid, interrupted=True, recovery_ref=ref, tokens=event.tokens
            )
            # The worktree was reset to the attempt's safe point.
            state = _update(state, sid, head_commit=state.subtask(sid).attempts[-1].start_commit)
            if rerun:
                return _move(state, sid, Move.INTERRUPTED_RERUN)
            return _move(state, sid, Move.INTERRUPTED, reason=_interrupted(event))
        case ev.SubtaskRerun(subtask_id=sid):
            return _unskip_dependents(_move(state, sid, Move.RERUN, reason=None), sid)
        case ev.AttemptExited(subtask_id=sid):
            return _update_attempt(
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
            )
        case ev.AttemptCommitted(subtask_id=sid, head_commit=head):
            state = _update_attempt(
                state,
                sid,
                head_commit=head,
                changed=event.changed,
                tree=event.tree,
                recovery_ref=event.recovery_ref,
                in_submodules=event.in_submodules,
                paths=event.paths,
                branch_paths=event.branch_paths,
            )
            return _update(state, sid, head_commit=head)
        case ev.VerifyFinished(subtask_id=sid):
            judged = state.subtask(sid).attempts[-1].judged
            state = _update_attempt(
                state, sid, verify_exit_code=event.exit_code, verify_output_tail=event.output_tail
            )
            if judged:  # a check `stop --now` cut, its attempt judged stopped meanwhile
                return _move(state, sid, Move.VERIFY_FINISHED_LATE)
            return _move(state, sid, Move.VERIFY_FINISHED)
        case ev.AttemptJudged(subtask_id=sid, accepted=accepted, reason=reason):
            state = _update_attempt(
                state, sid, accepted=accepted, reason=reason, feedback=event.feedback
            )
            if accepted:
                return _move(state, sid, Move.ACCEPTED, succeeded_at_seq=seq)
            if not event.final:
                # Sent back: another attempt follows, if the limits allow.
                return _move(state, sid, Move.SENT_BACK)
            cut = state.subtask(sid).attempts[-1].cut_by_stop
            move = Move.JUDGED_STOPPED if cut else Move.JUDGED_FAILED
            return _move(state, sid, move, reason=reason)
        case ev.SubtaskMerged(subtask_id=sid, merge_commit=commit):
            state = replace(state, integration_head=commit)
            if state.plan.integration_verify is not None:
                return _move(state, sid, Move.MERGED_TO_CHECK, merge=event)
            return _merged(state, sid, Move.MERGED, merge=event)
        case ev.IntegrationVerified(subtask_id=sid, exit_code=0):
            return _merged(state, sid, Move.CHECK_PASSED)
        case ev.IntegrationVerified(subtask_id=sid):
            return _merge_undone(state, event)
        case ev.SubtaskConflicted(subtask_id=sid, conflicts=conflicts):
            paths = ", ".join(conflict.path for conflict in conflicts)
            reason = Reason(
                code=ReasonCode.CONFLICT,
                detail=f"{len(conflicts)} path(s) conflict with merged work: {paths}",
            )
            return _move(state, sid, Move.CONFLICTED, conflicts=conflicts, reason=reason)
        case ev.SubtaskSkipped(subtask_id=sid, reason=reason, dependency=dependency):
            return _move(state, sid, Move.SKIPPED, reason=reason, skipped_for=dependency)
        case ev.SubtaskFailed(subtask_id=sid, reason=reason):
            return _move(state, sid, Move.FAILED, reason=reason)
        case ev.StopRequested():
            return _stop_requested(state, event)
        case ev.SubtaskStopped(subtask_id=sid, reason=reason):
            return _move(state, sid, Move.STOPPED, reason=reason)
        case ev.ReviewStepStarted(step=step):
            return replace(state, review={**state.review, step: None})
        case ev.ReviewStepFinished(step=step):
            return replace(state, review={**state.review, step: event}, review_cut=False)
        case ev.WorkspaceReleased(subtask_id=sid):
            return _update(state, sid, worktree=None)
        case ev.ExecutionEnded(status=status):
            return replace(state, ended=status, ended_seq=seq)
        case ev.ExecutionReopened():
            return replace(state, ended=None, ended_seq=None)
        case ev.OverlapFound():
            return _overlap_found(state, event)
    raise AssertionError(f"unhandled event {event!r}")  # pragma: no cover


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


def _merged(
    state: ExecutionState, subtask_id: str, move: Move, **changes: object
) -> ExecutionState:
    state = replace(state, merged=(*state.merged, subtask_id))
    return _move(state, subtask_id, move, **changes)


def _interrupted(event: ev.AttemptInterrupted) -> Reason:
    saved = f"; its changes are saved on {event.recovery_ref}" if event.recovery_ref else ""
    when = (
        "its tmux pane went away (the tmux server killed, or the pane closed)"
        if event.cause == "pane"
        else "its supervisor stopped"
    )
    return Reason(
        code=ReasonCode.INTERRUPTED,
        detail=(
            f"attempt {event.attempt} was cut short when {when}{saved}; "
            "`kairo-orch resume --rerun-interrupted` runs it again"
        ),
    )


def _merge_undone(state: ExecutionState, event: ev.IntegrationVerified) -> ExecutionState:
    sid = event.subtask_id
    check = state.plan.integration_verify
    branch = state.subtask(sid).branch
    undone = f"the merge was undone, and its work stays on {branch}"
    if state.stop == "now":
        # `stop --now` ends the check (processes.py) or keeps it from starting: its status
        # is the stop's, no verdict on the merge, which goes back all the same.
        move = Move.CHECK_STOPPED
        reason = Reason(
            code=ReasonCode.STOPPED,
            detail=f"the execution was stopped before the check of {sid}'s merge finished; "
            f"{undone}",
        )
    else:
        move = Move.CHECK_FAILED
        reason = Reason(
            code=ReasonCode.INTEGRATION_VERIFY_FAILED,
            detail=f"`{check}` exited with status {event.exit_code} on the integration branch "
            f"after {sid} merged; {undone}",
        )
    state = replace(state, integration_head=event.restored_commit)
    return _move(state, sid, move, reason=reason, merge=None, integration_output=event.output_tail)


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
        state = _update_attempt(state, view.id, stopped_by=reason, cut_by_stop=True)
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
            return _update_attempt(state, event.subtask_id, stopped_by=event.reason)
    return state  # GRACEFUL_EXIT: the failure that follows it says the rest


def _unskip_dependents(execution: ExecutionState, subtask_id: str) -> ExecutionState:
    """A subtask that runs again makes pending again what was skipped for it, transitively."""
    again = {subtask_id}
    changed = True
    while changed:
        changed = False
        for view in execution.subtasks.values():
            if view.state == "skipped" and view.skipped_for in again and view.id not in again:
                execution = _move(
                    execution, view.id, Move.DEPENDENCY_RERUN, reason=None, skipped_for=None
                )
                again.add(view.id)
                changed = True
    return execution


def _move(
    execution: ExecutionState, subtask_id: str, move: Move, /, **changes: object
) -> ExecutionState:
    """The subtask's state after `move`, by the lifecycle table, with other `changes`."""
    source = execution.subtask(subtask_id).state
    to = target(move, source)
    if not allowed(move, source):
        found = Anomaly(execution.seq, subtask_id, move, source, to)
        execution = replace(execution, anomalies=(*execution.anomalies, found))
    return _update(execution, subtask_id, state=to, **changes)


def _update(execution: ExecutionState, subtask_id: str, /, **changes: object) -> ExecutionState:
    view = execution.subtask(subtask_id)
    subtasks = dict(execution.subtasks)
    subtasks[subtask_id] = replace(view, **changes)  # type: ignore[arg-type]
    return replace(execution, subtasks=subtasks)


def _update_attempt(
    execution: ExecutionState, subtask_id: str, /, **changes: object
) -> ExecutionState:
    view = execution.subtask(subtask_id)
    if not view.attempts:
        raise ValueError(f"subtask {subtask_id!r} has no attempt to update")
    last = replace(view.attempts[-1], **changes)  # type: ignore[arg-type]
    return _update(execution, subtask_id, attempts=(*view.attempts[:-1], last))
