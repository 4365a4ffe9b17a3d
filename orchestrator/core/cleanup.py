"""What `clean` did, as data: each thing it removed or kept, and why (cli/words.py says it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RemovedKind = Literal[
    "cgroup",
    "tmux_session",
    "worktree",
    "branch",
    "integration_checkout",
    "integration_branch",
    "guard_refs",
    "agent_state",
]


@dataclass(frozen=True)
class Removed:
    kind: RemovedKind
    name: str  # the session, the path (a cgroup's too), the branch
    #: A branch of unmerged work (`--force`): its head, which brings it back for a while.
    unmerged_head: str | None = None
    #: An integration branch: the user's branch its head is on; None: nothing was merged.
    held_by: str | None = None


KeptWhy = Literal["unmerged", "uncommitted", "refused"]


@dataclass(frozen=True)
class SubtaskKept:
    """A subtask's branch and worktree, kept: they hold work, or git refused."""

    subtask_id: str
    why: KeptWhy
    branch: str
    worktree: str | None = None
    message: str = ""  # git's refusal


@dataclass(frozen=True)
class IntegrationBranchKept:
    branch: str


@dataclass(frozen=True)
class GuardRefsKept:
    """The guard's refs of an execution whose guard found changes: they keep what those
    changes took from the user (a deleted branch's commits) from git's gc."""

    namespace: str


@dataclass(frozen=True)
class RunFolderKept:
    """The agents' output and logs of an execution whose log is gone: the user's to read."""

    folder: str


@dataclass(frozen=True)
class SparesRemoved:
    count: int


@dataclass(frozen=True)
class SpareKept:
    """A spare worktree locked by the user (`git worktree lock`)."""

    path: str


Cleaned = (
    Removed
    | SubtaskKept
    | IntegrationBranchKept
    | GuardRefsKept
    | RunFolderKept
    | SparesRemoved
    | SpareKept
)


@dataclass(frozen=True)
class ExecutionCleaned:
    execution_id: str
    ended: str | None  # None: an execution without a log, or one cleaned before its end
    steps: tuple[Cleaned, ...]


@dataclass(frozen=True)
class NotEnded:
    """Left alone: it has not ended."""

    execution_id: str
    status: str


@dataclass(frozen=True)
class Refused:
    """Left alone, for the reason the refusal gives (its supervisor is letting go, say)."""

    execution_id: str
    message: str


ExecutionLeftAlone = NotEnded | Refused
