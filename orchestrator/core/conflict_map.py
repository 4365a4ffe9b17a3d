"""The conflict map of an execution: for every pair of its branches that change a path in
common, which paths would conflict if both were merged (git/conflict_map.py computes it
with `git merge-tree`, only for those pairs).

Plain frozen data, so that `kairo-orch conflicts`, the Markdown report and an HTML one
render the same thing; the pairing itself is pure and here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any

from orchestrator.core.inert_text import markdown_code, markdown_text

#: Pairs the report lists; the rest are counted (`kairo-orch conflicts` lists them all).
PAIRS_LISTED = 50
#: Paths named in a line of the report.
PATHS_IN_A_LINE = 5


@dataclass(frozen=True)
class Branch:
    """A subtask's work as the map compares it: a commit and what it changed."""

    subtask_id: str
    state: str  # the subtask's, as `status` says it
    commit: str  # its branch head, or a commit of its worktree as it is now
    paths: frozenset[str]  # changed since its subtask started
    worktree_included: bool = False  # `commit` holds the worktree's uncommitted changes


@dataclass(frozen=True)
class PathConflict:
    path: str
    kind: str  # git's word: content, add/add, modify/delete, ...


@dataclass(frozen=True)
class BranchPair:
    first: str
    second: str
    shared: tuple[str, ...]  # the paths both change
    conflicts: tuple[PathConflict, ...]  # of those merges would not settle; () merges clean

    @property
    def clean(self) -> bool:
        return not self.conflicts


@dataclass(frozen=True)
class ConflictMap:
    branches: tuple[Branch, ...]
    pairs: tuple[BranchPair, ...]  # only those whose changed paths intersect

    @property
    def conflicting(self) -> tuple[BranchPair, ...]:
        return tuple(pair for pair in self.pairs if not pair.clean)


def intersecting_pairs(
    paths: Mapping[str, Set[str]], order: Mapping[str, int] | None = None
) -> list[tuple[str, str, tuple[str, ...]]]:
    """Each pair (in `order`, else in the mapping's) whose paths intersect, with the paths
    they share: found through an index of paths, not by comparing every pair."""
    rank = order if order is not None else {name: i for i, name in enumerate(paths)}
    by_path: dict[str, list[str]] = defaultdict(list)
    for name, changed in paths.items():
        for path in changed:
            by_path[path].append(name)
    shared: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(by_path):
        names = sorted(by_path[path], key=rank.__getitem__)
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                shared[(first, second)].append(path)
    ordered = sorted(shared.items(), key=lambda item: (rank[item[0][0]], rank[item[0][1]]))
    return [(first, second, tuple(found)) for (first, second), found in ordered]


def to_document(conflict_map: ConflictMap) -> dict[str, Any]:
    """`kairo-orch conflicts --json`, and the report's `conflict_map`."""
    return {
        "branches": [
            {
                "subtask_id": branch.subtask_id,
                "state": branch.state,
                "commit": branch.commit,
                "paths": len(branch.paths),
                "worktree_included": branch.worktree_included,
            }
            for branch in conflict_map.branches
        ],
        "pairs": [
            {
                "subtasks": [pair.first, pair.second],
                "shared": list(pair.shared),
                "conflicts": [{"path": c.path, "kind": c.kind} for c in pair.conflicts],
            }
            for pair in conflict_map.pairs
        ],
    }


def _paths(paths: list[str]) -> str:
    shown = ", ".join(markdown_code(path) for path in paths[:PATHS_IN_A_LINE])
    more = len(paths) - PATHS_IN_A_LINE
    return f"{shown} and {more:,} more" if more > 0 else shown


def pair_sentence(pair: dict[str, Any]) -> str:
    """One pair of `to_document`, in words (Markdown)."""
    first, second = pair["subtasks"]
    if not pair["conflicts"]:
        return f"**{first}** and **{second}** both change {_paths(pair['shared'])}: merges clean"
    said = [
        f"{markdown_code(c['path'])} ({markdown_text(c['kind'])})"
        for c in pair["conflicts"][:PATHS_IN_A_LINE]
    ]
    more = len(pair["conflicts"]) - PATHS_IN_A_LINE
    conflicts = ", ".join(said) + (f" and {more:,} more" if more > 0 else "")
    return f"**{first}** and **{second}** would conflict on {conflicts}"


def conflict_map_lines(document: dict[str, Any], most: int = PAIRS_LISTED) -> list[str]:
    """The map as Markdown list lines: pairs that would conflict first, then those that
    overlap and merge clean."""
    pairs = sorted(document["pairs"], key=lambda pair: not pair["conflicts"])
    if not pairs:
        return [f"No two of the {len(document['branches'])} branches change a path in common."]
    lines = [f"- {pair_sentence(pair)}" for pair in pairs[:most]]
    if len(pairs) > most:
        lines.append(f"- and {len(pairs) - most:,} more pairs (`kairo-orch conflicts` lists them)")
    return lines
