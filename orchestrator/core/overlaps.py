"""Overlaps between subtasks while their agents work: which to record, and how to say them.

The supervisor looks at its running worktrees now and then (runtime/overlap_watch.py) and
hands what it saw here: the paths each running subtask has changed since it started, and
those that would conflict with the integration branch. Pure: what is new of that, given
what the log holds already, is a list of `overlap_found` events; each path of a pair of
subtasks (and of a kind) is recorded once, however often it is seen.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Set
from typing import Any

from orchestrator.core import events as ev
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import Overlap

#: Paths named in one sentence; the rest are counted.
PATHS_IN_A_SENTENCE = 3
#: Overlaps said by `status` and the live view; the rest are counted (`status --json` and
#: the report have every one).
OVERLAPS_SHOWN = 10

# Accepted and waiting for the merge queue: its branch's paths are in the log.
_WAITING = frozenset({"succeeded"})


def overlaps_to_record(
    state: ExecutionState,
    seen: Mapping[str, Set[str]],
    conflicting: Mapping[str, Set[str]],
    at: float,
) -> list[ev.OverlapFound]:
    """The overlaps not yet in the log among what was seen.

    `seen`: the paths each running subtask's worktree has changed since its subtask
    started; `conflicting`: those of a running subtask that would conflict with the
    integration branch. A pair is two running subtasks, or one running and one accepted
    and waiting to merge (its branch's paths as its last commit recorded them)."""
    if not seen and not conflicting:
        return []
    order = {spec.id: i for i, spec in enumerate(state.plan.subtasks)}
    recorded = {(o.kind, o.subtasks, path) for o in state.overlaps for path in o.paths}
    changed: dict[str, Set[str]] = dict(seen)
    for view in state.subtasks.values():
        attempt = view.current_attempt
        if view.state in _WAITING and view.id not in changed and attempt is not None:
            changed[view.id] = frozenset(attempt.branch_paths or ())
    by_path: dict[str, list[str]] = defaultdict(list)
    for subtask_id, paths in changed.items():
        for path in paths:
            by_path[path].append(subtask_id)
    pairs: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for path in sorted(by_path):
        editors = sorted(by_path[path], key=order.__getitem__)
        for i, first in enumerate(editors):
            for second in editors[i + 1 :]:
                if first not in seen and second not in seen:
                    continue  # two waiting to merge: the merge queue will say
                if ("both_edit", (first, second), path) not in recorded:
                    pairs[(first, second)].append(path)
    found = [
        ev.OverlapFound(subtasks=pair, kind="both_edit", paths=tuple(paths), at=at)
        for pair, paths in sorted(pairs.items(), key=lambda item: [order[s] for s in item[0]])
    ]
    for subtask_id in sorted(conflicting, key=order.__getitem__):
        new = [
            path
            for path in sorted(conflicting[subtask_id])
            if ("conflicts_with_merged", (subtask_id,), path) not in recorded
        ]
        if new:
            found.append(
                ev.OverlapFound(
                    subtasks=(subtask_id,), kind="conflicts_with_merged", paths=tuple(new), at=at
                )
            )
    return found


def paths_in_words(paths: tuple[str, ...], most: int = PATHS_IN_A_SENTENCE) -> str:
    """`a.py`, `a.py and b.py`, `a.py, b.py and 4 more files`."""
    if len(paths) > most:
        return f"{', '.join(paths[:most])} and {len(paths) - most:,} more files"
    if len(paths) > 1:
        return f"{', '.join(paths[:-1])} and {paths[-1]}"
    return paths[0] if paths else "no file"


def sentence(overlap: Overlap, merged_by: Mapping[str, tuple[str, ...]] | None = None) -> str:
    """The overlap in words ("fix-a and fix-b both edit src/x.py"); `merged_by`: which
    merged subtasks changed each path, named after a conflict with merged work."""
    paths = paths_in_words(overlap.paths)
    if overlap.kind == "both_edit":
        first, second = overlap.subtasks
        return f"{first} and {second} both edit {paths}"
    merged_by = merged_by or {}
    who = list(dict.fromkeys(s for path in overlap.paths for s in merged_by.get(path, ())))
    whose = f" ({', '.join(who)})" if who else ""
    return f"{overlap.subtasks[0]}'s change to {paths} would conflict with merged work{whose}"


def merged_paths(state: ExecutionState) -> dict[str, tuple[str, ...]]:
    """Each path merged work changed, and the merged subtasks that changed it."""
    by_path: dict[str, list[str]] = defaultdict(list)
    for subtask_id in state.merged:
        merge = state.subtask(subtask_id).merge
        for path in merge.changed_paths if merge is not None else ():
            by_path[path].append(subtask_id)
    return {path: tuple(ids) for path, ids in by_path.items()}


def overlap_documents(state: ExecutionState) -> list[dict[str, Any]]:
    """`status --json`'s and the report's `overlaps`: each with its sentence."""
    merged_by = merged_paths(state) if state.overlaps else {}
    return [
        {
            "subtasks": list(overlap.subtasks),
            "kind": overlap.kind,
            "paths": list(overlap.paths),
            "at": overlap.at,
            "sentence": sentence(overlap, merged_by),
        }
        for overlap in state.overlaps
    ]


def some_sentences(overlaps: list[dict[str, Any]], most: int = OVERLAPS_SHOWN) -> list[str]:
    """The sentences of the first `most` overlaps (of `overlap_documents`), and a count of
    the rest."""
    said = [overlap["sentence"] for overlap in overlaps[:most]]
    if len(overlaps) > most:
        said.append(f"and {len(overlaps) - most:,} more (kairo-orch status --json lists them)")
    return said
