"""What to do next, as a pure function of the folded state.

`decide` returns the events that are decisions in themselves (schedule, skip, judge, end),
which the supervisor appends at once, and the commands that need the world (git, tmux,
processes), which the supervisor runs at the edge and which answer with events of their
own. Calling it twice on the same state gives the same answer, so the supervisor may call
it after every event and drop commands that are already under way (`Command.key`).

It looks at the subtasks through their agenda (agenda.py), not at every subtask: what
one decision costs does not grow with the plan.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from orchestrator.core import events as ev
from orchestrator.core.agenda import Agenda, Group
from orchestrator.core.commands import (
    AwaitAttempt,
    Command,
    CommitAttempt,
    CreateIntegrationBranch,
    Decision,
    KillAttempt,
    OpenPane,
    PrepareWorkspace,
    RunReviewStep,
    RunVerify,
)
from orchestrator.core.constraints import (
    BUILT_IN,
    ResourceAction,
    ResourceConstraint,
    ResourceContext,
    evaluate,
    violation_events,
)
from orchestrator.core.continuation import (
    TOKEN_BUDGET,
    continue_after,
    needs_verify,
)
from orchestrator.core.ids import idempotency_key
from orchestrator.core.merge_queue import integration_checks, merge_steps, releases
from orchestrator.core.reasons import Reason, ReasonCode, sentence
from orchestrator.core.resolution import ended_unmerged
from orchestrator.core.resolution_starts import next_resolution, resolution_starts
from orchestrator.core.review_steps import next_review_step
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import AttemptView, SubtaskView


def decide(
    state: ExecutionState,
    now: float = 0.0,
    constraints: Sequence[ResourceConstraint] = BUILT_IN,
    live_tokens: Mapping[str, int] | None = None,
    agenda: Agenda | None = None,
) -> Decision:
    """`now` is unix time, for the constraints that measure the wall clock; `live_tokens`
    what running attempts have used so far, by subtask, for those that count tokens;
    `agenda` the state's, kept current by the caller (else sorted anew)."""
    if state.ended is not None:
        return Decision()
    if state.integration_head is None:
        return Decision(commands=(CreateIntegrationBranch(),))
    agenda = agenda or Agenda.of(state)
    active = [state.subtask(sid) for sid in agenda.group(Group.ACTIVE)]
    # A subtask gets one move a decision: one skipped is neither stopped nor scheduled too
    # (two moves from the state it is in would be one move too many: lifecycle.py).
    skips = tuple(_skips(state, agenda))
    skipped = frozenset(skip.subtask_id for skip in skips)
    live = live_tokens or {}
    tokens = agenda.total_tokens
    resolutions = list(resolution_starts(state, agenda, len(active), now, constraints, tokens))
    events: list[ev.ExecutionEvent] = [
        *_running_limits(state, active, now, constraints, live, tokens + sum(live.values())),
        *_stops(state, agenda, skipped),
        *skips,
        *resolutions,
        *_schedules(state, agenda, len(active) + len(resolutions), skipped),
        *_attempt_starts(state, active, now, constraints, tokens),
        *_judgements(state, active),
    ]
    if events:
        # Decisions first: the commands they lead to are decided on the state they make.
        return Decision(events=tuple(events))
    commands = [
        *_attempt_steps(state, active),
        *integration_checks(state),
        *merge_steps(state, agenda),
        *releases(agenda),
    ]
    if not commands and not agenda.members[Group.UNSETTLED]:
        review = next_review_step(state)
        if isinstance(review, RunReviewStep):
            return Decision(commands=(review,))
        if review is not None:
            return Decision(events=(review,))
        return Decision(events=(ev.ExecutionEnded(status=_outcome(state)),))
    return Decision(commands=tuple(commands))


def _outcome(state: ExecutionState) -> ev.EndStatus:
    """Never COMPLETED once the guard found a change to what the user owns."""
    if len(state.merged) == len(state.subtasks) and not state.breaches:
        return "COMPLETED"
    return "STOPPED" if state.stop is not None else "FAILED"


