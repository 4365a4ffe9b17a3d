"""What a subtask works in, whoever provides it: the port the runtime calls (`Edges`), of
which workspace.py's local worktrees are one kind."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class WorkspaceKind(enum.Enum):
    LOCAL = "local"
    REMOTE_GIT = "remote_git"
    EPHEMERAL = "ephemeral"


@dataclass(frozen=True)
class Workspace:
    subtask_id: str
    path: Path
    branch: str
    #: The commit oid the branch started from (resolved, never a symbolic name).
    base_commit: str
    kind: WorkspaceKind


class WorkspaceProvider(Protocol):
    """Where subtasks work. LOCAL is a worktree of the user's repository; REMOTE_GIT
    and EPHEMERAL (a clone elsewhere, a throwaway container) fit the same calls."""

    async def create(
        self, subtask_id: str, branch: str, base_commit: str, path: Path
    ) -> Workspace: ...

    async def release(self, workspace_path: Path) -> None: ...

    async def adopt(self, subtask_id: str, branch: str, path: Path) -> Workspace | None: ...

    async def exists(self, path: Path) -> bool: ...

    async def check_out_detached(self, path: Path, commit: str) -> Path: ...
