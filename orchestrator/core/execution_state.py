"""The folded state of an execution, and the few ways the fold changes it.

The fold itself (state.py, integration_fold.py) says which event changes what; this module
holds the state and its updates, so that the parts of the fold can share them. A subtask's
state changes only by a move of the lifecycle table (lifecycle.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from orchestrator.core import events as ev
from orchestrator.core.lifecycle import Anomaly, Move, allowed, target
from orchestrator.core.plan import ResolvedPlan, ResolvedSubtask
from orchestrator.core.views import Overlap, SubtaskView

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
    merged: tuple[str, ...] = ()  # subtask ids in the order they were merged (and checked)
    # With `integration_verify`: the merges made since the last check passed, in merge
    # order; the shortest run of them seen failing the check, and whether a `stop --now`
    # cut a check of them (integration_fold.py).
    unverified: tuple[str, ...] = ()
    check_failed: ev.IntegrationChecked | None = None
    conflicted_unchecked: tuple[str, ...] = ()  # conflicted with merges waiting for a check
    check_stopped: bool = False
    checks_run: int = 0  # times `integration_verify` ran to an outcome
    overlaps: tuple[Overlap, ...] = ()  # seen while agents worked, in the order first seen
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
    # `placement: workers`: each subtask's current assignment to a worker, by subtask id.
    assignments: Mapping[str, ev.SubtaskAssigned] = field(default_factory=dict)
    guard: ev.GuardRecorded | None = None  # the record of what the user owns (guard.py)
    breaches: tuple[ev.GuardBreached, ...] = ()  # changes to it the guard found, in order

    @property
    def epoch(self) -> int:
        """The last assignment's epoch (0: none yet)."""
        return max((a.epoch for a in self.assignments.values()), default=0)

    @property
    def plan(self) -> ResolvedPlan:
        return self.created.plan

    def subtask(self, subtask_id: str) -> SubtaskView:
        return self.subtasks[subtask_id]

    def spec(self, subtask_id: str) -> ResolvedSubtask:
        return self.plan.subtask(subtask_id)

    @property
    def fails_at(self) -> int | None:
        """How many of the unverified merges the shortest failing check covered: the
        culprit is among them (a bisection narrows it down to one)."""
        if self.check_failed is None:
            return None
        return self.unverified.index(self.check_failed.subtask_ids[-1]) + 1

    @property
    def status(self) -> ExecutionStatus:
        """The status the log alone says; whether a supervisor lives is the caller's to add."""
        return "RUNNING" if self.ended is None else self.ended


def initial_state(execution_id: str, created: ev.ExecutionCreated) -> ExecutionState:
    subtasks = {s.id: SubtaskView(id=s.id) for s in created.plan.subtasks}
    return ExecutionState(execution_id=execution_id, created=created, subtasks=subtasks)


def add_merged(
    state: ExecutionState, subtask_id: str, move: Move, **changes: object
) -> ExecutionState:
    state = replace(state, merged=(*state.merged, subtask_id))
    return move_subtask(state, subtask_id, move, **changes)


def move_subtask(
    execution: ExecutionState, subtask_id: str, move: Move, /, **changes: object
) -> ExecutionState:
    """The subtask's state after `move`, by the lifecycle table, with other `changes`."""
    source = execution.subtask(subtask_id).state
    to = target(move, source)
    if not allowed(move, source):
        found = Anomaly(execution.seq, subtask_id, move, source, to)
        execution = replace(execution, anomalies=(*execution.anomalies, found))
    return update_subtask(execution, subtask_id, state=to, **changes)


def update_subtask(
    execution: ExecutionState, subtask_id: str, /, **changes: object
) -> ExecutionState:
    view = execution.subtask(subtask_id)
    subtasks = dict(execution.subtasks)
    subtasks[subtask_id] = replace(view, **changes)  # type: ignore[arg-type]
    return replace(execution, subtasks=subtasks)


def update_attempt(
    execution: ExecutionState, subtask_id: str, /, **changes: object
) -> ExecutionState:
    view = execution.subtask(subtask_id)
    if not view.attempts:
        raise ValueError(f"subtask {subtask_id!r} has no attempt to update")
    last = replace(view.attempts[-1], **changes)  # type: ignore[arg-type]
    return update_subtask(execution, subtask_id, attempts=(*view.attempts[:-1], last))
