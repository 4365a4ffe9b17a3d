#!/usr/bin/env python3
"""`make check`: no import cycle among kairo-orch's modules, counting every import (those
inside functions and under TYPE_CHECKING too: a cycle hidden there still ties the modules
together, and breaks the day someone moves the import up).

    python scripts/import_cycles.py [PACKAGE_DIR ...]   (default: orchestrator agents)

Prints each cycle (its modules) and exits 1 if there is any.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def modules(root: Path, packages: list[str]) -> dict[str, Path]:
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports(found: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of the others (`from a import b` is of `a.b` when that is a
    module, else of `a`)."""
    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, path in found.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                graph[name] |= {alias.name for alias in node.names if alias.name in found}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    whole = f"{node.module}.{alias.name}"
                    if whole in found:
                        graph[name].add(whole)
                    elif node.module in found:
                        graph[name].add(node.module)
    graph = {name: targets - {name} for name, targets in graph.items()}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main(argv: list[str]) -> int:
    found = cycles(imports(modules(ROOT, argv or ["orchestrator", "agents"])))
    for cycle in found:
        print("import cycle: " + " -> ".join(cycle), file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
