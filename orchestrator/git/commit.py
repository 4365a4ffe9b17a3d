"""Committing what an agent left in its worktree, on the agent's behalf.

An agent need not commit: when it exits, everything it left (untracked files included,
ignored files excluded) is committed on its branch with trailers that tie the commit to
its execution, subtask and attempt. Commits the agent made itself stay as they are.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from orchestrator.errors import StepFailed
from orchestrator.git.history import diffstat
from orchestrator.git.invocation import git
from orchestrator.git.refs import commit_and_tree, commit_tree, is_full_oid, rev_parse, update_ref
from orchestrator.git.repo import Identity, add_all_but, write_tree

# git's own test for a trailer token is looser; this keeps ours unambiguous to parse.
_TRAILER_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*")

# An operation an agent can leave half done, as the file git keeps while it is under way.
_UNFINISHED = {
    "MERGE_HEAD": "a merge",
    "rebase-merge": "a rebase",
    "rebase-apply": "a rebase or `git am`",
    "CHERRY_PICK_HEAD": "a cherry-pick",
    "REVERT_HEAD": "a revert",
    "BISECT_LOG": "a bisect",
}


@dataclass(frozen=True)
class CommitOutcome:
    #: The branch head afterwards: the new commit, or the agent's own last commit.
    head_commit: str
    #: Whether the branch moved since `start_commit`, by this commit or the agent's own.
    changed: bool
    #: Files that differ between `start_commit` and `head_commit` (a rename counts once).
    files_changed: int
    #: Submodules (their paths) the agent wrote files into, which no commit here records.
    in_submodules: tuple[str, ...] = ()
    #: The paths that differ between `start_commit` and `head_commit`.
    paths: tuple[str, ...] = ()


def commit_message(message: str, trailers: Mapping[str, str]) -> str:
    """`message`, then a blank line and one `Key: value` line per trailer."""
    lines = []
    for key, value in trailers.items():
        if not _TRAILER_KEY.fullmatch(key):
            raise ValueError(f"invalid trailer key {key!r}")
        if "\n" in value or not value.strip():
            raise ValueError(f"trailer {key!r} needs a one-line, non-empty value")
        lines.append(f"{key}: {value.strip()}")
    body = message.strip() or "kairo-orch: agent changes"
    return body + ("\n\n" + "\n".join(lines) if lines else "") + "\n"


async def commit_all(
    worktree: Path,
    *,
    message: str,
    trailers: Mapping[str, str],
    identity: Identity,
    start_commit: str,
    expected_branch: str | None = None,
    leave_out: Sequence[str] = (),
) -> CommitOutcome:
    """Commit everything left in `worktree` on its branch; do nothing when nothing is left.

    `start_commit` is the branch head the attempt started from. `expected_branch`, when
    given, guards against an agent that switched branches: the commit would otherwise
    land on whatever it switched to. `leave_out` are paths that are not the agent's work
    (files copied in by the worktree's setup).
    """
    branch = await _require_committable(worktree, expected_branch)
    await add_all_but(worktree, leave_out)
    head, head_tree = await commit_and_tree(worktree, branch)
    tree = await write_tree(worktree)
    if tree != head_tree:
        made = await commit_tree(
            worktree, tree, (head,), identity=identity, message=commit_message(message, trailers)
        )
        await update_ref(worktree, branch, made, head)
        head = made
    start = start_commit if is_full_oid(start_commit) else await rev_parse(worktree, start_commit)
    stat = None if head == start else await diffstat(worktree, start, head)
    written = await trio.to_thread.run_sync(written_submodules, worktree)
    if stat is None:
        return CommitOutcome(head, False, 0, written)
    return CommitOutcome(head, True, stat.files, written, stat.paths)


def written_submodules(worktree: Path) -> tuple[str, ...]:
    """The submodules of `.gitmodules` whose directory holds files in `worktree`.

    A worktree's submodules are not checked out (`git worktree add` does not), and git
    sees nothing written into their empty directories: an agent that edits there changes
    nothing of the branch, and must be told so rather than that it "changed no file"."""
    try:
        text = (worktree / ".gitmodules").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    written = []
    for path in re.findall(r"^\s*path\s*=\s*(.+?)\s*$", text, flags=re.MULTILINE):
        directory = worktree / path
        if not directory.resolve().is_relative_to(worktree.resolve()):
            continue  # not ours to look into
        with contextlib.suppress(OSError):
            if any(entry.name != ".git" for entry in directory.iterdir()):
                written.append(path)
    return tuple(written)


async def _require_committable(worktree: Path, expected_branch: str | None) -> str:
    """The branch (full ref) that HEAD is on, where "commit everything" means committing
    on it; refuse a worktree whose state makes it mean something else."""
    if not await trio.Path(worktree).is_dir():
        raise StepFailed(f"worktree {worktree} does not exist")
    names = list(_UNFINISHED)
    query = [arg for name in names for arg in ("--git-path", name)]
    paths = await git("rev-parse", *query, cwd=worktree)
    for name, raw in zip(names, paths.stdout.splitlines(), strict=True):
        if await trio.Path(worktree, raw).exists():
            raise StepFailed(
                f"the agent left {_UNFINISHED[name]} unfinished in {worktree}; "
                "finish or abort it there before its work can be committed",
                branch=expected_branch,
            )
    head = await git("symbolic-ref", "--quiet", "HEAD", cwd=worktree, check=False)
    if head.returncode != 0:
        branch = f"its branch {expected_branch!r}" if expected_branch else "its branch"
        raise StepFailed(
            f"the worktree {worktree} has a detached HEAD; check out {branch} again "
            "before its work can be committed",
            branch=expected_branch,
        )
    current = head.stdout.strip()
    if expected_branch is not None and current != f"refs/heads/{expected_branch}":
        raise StepFailed(
            f"the worktree {worktree} is on {current.removeprefix('refs/heads/')!r}, "
            f"not on its branch {expected_branch!r}",
            branch=expected_branch,
        )
    return current
