"""Saving what an interrupted attempt left, and putting its worktree back at a safe point.

Nothing is lost: the worktree's whole state (the agent's own commits, changes, untracked
files; ignored files excluded) becomes one commit on a recovery ref under `refs/kairo/`,
written through a private index so that the worktree's own index is not touched. Only
then is the worktree reset.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from orchestrator.git.refs import rev_parse, tree_of
from orchestrator.git.repo import Identity, add_all_but, all_paths_but, git


async def save_worktree_state(
    worktree: Path,
    *,
    ref: str,
    safe_commit: str,
    message: str,
    identity: Identity,
    leave_out: Sequence[str] = (),
) -> str | None:
    """Point `ref` at a commit of everything in `worktree`; None if nothing changed since
    `safe_commit` (then no ref is written)."""
    head = await rev_parse(worktree, "HEAD")
    with tempfile.TemporaryDirectory(prefix="kairo-index-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        await git("read-tree", head, cwd=worktree, env=env)
        await add_all_but(worktree, leave_out, env=env)
        tree = (await git("write-tree", cwd=worktree, env=env)).stdout.strip()
    if head == safe_commit and tree == await tree_of(worktree, safe_commit):
        return None
    commit = (
        await git(
            "commit-tree",
            "--no-gpg-sign",
            tree,
            "-p",
            head,
            "-m",
            message,
            cwd=worktree,
            env=identity.env(),
        )
    ).stdout.strip()
    await git("update-ref", ref, commit, cwd=worktree)
    return ref


async def reset_worktree(worktree: Path, commit: str, leave_out: Sequence[str] = ()) -> None:
    """The worktree and its branch at `commit`; untracked files gone but `leave_out`,
    ignored ones kept (an installed node_modules or .venv is no change of the agent's)."""
    await git("reset", "--hard", "--quiet", commit, cwd=worktree)
    await git("clean", "-fdq", "--", *all_paths_but(leave_out), cwd=worktree)