def _stops(
    state: ExecutionState, agenda: Agenda, skipped: frozenset[str]
) -> Iterator[ev.SubtaskStopped]:
    """Under a stop, nothing new starts: what has not started never will (what is skipped
    at the same time is skipped: it would not have started anyway)."""
    if state.stop is None:
        return
    for sid in agenda.group(Group.PENDING):
        if sid not in skipped:
            yield ev.SubtaskStopped(
                subtask_id=sid,
                reason=Reason(
                    code=ReasonCode.STOPPED,
                    detail="the execution was stopped before this subtask started",
                ),
            )


def _skips(state: ExecutionState, agenda: Agenda) -> Iterator[ev.SubtaskSkipped]:
    """Subtasks that will never start: their agent program could not log in (the first
    subtask it failed for is named: those not started yet would fail alike, after their
    worktrees and setups were made for nothing), or a dependency ended unmerged."""
    logged_out = agenda.logged_out()
    candidates = set(agenda.members[Group.BLOCKED])
    for program in logged_out:
        candidates |= agenda.pending_by_program.get(program, set())
    for sid in agenda.in_plan_order(candidates):
        spec = state.spec(sid)
        program = agenda.program[sid]
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


def _past(state_name: str) -> str:
    return {"skipped": "was skipped", "stopped": "was stopped"}.get(state_name, state_name)


def _schedules(
    state: ExecutionState, agenda: Agenda, running: int, skipped: frozenset[str]
) -> Iterator[ev.SubtaskScheduled]:
    """The first ready subtasks in plan order, as many as there are free places."""
    if state.stop is not None:
        return
    free = state.plan.max_parallel - running
    for sid in agenda.ready_in_plan_order():
        if free <= 0:
            return
        if sid in skipped:
            continue
        free -= 1
        yield ev.SubtaskScheduled(
            subtask_id=sid, start_commit=_start_commit(state, agenda.depends_on[sid])
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
    active: Sequence[SubtaskView],
    now: float,
    constraints: Sequence[ResourceConstraint],
    live_tokens: Mapping[str, int],
    tokens: int,
) -> Iterator[ev.ExecutionEvent]:
    """Constraints on running attempts: the ones that watch the clock, and the budgets
    that watch running attempts' live token counts. An attempt its stream filter stopped
    at its allowance is over a budget too, and is stopped as one the supervisor stops.
    `tokens`: the execution's, live counts included."""
    for view in active:
        attempt = view.current_attempt
        if attempt is None:
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
        yield from violation_events(state, context, evaluate(constraints, context))


def _attempt_starts(
    state: ExecutionState,
    active: Sequence[SubtaskView],
    now: float,
    constraints: Sequence[ResourceConstraint],
    tokens: int,
) -> Iterator[ev.ExecutionEvent]:
    """Attempt N is decided, and recorded, before anything runs (store.md), if the
    constraints allow another attempt at all."""
    for view in active:
        attempt = view.current_attempt
        if view.worktree is None:
            continue
        if attempt is not None and not (attempt.interrupted or attempt.judged):
            continue
        if attempt is not None and attempt.accepted:
            continue
        if state.stop is not None:
            yield ev.SubtaskStopped(subtask_id=view.id, reason=_stopped_between(attempt))
            continue
        if attempt is not None and attempt.resolution is not None:
            # one sent back, or cut short: the next is a resolution too, from a clean merge
            yield from next_resolution(state, view, now, constraints, tokens)
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
        yield from violation_events(state, context, verdict)
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


def agent_state_dir(run_root: str, subtask_id: str) -> str:
    """Where a sandboxed agent keeps its sessions across the subtask's attempts (`clean`
    removes it): beside the attempts' folders, which are numbers."""
    return f"{run_root.rstrip('/')}/{subtask_id}/agent-state"


def _judgements(state: ExecutionState, active: Sequence[SubtaskView]) -> Iterator[ev.AttemptJudged]:
    for view in active:
        attempt = view.current_attempt
        if attempt is None or attempt.finished:
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


def _attempt_steps(state: ExecutionState, active: Sequence[SubtaskView]) -> Iterator[Command]:
    for view in active:
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
