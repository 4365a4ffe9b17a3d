"""What the fold (state.py) says of each subtask and each of its attempts.

Frozen views, rebuilt by the fold at every event; the names of a subtask's states, and
which of them hold a place or end it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orchestrator.core import events as ev
from orchestrator.core.reasons import Reason

SubtaskStateName = Literal[
    "pending",
    "preparing",
    "running",
    "verifying",
    "succeeded",
    "integrating",
    "merged",
    "conflicted",
    "failed",
    "skipped",
    "stopped",
]

# States after which nothing more happens to a subtask in this execution.
TERMINAL: frozenset[SubtaskStateName] = frozenset(
    {"merged", "conflicted", "failed", "skipped", "stopped"}
)
# States that hold one of the `max_parallel` places. Not `integrating`: merged, its agent
# and its `verify` done, it waits for `integration_verify` on the integration branch.
ACTIVE: frozenset[SubtaskStateName] = frozenset({"preparing", "running", "verifying"})


@dataclass(frozen=True)
class AttemptView:
    number: int
    idempotency_key: str
    run_dir: str
    start_commit: str
    pane_id: str | None = None  # None until the pane is known to be open
    started_at: float | None = None  # unix time its runner started, for its timeout
    interrupted: bool = False
    recovery_ref: str | None = None
    stopped_by: Reason | None = None  # the constraint's or the stop's reason, when one cut it
    cut_by_stop: bool = False  # `stop --now` killed it: the subtask ends stopped, not failed
    tree: str = ""
    exit_code: int | None = None
    output_tail: str = ""
    tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    session_id: str | None = None
    resumed_session: str | None = None  # the earlier session this attempt continued
    result: str | None = None  # the agent program's own word on how its run ended
    is_error: bool = False
    api_retries: int = 0
    api_status: int | None = None
    refusals: tuple[ev.Refusal, ...] = ()
    summary: str = ""
    written_by_others: tuple[ev.RunnerRecord, ...] = ()  # of its runner's records
    head_commit: str | None = None
    changed: bool | None = None
    # The paths it changed (from its start to its commit), and those the subtask's branch
    # has changed since the subtask started; None where the log does not say (older logs).
    paths: tuple[str, ...] | None = None
    branch_paths: tuple[str, ...] | None = None
    in_submodules: tuple[str, ...] = ()  # it wrote there, and no commit records it
    verify_exit_code: int | None = None
    verify_output_tail: str = ""
    accepted: bool | None = None
    reason: Reason | None = None
    feedback: str = ""  # what the next attempt is told
    # It started on a branch that earlier attempts of its subtask had changed: what it
    # leaves is judged with their work, not alone (an attempt sent back to finish may
    # only need to check that it is done).
    after_changes: bool = False
    # An attempt at resolving a merge conflict: what it merged and why, and what the commit
    # step found of its resolution.
    resolution: ev.ResolutionStarted | None = None
    resolution_check: ev.ResolutionCheck | None = None

    @property
    def exited(self) -> bool:
        return self.exit_code is not None

    @property
    def committed(self) -> bool:
        return self.head_commit is not None

    @property
    def judged(self) -> bool:
        return self.accepted is not None

    @property
    def finished(self) -> bool:
        """Nothing more will happen to this attempt: judged, or cut short by a crash."""
        return self.judged or self.interrupted


@dataclass(frozen=True)
class SubtaskView:
    id: str
    state: SubtaskStateName = "pending"
    branch: str | None = None
    worktree: str | None = None
    start_commit: str | None = None
    head_commit: str | None = None
    attempts: tuple[AttemptView, ...] = ()
    reason: Reason | None = None
    conflicts: tuple[ev.Conflict, ...] = ()
    merge: ev.SubtaskMerged | None = None
    succeeded_at_seq: int | None = None
    skipped_for: str | None = None  # the dependency whose failure skipped it
    copied: tuple[str, ...] = ()  # files its worktree's setup copied in
    integration_output: str = ""  # the tail of a failed integration_verify after its merge
    resolution_declined: bool = False  # opted in, and a budget or a stop kept it from one

    @property
    def resolution_attempts(self) -> int:
        """Attempts at resolving a conflict so far (one cut short by a crash not counted)."""
        return sum(1 for a in self.attempts if a.resolution is not None and not a.interrupted)

    @property
    def current_attempt(self) -> AttemptView | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def tokens(self) -> int:
        return sum(attempt.tokens for attempt in self.attempts)

    @property
    def input_tokens(self) -> int:
        return sum(attempt.input_tokens for attempt in self.attempts)

    @property
    def output_tokens(self) -> int:
        return sum(attempt.output_tokens for attempt in self.attempts)

    @property
    def cost_usd(self) -> float:
        return round(sum(attempt.cost_usd for attempt in self.attempts), 6)

    @property
    def session_id(self) -> str | None:
        """The agent's last conversation, which a nudge or a re-run resumes."""
        return next((a.session_id for a in reversed(self.attempts) if a.session_id), None)


@dataclass(frozen=True)
class Overlap:
    """What the `overlap_found` events of one pair of subtasks (or one subtask, against
    merged work) and one kind say together: every path, in the order they were seen."""

    subtasks: tuple[str, ...]
    kind: ev.OverlapKind
    paths: tuple[str, ...]
    at: float  # unix time it was first seen
