"""The subtask graph: plan order, cycles, dependents. Pure functions over ids.

Edges point from a subtask to what it depends on: `{"b": ["a"]}` means b waits for a.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence

from orchestrator.core.plan import ResolvedPlan


def find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One dependency cycle as a closed path (`["a", "b", "a"]`: a needs b needs a), or None.

    Deterministic: nodes are tried in the mapping's order and dependencies in the order
    given, so the same plan always reports the same cycle. Names that are not keys of
    `edges` (unknown ids, reported elsewhere) are ignored. Iterative, so a long chain of
    dependencies cannot exhaust Python's recursion limit.
    """
    graph = {node: [dep for dep in deps if dep in edges] for node, deps in edges.items()}
    done: set[str] = set()
    for start in graph:
        if start in done:
            continue
        path = [start]
        on_path = {start}
        stack = [iter(graph[start])]
        while stack:
            dep = next(stack[-1], None)
            if dep is None:
                stack.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                continue
            if dep in on_path:
                return [*path[path.index(dep) :], dep]
            if dep not in done:
                path.append(dep)
                on_path.add(dep)
                stack.append(iter(graph[dep]))
    return None


def stable_topological_order(
    ids: Sequence[str], depends_on: Mapping[str, Sequence[str]]
) -> tuple[str, ...]:
    """Dependencies first, then the order of `ids`: repeatedly take the first id in `ids`
    whose dependencies are all placed. ValueError if a cycle leaves some unplaceable.
    """
    position = {node: index for index, node in enumerate(ids)}
    waiting = {node: {d for d in depends_on.get(node, ()) if d in position} for node in ids}
    needed_by: dict[str, list[str]] = {node: [] for node in ids}
    for node, deps in waiting.items():
        for dep in deps:
            needed_by[dep].append(node)
    # A heap keyed by written position picks "the first written ready subtask" in
    # O(n log n) rather than rescanning the list after every placement.
    ready = [position[node] for node in ids if not waiting[node]]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        node = ids[heapq.heappop(ready)]
        order.append(node)
        for later in needed_by[node]:
            waiting[later].discard(node)
            if not waiting[later]:
                heapq.heappush(ready, position[later])
    if len(order) != len(ids):
        stuck = [node for node in ids if waiting[node]]
        raise ValueError(f"dependency cycle among {', '.join(stuck)}")
    return tuple(order)


def merge_order(plan: ResolvedPlan) -> tuple[str, ...]:
    """The order `merge_order: plan` merges in: dependencies first, then the order written."""
    ids = [subtask.id for subtask in plan.subtasks]
    return stable_topological_order(ids, {s.id: s.depends_on for s in plan.subtasks})


def dependents(plan: ResolvedPlan, subtask_id: str, *, transitive: bool = False) -> tuple[str, ...]:
    """The subtasks that depend on `subtask_id` (directly, or also through others), in plan
    order: what is skipped when it fails or conflicts.
    """
    if not transitive:
        return tuple(s.id for s in plan.subtasks if subtask_id in s.depends_on)
    found = {subtask_id}
    changed = True
    while changed:  # a fixpoint: plan order is not dependency order, so one pass may miss
        changed = False
        for subtask in plan.subtasks:
            if subtask.id not in found and found.intersection(subtask.depends_on):
                found.add(subtask.id)
                changed = True
    return tuple(s.id for s in plan.subtasks if s.id in found and s.id != subtask_id)
