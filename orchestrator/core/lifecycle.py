"""A subtask's lifecycle as one table: which move takes it from which states to which.

A move is an event of the subtask, told apart by its outcome where one event type has
several (an attempt judged accepted, sent back, failed or stopped). The fold (state.py)
takes a subtask's next state from this table, and checks the state it leaves against it:

- an event that would make a move the table does not allow is a bug in its writer, and
  the journal refuses it before it is appended (`IllegalMove`);
- an old log that holds one all the same is folded as it always was, the move noted in
  `ExecutionState.anomalies`, which `status` and `report` mention: a log is never refused
  for its history.

docs/architecture.md shows this table (`markdown_table`; a test keeps the two equal).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import get_args

from orchestrator.core.views import SubtaskStateName


class Move(enum.StrEnum):
    """An event of a subtask, and its outcome where its type has several."""

    SCHEDULED = "subtask_scheduled"
    ATTEMPT_STARTED = "attempt_started"
    VERIFY_FINISHED = "verify_finished"
    ACCEPTED = "attempt_judged/accepted"
    SENT_BACK = "attempt_judged/sent_back"
    JUDGED_FAILED = "attempt_judged/failed"
    JUDGED_STOPPED = "attempt_judged/stopped"
    MERGED = "subtask_merged"
    MERGED_TO_CHECK = "subtask_merged/to_check"
    CHECK_PASSED = "integration_verified/passed"
    CHECK_FAILED = "integration_verified/failed"
    CHECK_STOPPED = "integration_verified/stopped"
    CHECKED = "integration_checked/passed"
    UNDONE_CULPRIT = "merges_undone/culprit"
    UNDONE_TO_MERGE_AGAIN = "merges_undone/merge_again"
    UNDONE_STOPPED = "merges_undone/stopped"
    UNDONE_CONFLICT_AGAIN = "merges_undone/conflicted_merge_again"
    CONFLICTED = "subtask_conflicted"
    SKIPPED = "subtask_skipped"
    STOPPED = "subtask_stopped"
    FAILED = "subtask_failed"
    INTERRUPTED = "attempt_interrupted"
    INTERRUPTED_RERUN = "attempt_interrupted/rerun"
    RERUN = "subtask_rerun"
    DEPENDENCY_RERUN = "subtask_rerun/of_its_dependency"
    VERIFY_FINISHED_LATE = "verify_finished/after_judgement"
    RESOLUTION_STARTED = "resolution_started"
    RESOLUTION_DECLINED = "resolution_declined"


@dataclass(frozen=True)
class Transition:
    sources: frozenset[SubtaskStateName]
    target: SubtaskStateName | None  # None: the subtask stays in the state it is in


def _t(*sources: SubtaskStateName, to: SubtaskStateName | None) -> Transition:
    return Transition(frozenset(sources), to)


#: Each move: the states it may leave, and the state it leads to. The way to merged first,
#: then the ways out of it.
TRANSITIONS: Mapping[Move, Transition] = MappingProxyType(
    {
        Move.SCHEDULED: _t("pending", to="preparing"),
        # The first attempt, or the next after one sent back or interrupted.
        Move.ATTEMPT_STARTED: _t("preparing", "running", "verifying", to="running"),
        Move.VERIFY_FINISHED: _t("running", to="verifying"),
        # An attempt is judged after it ran, or after its `verify`.
        Move.ACCEPTED: _t("running", "verifying", to="succeeded"),
        Move.SENT_BACK: _t("running", "verifying", to=None),
        Move.JUDGED_FAILED: _t("running", "verifying", to="failed"),
        Move.JUDGED_STOPPED: _t("running", "verifying", to="stopped"),  # by `stop --now`
        Move.MERGED: _t("succeeded", to="merged"),
        # Merged, `integration_verify` to pass on the integration branch.
        Move.MERGED_TO_CHECK: _t("succeeded", to="integrating"),
        Move.CHECK_PASSED: _t("integrating", to="merged"),
        Move.CHECK_FAILED: _t("integrating", to="failed"),  # the merge undone
        Move.CHECK_STOPPED: _t("integrating", to="stopped"),  # likewise, by `stop --now`
        # Merges checked in a batch (merge_queue.py): settled by a passing check of a
        # run of them; undone when one broke the check (or a stop cut it), the culprit
        # failed and the others back in the queue.
        Move.CHECKED: _t("integrating", to="merged"),
        Move.UNDONE_CULPRIT: _t("integrating", to="failed"),
        Move.UNDONE_TO_MERGE_AGAIN: _t("integrating", to="succeeded"),
        Move.UNDONE_STOPPED: _t("integrating", to="stopped"),
        # Its conflict was with the branch as those merges left it: it may merge now.
        Move.UNDONE_CONFLICT_AGAIN: _t("conflicted", to="succeeded"),
        Move.CONFLICTED: _t("succeeded", to="conflicted"),
        Move.SKIPPED: _t("pending", to="skipped"),
        # Under a stop: one not started yet, or one between two attempts.
        Move.STOPPED: _t("pending", "preparing", "running", "verifying", to="stopped"),
        # A step of the edge failed (a worktree, a pane, a merge, a check), or a limit
        # allowed no further attempt.
        Move.FAILED: _t(
            "preparing", "running", "verifying", "succeeded", "integrating", to="failed"
        ),
        Move.INTERRUPTED: _t("running", to="stopped"),
        Move.INTERRUPTED_RERUN: _t("running", to=None),
        Move.RERUN: _t("stopped", to="running"),  # `resume --rerun-interrupted`
        Move.DEPENDENCY_RERUN: _t("skipped", to="pending"),
        # A check `stop --now` cut, its attempt judged stopped while it ran.
        Move.VERIFY_FINISHED_LATE: _t("stopped", to=None),
        # `resolve_conflicts`: an attempt at resolving the conflict, or the next one after
        # one sent back or interrupted; or none, for a budget or a stop.
        Move.RESOLUTION_STARTED: _t("running", "verifying", "conflicted", to="running"),
        Move.RESOLUTION_DECLINED: _t("conflicted", to=None),
    }
)


def allowed(move: Move, state: SubtaskStateName) -> bool:
    return state in TRANSITIONS[move].sources


def target(move: Move, state: SubtaskStateName) -> SubtaskStateName:
    """Where the move leads from `state` (legal there or not: see `allowed`)."""
    return TRANSITIONS[move].target or state


@dataclass(frozen=True)
class Anomaly:
    """A move a log holds that the table does not allow, as the fold found it."""

    seq: int
    subtask_id: str
    move: Move
    source: SubtaskStateName
    target: SubtaskStateName

    def sentence(self) -> str:
        return (
            f"event {self.seq} ({self.move.value}) took subtask {self.subtask_id} from "
            f"{self.source} to {self.target}, which the lifecycle does not allow"
        )


class IllegalMove(Exception):
    """An event that would make an illegal move, refused before it is appended: a bug in
    kairo-orch, which stops the supervisor (the log stays as it was)."""


def markdown_table() -> str:
    """The table as docs/architecture.md shows it: one row a move."""
    lines = ["| move | from | to |", "| --- | --- | --- |"]
    for move, transition in TRANSITIONS.items():
        sources = ", ".join(f"`{s}`" for s in _in_order(transition.sources))
        to = f"`{transition.target}`" if transition.target else "(stays)"
        lines.append(f"| `{move.value}` | {sources} | {to} |")
    return "\n".join(lines)


def _in_order(states: frozenset[SubtaskStateName]) -> list[str]:
    return [s for s in get_args(SubtaskStateName) if s in states]
