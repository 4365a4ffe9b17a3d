"""A look at a worktree an agent is working in, without touching anything of its own.

The agent may be running git there itself, so its index is never written: the look adds
the worktree's files to an index file of our own (`GIT_INDEX_FILE`), kept between looks so
that `add` rehashes only what changed since the last, writes that index's tree and
compares it with the commit the subtask started from. Seeded once with a copy of the
worktree's index (git replaces an index by a rename, so a copy is never half written),
whose file stamps save hashing every file a first time.

`conflicts_with` asks whether such a tree would merge into another commit: a commit of it
(dangling, on the subtask's start) is merged with `merge-tree --write-tree`, in the object
database alone.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import StepFailed
from orchestrator.git.invocation import common_of, first_line, git, git_isolated
from orchestrator.git.merge import ConflictedPath, parse_merge_tree
from orchestrator.git.refs import commit_tree
from orchestrator.git.repo import Identity, add_all_but, own_index, worktree_dirs, write_tree

_LOOKER = Identity(Identity.DEFAULT_NAME, Identity.DEFAULT_EMAIL)


@dataclass(frozen=True)
class WorktreeChange:
    tree: str  # of the worktree's files as they are (what `git add --all` would stage)
    paths: frozenset[str]  # changed since the start commit
    start_commit: str = ""
    #: The look's index file as the look left it (inode, size, mtime): `add` writes it
    #: only when something changed, so a next look that finds it so has the same tree.
    index_stamp: tuple[int, int, int] | None = None


async def worktree_tree(worktree: Path, *, index: Path, leave_out: Sequence[str] = ()) -> str:
    """The tree of `worktree`'s files as they are now, through the index file `index`."""
    await _add_all(worktree, index, leave_out)
    return await _write_tree(worktree, index)


async def _add_all(worktree: Path, index: Path, leave_out: Sequence[str]) -> None:
    import trio  # here: as merge.py, which `start` imports with this module's parser

    await trio.to_thread.run_sync(_seed, worktree, index)
    await add_all_but(worktree, leave_out, index=index)


async def _write_tree(worktree: Path, index: Path) -> str:
    return await write_tree(worktree, index=index)


async def changed_paths(repo: Path, base: str, tree: str) -> frozenset[str]:
    """The paths that differ between `base` (a commit or tree) and `tree`; a rename is
    its two paths."""
    found = await git("diff-tree", "-r", "-z", "--name-only", "--no-renames", base, tree, cwd=repo)
    return frozenset(path for path in found.stdout.split("\0") if path)


async def worktree_change(
    worktree: Path,
    *,
    start_commit: str,
    index: Path,
    leave_out: Sequence[str] = (),
    last: WorktreeChange | None = None,
) -> WorktreeChange:
    """What `worktree` changed since `start_commit`; `last`, the previous look's through
    the same `index`, is the answer again where `add` found nothing new (one git process,
    not three)."""
    await _add_all(worktree, index, leave_out)
    if (
        last is not None
        and last.start_commit == start_commit
        and last.index_stamp is not None
        and _stamp(index) == last.index_stamp
    ):
        return last
    tree = await _write_tree(worktree, index)  # which writes its cache of trees there
    paths = await changed_paths(worktree, start_commit, tree)
    return WorktreeChange(tree, paths, start_commit, _stamp(index))


def _stamp(index: Path) -> tuple[int, int, int] | None:
    try:
        found = index.stat()
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


async def commit_of_tree(repo: Path, tree: str, parent: str) -> str:
    """A dangling commit of `tree` on `parent`: what merge-tree merges (it takes commits)."""
    return await commit_tree(repo, tree, (parent,), identity=_LOOKER, message="kairo-orch: a look")


async def merge_conflicts(repo: Path, ours: str, theirs: str) -> tuple[ConflictedPath, ...]:
    """The paths that merging the commits `ours` and `theirs` would leave conflicted."""
    result = await git_isolated(
        "merge-tree", "--write-tree", "-z", "--messages", ours, theirs,
        common=common_of(repo), work_tree=repo, check=False,
    )  # fmt: skip
    if result.returncode not in (0, 1) or not result.stdout:
        raise StepFailed(f"git merge-tree failed in {repo}: {first_line(result)}")
    return parse_merge_tree(result.stdout)[1] if result.returncode == 1 else ()


async def conflicts_with(
    repo: Path, tree: str, *, start_commit: str, onto: str
) -> tuple[ConflictedPath, ...]:
    """What merging `tree` (a subtask's work, from `start_commit`) into the commit `onto`
    would leave conflicted."""
    return await merge_conflicts(repo, onto, await commit_of_tree(repo, tree, start_commit))


def _seed(worktree: Path, index: Path) -> None:
    """Our index, where there is none yet, starts as a copy of the worktree's own; without
    one, empty (the first `add` then hashes every file)."""
    if index.exists():
        return
    index.parent.mkdir(parents=True, exist_ok=True)
    own = _own_index(worktree)
    if own is not None:
        with contextlib.suppress(OSError):
            shutil.copyfile(own, index)


def _own_index(worktree: Path) -> Path | None:
    """The worktree's own index, where git keeps it for a trusted worktree."""
    try:
        return own_index(worktree_dirs(worktree))
    except StepFailed:
        return None
