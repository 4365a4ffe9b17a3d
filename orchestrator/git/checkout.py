"""A worktree's files and HEAD put at a commit, as `switch`, `reset --hard` and `clean`
did, with nothing of the repository's configuration run: the files are written isolated
(invocation.py: no smudge filter, no hook), and HEAD and the branch are moved by name.

Git LFS files are written as their pointers, as with `GIT_LFS_SKIP_SMUDGE=1`: the LFS
filter is a program the configuration names (docs/operations.md).
"""

from __future__ import annotations

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
    """The worktree's HEAD on `branch` (its files as they are)."""
    await git("symbolic-ref", "-m", _REFLOG_MESSAGE, "HEAD", f"refs/heads/{branch}", cwd=worktree)


async def detach(worktree: Path, commit: str) -> None:
    """The worktree's HEAD on no branch, at `commit` (its files as they are)."""
    await git("update-ref", "--no-deref", "-m", _REFLOG_MESSAGE, "HEAD", commit, cwd=worktree)
