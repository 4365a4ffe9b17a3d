"""Saving what an interrupted attempt left, and putting its worktree back at a safe point.

Nothing is lost: the worktree's whole state (the agent's own commits, changes, untracked
files; ignored files excluded) becomes one commit on a recovery ref under `refs/kairo/`,
written through a private index so that the worktree's own index is not touched. Only
then is the worktree reset. Both isolated from the repository's configuration
(invocation.py).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from orchestrator.git.checkout import attach, check_out, remove_untracked
from orchestrator.git.invocation import git, git_isolated
from orchestrator.git.refs import branch_ref, commit_tree, rev_parse, tree_of
from orchestrator.git.repo import Identity, add_all_but, worktree_dirs, write_tree


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
    dirs = worktree_dirs(worktree)
    with tempfile.TemporaryDirectory(prefix="kairo-index-") as scratch:
        index = Path(scratch) / "index"
        await git_isolated("read-tree", head, common=dirs.common, index=index)
        await add_all_but(worktree, leave_out, index=index)
        tree = await write_tree(worktree, index=index)
    if head == safe_commit and tree == await tree_of(worktree, safe_commit):
        return None
    commit = await commit_tree(worktree, tree, (head,), identity=identity, message=message)
    await git("update-ref", ref, commit, cwd=worktree)
    return ref


async def reset_worktree(
    worktree: Path, commit: str, *, branch: str, leave_out: Sequence[str] = ()
) -> None:
    """The worktree on `branch`, both at `commit`; untracked files gone but `leave_out`,
    ignored ones kept (an installed node_modules or .venv is no change of the agent's).

    The branch is named, never taken from HEAD: an agent may have pointed its HEAD at
    any branch, the user's own included."""
    await git("update-ref", "-m", "kairo-orch: reset", branch_ref(branch), commit, cwd=worktree)
    await attach(worktree, branch)
    await check_out(worktree, commit)
    await remove_untracked(worktree, leave_out=leave_out)
