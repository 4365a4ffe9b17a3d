"""The events of merging at scale (events.py's union holds them with the rest): the merge
queue's checks and the merges they undo, conflicts and an agent's resolution of them, and
the overlaps seen while agents work."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.core.event_base import EventModel, Printed, PrintedLines
from orchestrator.core.os_strings import OsStr
from orchestrator.core.reasons import Reason


class Conflict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    path: OsStr
    kind: OsStr
    with_: tuple[str, ...] = Field(default=(), alias="with")
    message: Printed = ""

    def document(self) -> dict[str, Any]:
        """As `status --json` and `report --json` show it. Its path stays a str, however
        undecodable (renderers show it escaped; `os_strings.json_safe` writes it as JSON)."""
        return {
            "path": self.path,
            "kind": self.kind,
            "with": list(self.with_),
            "message": self.message,
        }


class DroppedHunk(BaseModel):
    """Lines one side of a merge added to a conflicted path that its resolution lacks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: OsStr
    side: Literal["ours", "theirs"]  # the subtask's branch, or the integration branch
    start: int  # the lines it added, 1-based, in that side's version of the file
    end: int
    lines: PrintedLines = ()  # the first of them, as evidence

    @property
    def label(self) -> str:
        """How the prompt names the hunk, and the agent's explanation must."""
        return f"{self.side} {self.path}:{self.start}-{self.end}"


class ResolutionCheck(BaseModel):
    """What the commit step found of an agent's resolution of a merge conflict."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    merged_in: str  # the integration head it merged
    unfinished: tuple[OsStr, ...] = ()  # paths left with conflict markers or unmerged
    merge_missing: bool = False  # the merge was aborted, or never made: no second parent
    dropped: tuple[DroppedHunk, ...] = ()
    unexplained: tuple[OsStr, ...] = ()  # labels of dropped hunks the agent did not explain
    explanation: Printed = ""  # the agent's file naming the hunks it dropped, and why
    diff: Printed = ""  # the integration head against the resolution, on the conflicted paths


class IntegrationChecked(EventModel):
    """`integration_verify` ran on the merge of the last of `subtask_ids`: the merges made
    since the last check passed, up to that one (merge_queue.py). A pass settles them all;
    a failure moves nothing and narrows down where the culprit is."""

    type: Literal["integration_checked"] = "integration_checked"
    subtask_ids: tuple[str, ...]  # in merge order, from the first merge not yet checked
    merge_commit: str  # the merge of subtask_ids[-1]: the commit checked
    exit_code: int
    output_tail: Printed = ""


class MergesUndone(EventModel):
    """The integration branch moved back, by compare-and-swap, to `restored_commit`, the
    last commit whose check passed, before this was recorded: the merges of `subtask_ids`
    (every merge not yet checked, in merge order) are off it. The first of them broke the
    check (`culprit`), or a `stop --now` came first (no culprit). The others merge again."""

    type: Literal["merges_undone"] = "merges_undone"
    subtask_ids: tuple[str, ...]
    restored_commit: str
    culprit: str | None = None
    # Every subtask merged again, on the branch without these merges: those of them that
    # are not the culprit (none under `stop --now`), then those that conflicted with the
    # branch while they were on it. (Older logs list only the latter.)
    merge_again: tuple[str, ...] = ()


class ResolutionStarted(EventModel):
    """A conflicted subtask that opted in (`resolve_conflicts`) gets an attempt at resolving
    its conflict: recorded before anything runs, as `attempt_started` is. Its worktree
    merges `merged_in` with the markers left, and its agent is told what collided."""

    type: Literal["resolution_started"] = "resolution_started"
    subtask_id: str
    attempt: int
    idempotency_key: str
    run_dir: str
    start_commit: str  # the branch head before the merge: a resumed one starts over here
    merged_in: str  # the integration head it conflicted with
    conflicts: tuple[Conflict, ...]


class ResolutionDeclined(EventModel):
    """A conflicted subtask that opted in gets no resolution (a budget, or a stop)."""

    type: Literal["resolution_declined"] = "resolution_declined"
    subtask_id: str
    reason: Reason


OverlapKind = Literal["both_edit", "conflicts_with_merged"]


class OverlapFound(EventModel):
    """A warning seen while agents work (runtime/overlap_watch.py), nothing decided on it:
    two subtasks change the same paths (`both_edit`: the two, in plan order), or a running
    subtask's change would conflict with what is merged (`conflicts_with_merged`: that
    one). Each path of a pair and kind is recorded once: `paths` are the new ones."""

    type: Literal["overlap_found"] = "overlap_found"
    subtasks: tuple[str, ...]
    kind: OverlapKind
    paths: tuple[OsStr, ...]
    at: float = 0.0  # unix time it was seen
