"""The oracle of tests/core/test_agenda.py: `decide` as it was before the agenda, scanning
every subtask of the state for every decision, with two changes since: a merge step takes
up to MERGE_BATCH accepted subtasks (`integration_batch` when merges are checked), and the
merges waiting for a check are checked in runs and hold no place (merge_queue.py's
`integration_checks`, which needs no agenda).

What to do next, as a pure function of the folded state.

`decide` returns the events that are decisions in themselves (schedule, skip, judge, end),
which the supervisor appends at once, and the commands that need the world (git, tmux,
processes), which the supervisor runs at the edge and which answer with events of their
own. Calling it twice on the same state gives the same answer, so the supervisor may call
it after every event and drop commands that are already under way (`Command.key`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from orchestrator.core import events as ev
from orchestrator.core.commands import (
    AwaitAttempt,
    Command,
    CommitAttempt,
    CreateIntegrationBranch,
    Decision,
    KillAttempt,
    MergeSubtask,
    OpenPane,
    PrepareWorkspace,
    ReleaseWorkspace,
    RunReviewStep,
    RunVerify,
)
from orchestrator.core.constraints import (
    BUILT_IN,
    ResourceAction,
    ResourceConstraint,
    ResourceContext,
    Verdict,
    evaluate,
    execution_tokens,
)
from orchestrator.core.continuation import (
    AUTHENTICATION_FAILED,
    TOKEN_BUDGET,
    continue_after,
    needs_verify,
)
from orchestrator.core.dag import merge_order
from orchestrator.core.ids import idempotency_key
from orchestrator.core.merge_queue import MERGE_BATCH, integration_checks
from orchestrator.core.reasons import Reason, ReasonCode, as_reason, sentence
from orchestrator.core.resolution import ended_unmerged
from orchestrator.core.review_steps import next_review_step
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import ACTIVE, TERMINAL, AttemptView, SubtaskView


def decide(
    state: ExecutionState,
    now: float = 0.0,
    constraints: Sequence[ResourceConstraint] = BUILT_IN,
    live_tokens: Mapping[str, int] | None = None,
) -> Decision:
    """`now` is unix time, for the constraints that measure the wall clock; `live_tokens`
    what running attempts have used so far, by subtask, for those that count tokens."""
    if state.ended is not None:
        return Decision()
    if state.integration_head is None:
        return Decision(commands=(CreateIntegrationBranch(),))
    # A subtask gets one move a decision: one skipped is neither stopped nor scheduled too
    # (two moves from the state it is in would be one move too many: lifecycle.py).
    skips = tuple(_skips(state))
    skipped = frozenset(skip.subtask_id for skip in skips)
    events: list[ev.ExecutionEvent] = [
        *_running_limits(state, now, constraints, live_tokens or {}),
        *_stops(state, skipped),
        *skips,
        *_schedules(state, skipped),
        *_attempt_starts(state, now, constraints),
        *_judgements(state),
    ]
    if events:
        # Decisions first: the commands they lead to are decided on the state they make.
        return Decision(events=tuple(events))
    commands = [
        *_attempt_steps(state),
        *integration_checks(state),
        *_merge(state),
        *_releases(state),
    ]
    if not commands and _all_done(state):
        review = next_review_step(state)
        if isinstance(review, RunReviewStep):
            return Decision(commands=(review,))
        if review is not None:
            return Decision(events=(review,))
        return Decision(events=(ev.ExecutionEnded(status=_outcome(state)),))
    return Decision(commands=tuple(commands))


def _outcome(state: ExecutionState) -> ev.EndStatus:
    if len(state.merged) == len(state.subtasks):
        return "COMPLETED"
    return "STOPPED" if state.stop is not None else "FAILED"


def _stops(state: ExecutionState, skipped: frozenset[str]) -> Iterator[ev.SubtaskStopped]:
    """Under a stop, nothing new starts: what has not started never will (what is skipped
    at the same time is skipped: it would not have started anyway)."""
    if state.stop is None:
        return
    for view in state.subtasks.values():
        if view.state == "pending" and view.id not in skipped:
            yield ev.SubtaskStopped(
                subtask_id=view.id,
                reason=Reason(
                    code=ReasonCode.STOPPED,
                    detail="the execution was stopped before this subtask started",
                ),
            )


def _skips(state: ExecutionState) -> Iterator[ev.SubtaskSkipped]:
    logged_out = _logged_out_agents(state)
    for spec in state.plan.subtasks:
        if state.subtask(spec.id).state != "pending":
            continue
        program = (spec.agent.kind, spec.agent.binary)
        if program in logged_out:
            yield ev.SubtaskSkipped(
                subtask_id=spec.id,
                reason=Reason(
                    code=ReasonCode.AGENT_FAILED,
                    detail=(
                        f"not started: the {spec.agent.kind} agent could not log in "
                        f"(subtask '{logged_out[program]}'); log it in and start the plan again"
                    ),
                ),
            )
            continue
        for dependency in spec.depends_on:
            dep_state = state.subtask(dependency).state
            if ended_unmerged(state, state.subtask(dependency)):
                yield ev.SubtaskSkipped(
                    subtask_id=spec.id,
                    reason=Reason(
                        code=ReasonCode.DEPENDENCY,
                        detail=f"it depends on '{dependency}', which {_past(dep_state)}",
                    ),
                    dependency=dependency,
                )
                break


def _logged_out_agents(state: ExecutionState) -> dict[tuple[str, str | None], str]:
    """Agent programs (kind, binary) an attempt found unable to log in, each with the first
    such subtask: the subtasks of that program not started yet would fail alike, after
    their worktrees and setups (an `npm ci` each) were made for nothing."""
    found: dict[tuple[str, str | None], str] = {}
    for spec in state.plan.subtasks:
        attempt = state.subtask(spec.id).current_attempt
        if attempt is not None and attempt.result == AUTHENTICATION_FAILED:
            found.setdefault((spec.agent.kind, spec.agent.binary), spec.id)
    return found


def _past(state_name: str) -> str:
    return {"skipped": "was skipped", "stopped": "was stopped"}.get(state_name, state_name)


def _schedules(state: ExecutionState, skipped: frozenset[str]) -> Iterator[ev.SubtaskScheduled]:
    if state.stop is not None:
        return
    free = state.plan.max_parallel - sum(v.state in ACTIVE for v in state.subtasks.values())
    for spec in state.plan.subtasks:
        if free <= 0:
            return
        if state.subtask(spec.id).state != "pending" or spec.id in skipped:
            continue
        if all(state.subtask(d).state == "merged" for d in spec.depends_on):
            free -= 1
            yield ev.SubtaskScheduled(
                subtask_id=spec.id, start_commit=_start_commit(state, spec.depends_on)
            )


def _start_commit(state: ExecutionState, depends_on: tuple[str, ...]) -> str:
    """The base commit, or the integration commit right after the last dependency merged.

    Not the integration head of the moment: what else merged meanwhile depends on timing,
    and the same plan over the same base must give the same result.
    """
    if not depends_on:
        return state.created.base_commit
    last = max(depends_on, key=state.merged.index)
    merge = state.subtask(last).merge
    assert merge is not None
    return merge.merge_commit


def _elapsed(since: float | None, now: float) -> float:
    return max(0.0, now - since) if since and now else 0.0


def _running_limits(
    state: ExecutionState,
    now: float,
    constraints: Sequence[ResourceConstraint],
    live_tokens: Mapping[str, int],
) -> Iterator[ev.ExecutionEvent]:
    """Constraints on running attempts: the ones that watch the clock, and the budgets
    that watch running attempts' live token counts. An attempt its stream filter stopped
    at its allowance is over a budget too, and is stopped as one the supervisor stops."""
    tokens = execution_tokens(state, live_tokens)
    for view in state.subtasks.values():
        attempt = view.current_attempt
        if view.state not in ACTIVE or attempt is None:
            continue
        if attempt.exited and not (attempt.result == TOKEN_BUDGET and not attempt.committed):
            continue
        if attempt.stopped_by is not None or attempt.finished or attempt.started_at is None:
            continue
        context = ResourceContext(
            state=state,
            subtask_id=view.id,
            attempt=attempt.number,
            phase="running",
            attempt_elapsed_s=_elapsed(attempt.started_at, now),
            execution_elapsed_s=_elapsed(state.started_at, now),
            execution_tokens=tokens,
            attempt_tokens=0 if attempt.exited else live_tokens.get(view.id, 0),
        )
        yield from _violations(state, context, evaluate(constraints, context))


def _violations(
    state: ExecutionState, context: ResourceContext, verdict: Verdict
) -> Iterator[ev.ConstraintViolated]:
    """Every validation that was not ALLOW, once (a warning is not repeated)."""
    for validation, action in verdict.violations:
        if action == ResourceAction.ALLOW:
            continue
        if action == ResourceAction.WARN_CONTINUE:
            if f"{validation.constraint}:{context.subtask_id}" in state.warned:
                continue
        elif action != verdict.action:
            continue  # a lesser exit beside the one that decides says nothing more
        if context.phase == "next_attempt":  # nothing runs to stop: no further attempt
            action = min(action, ResourceAction.GRACEFUL_EXIT)
        yield ev.ConstraintViolated(
            constraint=validation.constraint,
            action=action.name,  # type: ignore[arg-type]
            reason=as_reason(validation.reason),
            subtask_id=context.subtask_id,
            attempt=context.attempt,
        )


def _attempt_starts(
    state: ExecutionState, now: float, constraints: Sequence[ResourceConstraint]
) -> Iterator[ev.ExecutionEvent]:
    """Attempt N is decided, and recorded, before anything runs (store.md), if the
    constraints allow another attempt at all."""
    tokens = execution_tokens(state)
    for view in state.subtasks.values():
        attempt = view.current_attempt
        if view.state not in ACTIVE or view.worktree is None:
            continue
        if attempt is not None and not (attempt.interrupted or attempt.judged):
            continue
        if attempt is not None and attempt.accepted:
            continue
        if state.stop is not None:
            yield ev.SubtaskStopped(subtask_id=view.id, reason=_stopped_between(attempt))
            continue
        number = len(view.attempts) + 1
        context = ResourceContext(
            state=state,
            subtask_id=view.id,
            attempt=number,
            phase="next_attempt",
            execution_elapsed_s=_elapsed(state.started_at, now),
            execution_tokens=tokens,
        )
        verdict = evaluate(constraints, context)
        yield from _violations(state, context, verdict)
        if verdict.action >= ResourceAction.GRACEFUL_EXIT:
            assert verdict.reason is not None  # an action past ALLOW has a violation
            yield ev.SubtaskFailed(subtask_id=view.id, reason=verdict.reason)
            continue
        assert view.head_commit is not None
        yield ev.AttemptStarted(
            subtask_id=view.id,
            attempt=number,
            idempotency_key=idempotency_key(state.execution_id, view.id, number, "agent"),
            run_dir=attempt_run_dir(state.created.run_root, view.id, number),
            start_commit=view.head_commit,
        )


def _stopped_between(attempt: AttemptView | None) -> Reason:
    if attempt is None:
        return Reason(
            code=ReasonCode.STOPPED, detail="the execution was stopped before the first attempt"
        )
    why = " (it was interrupted)" if attempt.interrupted else ""
    why = f" ({sentence(attempt.reason)})" if attempt.reason is not None else why
    return Reason(
        code=ReasonCode.STOPPED,
        detail=(
            f"the execution was stopped after attempt {attempt.number}, which was not accepted{why}"
        ),
    )


def attempt_run_dir(run_root: str, subtask_id: str, attempt: int) -> str:
    return f"{run_root.rstrip('/')}/{subtask_id}/{attempt}"


def _judgements(state: ExecutionState) -> Iterator[ev.AttemptJudged]:
    for view in state.subtasks.values():
        attempt = view.current_attempt
        if view.state not in ACTIVE or attempt is None or attempt.finished:
            continue
        if not attempt.committed:
            continue
        spec = state.spec(view.id)
        if needs_verify(spec, attempt):
            continue
        earlier = [a for a in view.attempts[:-1] if not a.interrupted]
        decision = continue_after(spec, attempt, earlier[-1] if earlier else None)
        yield ev.AttemptJudged(
            subtask_id=view.id,
            attempt=attempt.number,
            accepted=decision.kind == "accept",
            reason=decision.reason,
            feedback=decision.feedback,
            final=decision.kind != "nudge",
        )


def _attempt_steps(state: ExecutionState) -> Iterator[Command]:
    for view in state.subtasks.values():
        if view.state not in ACTIVE:
            continue
        attempt = view.current_attempt
        if view.worktree is None:
            assert view.start_commit is not None
            yield PrepareWorkspace(subtask_id=view.id, start_commit=view.start_commit)
        elif attempt is None or attempt.finished:
            continue  # an attempt is being decided
        elif attempt.pane_id is None and not attempt.exited:
            yield OpenPane(subtask_id=view.id, attempt=attempt.number)
        elif not attempt.exited:
            yield AwaitAttempt(subtask_id=view.id, attempt=attempt.number)
            if attempt.stopped_by is not None:
                yield KillAttempt(subtask_id=view.id, attempt=attempt.number)
        elif not attempt.committed:
            yield CommitAttempt(subtask_id=view.id, attempt=attempt.number)
        elif needs_verify(state.spec(view.id), attempt):
            yield RunVerify(subtask_id=view.id, attempt=attempt.number)


def _merge(state: ExecutionState) -> Iterator[MergeSubtask]:
    if state.unverified:
        return
    checked = state.plan.integration_verify is not None
    batch = state.plan.integration_batch if checked else MERGE_BATCH
    queue: list[str] = []
    if state.plan.merge_order == "completion":
        ready = [v for v in state.subtasks.values() if v.state == "succeeded"]
        queue = [v.id for v in sorted(ready, key=lambda v: v.succeeded_at_seq or 0)][:batch]
    else:
        for subtask_id in merge_order(state.plan):
            view = state.subtask(subtask_id)
            if view.state == "succeeded" and len(queue) < batch:
                queue.append(subtask_id)
            elif view.state not in TERMINAL or len(queue) == batch:
                break
    if queue:
        yield MergeSubtask(subtask_id=queue[0], then=tuple(queue[1:]))


def _releases(state: ExecutionState) -> Iterator[ReleaseWorkspace]:
    for view in state.subtasks.values():
        if view.state == "merged" and view.worktree is not None:
            yield ReleaseWorkspace(subtask_id=view.id)


def _all_done(state: ExecutionState) -> bool:
    return all(_settled(v) for v in state.subtasks.values())


def _settled(view: SubtaskView) -> bool:
    return view.state in TERMINAL and not (view.state == "merged" and view.worktree is not None)
