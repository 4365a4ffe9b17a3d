"""The git side of an agent's resolution of a merge conflict, in the subtask's worktree.

The integration head is merged in as `git merge --no-commit` would, but isolated
(invocation.py: no merge driver, filter or hook of the repository runs): merge-tree's
result, conflict markers and all, is checked out, its conflicted paths left unmerged in
the index, and MERGE_HEAD written for the agent; afterwards the resolution is committed as
the merge it is (two parents: the branch head and the integration head), on the subtask's
branch by name. What the check compares (the base, each side and the result of a path) is
read back out of git as text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from orchestrator.errors import StepFailed
from orchestrator.git.checkout import check_out
from orchestrator.git.commit import commit_message
from orchestrator.git.invocation import first_line, git, git_isolated
from orchestrator.git.recovery import reset_worktree
from orchestrator.git.refs import branch_ref, commit_and_tree, commit_tree, rev_parse, update_ref
from orchestrator.git.repo import Identity, add_all_but, own_index, worktree_dirs, write_tree

# What `git merge --no-commit` leaves in a worktree's git directory, and `git commit` takes.
_MERGE_STATE = ("MERGE_HEAD", "MERGE_MSG", "MERGE_MODE")


async def merge_head(worktree: Path) -> str | None:
    """The commit a merge under way in `worktree` merges, if one is."""
    found = await git("rev-parse", "--quiet", "--verify", "MERGE_HEAD", cwd=worktree, check=False)
    return found.stdout.strip() or None if found.returncode == 0 else None


async def start_merge(
    worktree: Path, *, branch: str, start_commit: str, merged_in: str, leave_out: Sequence[str]
) -> None:
    """`merged_in` merged into the worktree at `start_commit` (on `branch`), markers left,
    uncommitted. Idempotent: a merge of it already under way on that head is left as it
    is; anything else (a resumed resolution's half-edited files) is reset first, and
    merged afresh."""
    head = await rev_parse(worktree, "HEAD")
    if head == start_commit and await merge_head(worktree) == merged_in:
        return
    await _forget_merge(worktree)
    await reset_worktree(worktree, start_commit, branch=branch, leave_out=leave_out)
    dirs = worktree_dirs(worktree)
    merged = await git_isolated(
        "-c", "merge.conflictStyle=merge", "merge-tree", "--write-tree", "--no-messages", "-z",
        start_commit, merged_in, common=dirs.common, work_tree=worktree, check=False,
    )  # fmt: skip
    if merged.returncode not in (0, 1) or not merged.stdout:
        raise StepFailed(
            f"could not merge {merged_in[:12]} into {worktree} for its resolution: "
            f"{first_line(merged)}"
        )
    tree, *entries = merged.stdout.split("\0")
    await check_out(worktree, tree)
    unmerged = [entry for entry in entries if entry]  # "MODE OID STAGE\tPATH", each
    if unmerged:
        paths = dict.fromkeys(entry.split("\t", 1)[1] for entry in unmerged)
        removed = [f"0 {'0' * len(tree)}\t{path}" for path in paths]
        await git_isolated(
            "update-index", "-z", "--index-info",
            common=dirs.common, work_tree=worktree, index=own_index(dirs),
            stdin="".join(f"{line}\0" for line in (*removed, *unmerged)).encode(
                errors="surrogateescape"
            ),
        )  # fmt: skip
    state = {
        "MERGE_HEAD": f"{merged_in}\n",
        "MERGE_MSG": f"Merge commit '{merged_in}'\n",
        "MERGE_MODE": "no-ff",
    }
    for name, text in state.items():
        await trio.Path(dirs.git_dir, name).write_text(text, encoding="utf-8")


async def _forget_merge(worktree: Path) -> None:
    """What a merge under way left in the worktree's git directory, gone (`merge --abort`
    without its checkout: the worktree is reset next)."""
    dirs = worktree_dirs(worktree)
    for name in _MERGE_STATE:
        with contextlib.suppress(FileNotFoundError):
            await trio.Path(dirs.git_dir, name).unlink()


async def merge_base(worktree: Path, one: str, other: str) -> str:
    return (await git("merge-base", one, other, cwd=worktree)).stdout.strip()


async def text_at(worktree: Path, commit: str, path: str) -> str:
    """The file at `commit` as text ("" where it is not, or is not text)."""
    shown = await git("cat-file", "blob", f"{commit}:{path}", cwd=worktree, check=False)
    return shown.stdout if shown.returncode == 0 else ""


async def diff_of(worktree: Path, old: str, new: str, paths: Sequence[str]) -> str:
    shown = await git(
        "diff-tree", "-p", "--no-ext-diff", "--no-textconv", "--no-color", old, new,
        "--", *paths, cwd=worktree, check=False,
    )  # fmt: skip
    return shown.stdout


@dataclass(frozen=True)
class CommittedResolution:
    head_commit: str
    merge_missing: bool  # no merge under way, nor made: the agent aborted it


async def commit_resolution(
    worktree: Path,
    *,
    branch: str,
    merged_in: str,
    message: str,
    trailers: Mapping[str, str],
    identity: Identity,
    leave_out: Sequence[str],
) -> CommittedResolution:
    """Everything the agent left, committed on `branch`: as the merge, when it is under
    way (its unmerged entries staged as the agent left them: the check looks for
    markers)."""
    under_way = await merge_head(worktree) == merged_in
    await add_all_but(worktree, leave_out)
    ref = branch_ref(branch)
    head, head_tree = await commit_and_tree(worktree, ref)
    tree = await write_tree(worktree)
    if under_way or tree != head_tree:
        parents = (head, merged_in) if under_way else (head,)
        made = await commit_tree(
            worktree, tree, parents, identity=identity, message=commit_message(message, trailers)
        )
        await update_ref(worktree, ref, made, head)
        head = made
    if under_way:
        await _forget_merge(worktree)
    merged = await git("merge-base", "--is-ancestor", merged_in, head, cwd=worktree, check=False)
    return CommittedResolution(head, merged.returncode != 0)


async def keep(worktree: Path, ref: str, commit: str) -> None:
    """`ref` at `commit`, whatever it held (the same attempt's, committed again)."""
    await git("update-ref", ref, commit, cwd=worktree)


async def read_and_remove(path: Path) -> str:
    """The agent's explanation file, removed so that it is never committed ("" if none)."""
    target = trio.Path(path)
    try:
        text = await target.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    await target.unlink()
    return text
