"""The git side of an agent's resolution of a merge conflict, in the subtask's worktree.

The integration head is merged with `--no-commit`, leaving git's conflict markers and its
MERGE_HEAD for the agent; afterwards the resolution is committed as the merge it is (two
parents: the branch head and the integration head). What the check compares (the base,
each side and the result of a path) is read back out of git as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from orchestrator.errors import StepFailed
from orchestrator.git.commit import commit_message
from orchestrator.git.recovery import reset_worktree
from orchestrator.git.refs import rev_parse
from orchestrator.git.repo import Identity, add_all_but, first_line, git


async def merge_head(worktree: Path) -> str | None:
    """The commit a merge under way in `worktree` merges, if one is."""
    found = await git("rev-parse", "--quiet", "--verify", "MERGE_HEAD", cwd=worktree, check=False)
    return found.stdout.strip() or None if found.returncode == 0 else None


async def start_merge(
    worktree: Path, *, start_commit: str, merged_in: str, leave_out: Sequence[str]
) -> None:
    """`merged_in` merged into the worktree at `start_commit`, markers left, uncommitted.
    Idempotent: a merge of it already under way on that head is left as it is; anything
    else (a resumed resolution's half-edited files) is reset first, and merged afresh."""
    head = await rev_parse(worktree, "HEAD")
    if head == start_commit and await merge_head(worktree) == merged_in:
        return
    await git("merge", "--abort", cwd=worktree, check=False)
    await reset_worktree(worktree, start_commit, leave_out)
    merged = await git(
        "-c", "merge.conflictStyle=merge", "merge", "--no-commit", "--no-ff", "--quiet",
        merged_in, cwd=worktree, check=False,
    )  # fmt: skip
    if await merge_head(worktree) != merged_in:
        raise StepFailed(
            f"could not merge {merged_in[:12]} into {worktree} for its resolution: "
            f"{first_line(merged)}"
        )


async def merge_base(worktree: Path, one: str, other: str) -> str:
    return (await git("merge-base", one, other, cwd=worktree)).stdout.strip()


async def text_at(worktree: Path, commit: str, path: str) -> str:
    """The file at `commit` as text ("" where it is not, or is not text)."""
    shown = await git("show", f"{commit}:{path}", cwd=worktree, check=False)
    return shown.stdout if shown.returncode == 0 else ""


async def diff_of(worktree: Path, old: str, new: str, paths: Sequence[str]) -> str:
    shown = await git("diff", "--no-ext-diff", old, new, "--", *paths, cwd=worktree, check=False)
    return shown.stdout


@dataclass(frozen=True)
class CommittedResolution:
    head_commit: str
    merge_missing: bool  # no merge under way, nor made: the agent aborted it


async def commit_resolution(
    worktree: Path,
    *,
    merged_in: str,
    message: str,
    trailers: Mapping[str, str],
    identity: Identity,
    leave_out: Sequence[str],
) -> CommittedResolution:
    """Everything the agent left, committed: as the merge, when it is under way (its
    unmerged entries staged as the agent left them: the check looks for markers)."""
    under_way = await merge_head(worktree) == merged_in
    await add_all_but(worktree, leave_out)
    staged = await git("diff", "--cached", "--quiet", "--no-ext-diff", cwd=worktree, check=False)
    if under_way or staged.returncode == 1:
        await git(
            "commit", "--quiet", "--no-verify", "--no-gpg-sign", "--allow-empty",
            "--cleanup=whitespace", "--file=-",
            cwd=worktree, env=identity.env(), stdin=commit_message(message, trailers).encode(),
        )  # fmt: skip
    head = await rev_parse(worktree, "HEAD")
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
