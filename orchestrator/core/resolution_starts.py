"""When `decide` starts an agent's attempt at resolving a conflict, and when it declines to.

A conflicted subtask that opted in (`resolve_conflicts`) with resolution attempts left gets
one when a place is free, if the constraints allow another attempt: the token budgets and
the execution's clock apply, `limits.max_attempts` does not (resolution attempts are
bounded by `resolve_conflicts.attempts` alone). One the constraints or a stop refuse is
declined, on the record, and the subtask stays conflicted.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence

from orchestrator.core import events as ev
from orchestrator.core.agenda import Agenda, Group
from orchestrator.core.constraints import (
    ResourceAction,
    ResourceConstraint,
    ResourceContext,
    Verdict,
    evaluate,
    violation_events,
)
from orchestrator.core.ids import idempotency_key
from orchestrator.core.reasons import Reason, ReasonCode, sentence
from orchestrator.core.resolution import last_resolution
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import SubtaskView

NOT_COUNTED = frozenset({"max_attempts"})


def resolution_starts(
    state: ExecutionState,
    agenda: Agenda,
    running: int,
    now: float,
    constraints: Sequence[ResourceConstraint],
    tokens: int,
) -> Iterator[ev.ExecutionEvent]:
    """The first resolutions of conflicted subtasks, as many as there are free places."""
    free = state.plan.max_parallel - running
    for sid in agenda.group(Group.TO_RESOLVE):
        view = state.subtask(sid)
        if state.stop is not None:
            reason = Reason(
                code=ReasonCode.STOPPED,
                detail="the execution was stopped before its conflict could be resolved",
            )
            yield ev.ResolutionDeclined(subtask_id=sid, reason=reason)
            continue
        # It merges the integration branch in: only once what is on it has passed its
        # check, or a culprit undone would come back with the resolution.
        if free <= 0 or state.unverified:
            return
        assert view.head_commit is not None and state.integration_head is not None
        started = yield from _start(
            state,
            view,
            now,
            constraints,
            tokens,
            start_commit=view.head_commit,
            merged_in=state.integration_head,
            conflicts=view.conflicts,
        )
        free -= 1 if started else 0


def next_resolution(
    state: ExecutionState,
    view: SubtaskView,
    now: float,
    constraints: Sequence[ResourceConstraint],
    tokens: int,
) -> Iterator[ev.ExecutionEvent]:
    """After a resolution sent back, or cut short: another, from the same clean merge, or
    the end of the subtask when its resolution attempts are spent."""
    last = last_resolution(view)
    assert last is not None
    allowed = state.spec(view.id).resolve_attempts
    if view.resolution_attempts >= allowed:
        attempt = view.current_attempt
        said = attempt.reason if attempt is not None else None
        why = f"; the last one: {sentence(said)}" if said is not None else ""
        # Said in the last attempt's word (resolution_unfinished, ...): max_attempts is
        # the limit of the subtask's own attempts, which resolutions do not count against.
        reason = Reason(
            code=said.code if said is not None else ReasonCode.RESOLUTION_UNFINISHED,
            detail=f"{allowed} resolution attempt(s) were not accepted{why}",
        )
        yield ev.SubtaskFailed(subtask_id=view.id, reason=reason)
        return
    yield from _start(
        state,
        view,
        now,
        constraints,
        tokens,
        start_commit=last.start_commit,
        merged_in=last.merged_in,
        conflicts=last.conflicts,
    )


def _start(
    state: ExecutionState,
    view: SubtaskView,
    now: float,
    constraints: Sequence[ResourceConstraint],
    tokens: int,
    *,
    start_commit: str,
    merged_in: str,
    conflicts: tuple[ev.Conflict, ...],
) -> Generator[ev.ExecutionEvent, None, bool]:
    """`resolution_started`, or why not; returns whether it started."""
    number = len(view.attempts) + 1
    context = ResourceContext(
        state=state,
        subtask_id=view.id,
        attempt=number,
        phase="next_attempt",
        execution_elapsed_s=max(0.0, now - state.started_at) if state.started_at and now else 0.0,
        execution_tokens=tokens,
    )
    verdict = evaluate(constraints, context)
    verdict = Verdict(
        action=max(
            (a for v, a in verdict.violations if v.constraint not in NOT_COUNTED),
            default=ResourceAction.ALLOW,
        ),
        violations=tuple((v, a) for v, a in verdict.violations if v.constraint not in NOT_COUNTED),
    )
    yield from violation_events(state, context, verdict)
    if verdict.action >= ResourceAction.GRACEFUL_EXIT:
        assert verdict.reason is not None
        if view.state == "conflicted":
            yield ev.ResolutionDeclined(subtask_id=view.id, reason=verdict.reason)
        else:
            yield ev.SubtaskFailed(subtask_id=view.id, reason=verdict.reason)
        return False
    yield ev.ResolutionStarted(
        subtask_id=view.id,
        attempt=number,
        idempotency_key=idempotency_key(state.execution_id, view.id, number, "agent"),
        run_dir=f"{state.created.run_root.rstrip('/')}/{view.id}/{number}",
        start_commit=start_commit,
        merged_in=merged_in,
        conflicts=conflicts,
    )
    return True
