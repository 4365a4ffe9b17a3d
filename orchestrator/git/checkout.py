"""A worktree's files and HEAD put at a commit, as `switch`, `reset --hard` and `clean`
did, with nothing of the repository's configuration run: the files are written isolated
(invocation.py: no smudge filter, no hook), and HEAD and the branch are moved by name.

Git LFS files are written as their pointers, as with `GIT_LFS_SKIP_SMUDGE=1`: the LFS
filter is a program the configuration names (docs/operations.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from orchestrator.git.invocation import git, git_isolated
from orchestrator.git.repo import all_paths_but, own_index, worktree_dirs

_REFLOG_MESSAGE = "kairo-orch: check out"


async def check_out(worktree: Path, commit: str) -> None:
    """The worktree's files and index at `commit` (an object id): only the files that
    differ from its index, or that were changed, are written; local changes are
    discarded, as by `switch --discard-changes`. HEAD is not touched."""
    dirs = worktree_dirs(worktree)
    await git_isolated(
        "read-tree", "-u", "--reset", f"{commit}^{{tree}}",
        common=dirs.common, work_tree=worktree, index=own_index(dirs),
    )  # fmt: skip


async def remove_untracked(
    worktree: Path, *, nested_repositories: bool = False, leave_out: Sequence[str] = ()
) -> None:
    """Untracked files gone, ignored ones kept (an installed node_modules or .venv is no
    change of the agent's), `leave_out` kept; with `nested_repositories`, the
    repositories an agent made inside its tree too (`clean -ff`)."""
    dirs = worktree_dirs(worktree)
    force = ["--force", "--force"] if nested_repositories else ["--force"]
    await git_isolated(
        "clean", "-d", *force, "--quiet", "--", *all_paths_but(leave_out),
        common=dirs.common, work_tree=worktree, index=own_index(dirs),
    )  # fmt: skip


async def attach(worktree: Path, branch: str) -> None:
    """The worktree's HEAD on `branch` (its files as they are): its HEAD file written as
    `symbolic-ref` writes it, whole (a rename), without a git process of its own: every
    fill and reset makes one, and a fan-out makes sixteen at once."""
    import trio

    head = worktree_dirs(worktree).git_dir / "HEAD"
    await trio.to_thread.run_sync(_replace, head, f"ref: refs/heads/{branch}\n".encode())


def _replace(path: Path, content: bytes) -> None:
    # git's own lock-and-rename, under a name of ours; never through a link an agent left
    # there (the directory is its worktree's, writable by it in local mode).
    staged = path.with_name(f"{path.name}.kairo.tmp")
    staged.unlink(missing_ok=True)
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(content)
    staged.replace(path)


async def detach(worktree: Path, commit: str) -> None:
    """The worktree's HEAD on no branch, at `commit` (its files as they are)."""
    await git("update-ref", "--no-deref", "-m", _REFLOG_MESSAGE, "HEAD", commit, cwd=worktree)
