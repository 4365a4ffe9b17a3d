"""Computing the conflict map (core/conflict_map.py) of a set of branches.

Each branch's changed paths come from one `diff-tree`; `merge-tree --write-tree` runs only
for the pairs whose paths intersect (core's `intersecting_pairs`), which a plan of
branches that keep to their own files makes few: 32 branches are 496 pairs, of which a
plan that shares a path one pair in ten merges some fifty. The git processes run a few at a
time, one more than there are cores.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from orchestrator.core.conflict_map import (
    Branch,
    BranchPair,
    ConflictMap,
    PathConflict,
    intersecting_pairs,
)
from orchestrator.errors import KairoError
from orchestrator.git.worktree_look import (
    changed_paths,
    commit_of_tree,
    merge_conflicts,
    worktree_tree,
)

_T = TypeVar("_T")


@dataclass(frozen=True)
class BranchToMap:
    """A subtask's branch; with `worktree`, its uncommitted changes there are included."""

    subtask_id: str
    state: str
    start_commit: str
    head: str
    worktree: Path | None = None
    leave_out: tuple[str, ...] = ()  # files its setup copied in: no part of its work


def workers() -> int:
    return (os.cpu_count() or 1) + 1


async def _gather(calls: Sequence[Callable[[], Awaitable[_T]]], limit: int) -> list[_T]:
    import trio  # here: `report` imports this module's BranchToMap without a trio loop

    results: list[_T | None] = [None] * len(calls)
    limiter = trio.CapacityLimiter(limit)

    async def one(i: int) -> None:
        async with limiter:
            results[i] = await calls[i]()

    async with trio.open_nursery() as nursery:
        for i in range(len(calls)):
            nursery.start_soon(one, i)
    return [result for result in results if result is not None]


async def _branch(repo: Path, wanted: BranchToMap, scratch: Path) -> Branch:
    import trio

    commit, included = wanted.head, False
    if wanted.worktree is not None and await trio.Path(wanted.worktree).is_dir():
        try:
            index = scratch / f"{wanted.subtask_id}.index"
            tree = await worktree_tree(wanted.worktree, index=index, leave_out=wanted.leave_out)
            commit, included = await commit_of_tree(repo, tree, wanted.head), True
        except KairoError:
            pass  # the worktree went away meanwhile: its branch says what is committed
    paths = await changed_paths(repo, wanted.start_commit, commit)
    return Branch(wanted.subtask_id, wanted.state, commit, paths, included)


async def conflict_map(
    repo: Path, branches: Sequence[BranchToMap], *, limit: int | None = None
) -> ConflictMap:
    """The conflict map of `branches`, in their order."""
    limit = limit or workers()
    with tempfile.TemporaryDirectory(prefix="kairo-conflicts-") as scratch:
        looked = await _gather([partial(_branch, repo, b, Path(scratch)) for b in branches], limit)
    by_id = {branch.subtask_id: branch for branch in looked}
    order = {branch.subtask_id: i for i, branch in enumerate(looked)}
    candidates = intersecting_pairs({b.subtask_id: b.paths for b in looked}, order)

    async def merged(first: str, second: str, shared: tuple[str, ...]) -> BranchPair:
        found = await merge_conflicts(repo, by_id[first].commit, by_id[second].commit)
        conflicts = tuple(PathConflict(c.path, c.kind) for c in found)
        return BranchPair(first, second, shared, conflicts)

    pairs = await _gather([partial(merged, *c) for c in candidates], limit)
    return ConflictMap(tuple(looked), tuple(pairs))
