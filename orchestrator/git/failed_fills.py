"""A worktree whose files could not all be written (a full disk, most often): what git
leaves of it that we must take back, and what its message does not say."""

from __future__ import annotations

import shutil
from pathlib import Path

import trio

from orchestrator.errors import StepFailed
from orchestrator.git.refs import branch_ref
from orchestrator.git.repo import git

#: Free space under which a worktree that could not be written is said to be on a full disk.
FULL_BELOW = 1024**2


async def forget_branch_of_a_failed_switch(
    repo_root: Path, branch: str, base: str, error: BaseException
) -> None:
    """`switch --create` makes its branch even when it could not write every file: the
    branch left at `base` by a switch that failed, not refused for its name, is that
    switch's, and goes with its worktree. One the switch was refused for ("a branch named
    ... already exists") is someone's. A switch cancelled (the supervisor stopping) may
    have been either: its branch stays, for `adopt` to finish, as after a crash."""
    if not isinstance(error, StepFailed) or "a branch named" in error.message:
        return
    await git("update-ref", "-d", branch_ref(branch), base, cwd=repo_root, check=False)


async def if_full(path: Path) -> str:
    """What git's "unable to write file" does not say when the disk holding `path` is
    full, to be added to it; asked before the cleanup frees what was written."""
    try:
        free = await trio.to_thread.run_sync(shutil.disk_usage, path.parent)
    except OSError:
        return ""
    if free.free >= FULL_BELOW:
        return ""
    return f" (the file system holding {path.parent} is full: {free.free // 1024} KiB free)"
