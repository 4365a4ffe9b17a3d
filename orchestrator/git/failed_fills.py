"""A worktree whose files could not all be written (a full disk, most often): what git
leaves of it that we must take back, and what its message does not say."""

from __future__ import annotations

import shutil
from pathlib import Path

import trio

from orchestrator.errors import StepFailed
from orchestrator.git.invocation import git
from orchestrator.git.refs import BranchExists, branch_ref

#: Free space under which a worktree that could not be written is said to be on a full disk.
FULL_BELOW = 1024**2


async def forget_branch_of_a_failed_switch(
    repo_root: Path, branch: str, base: str, error: BaseException
) -> None:
    """A fill makes its branch before it writes the files: the branch left at `base` by a
    fill that failed, not refused for its name, is that fill's, and goes with its
    worktree. One the fill was refused for (`BranchExists`) is someone's. A fill cancelled
    (the supervisor stopping) may have been either: its branch stays, for `adopt` to
    finish, as after a crash."""
    if not isinstance(error, StepFailed) or isinstance(error, BranchExists):
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
