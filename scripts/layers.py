#!/usr/bin/env python3
"""`make check`: each layer imports only the layers below it (docs/architecture.md), counting
every import, those inside functions and under TYPE_CHECKING too.

    python scripts/layers.py

Prints each import that crosses a layer the wrong way and exits 1 if there is any.
"""

from __future__ import annotations

import sys

from import_cycles import ROOT, imports, modules

#: What the modules of each layer may import of kairo-orch's own (a module counts as the
#: longest layer name it starts with). Outside libraries are not this table's business.
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    # Parses and renders; the work is the application layer's.
    "orchestrator.cli": (
        "orchestrator.cli",
        "orchestrator.app",
        "orchestrator.core",
        "orchestrator.errors",
    ),
    "orchestrator.app": (
        "orchestrator.app",
        "orchestrator.runtime",
        "orchestrator.git",
        "orchestrator.tmux",
        "orchestrator.store",
        "orchestrator.kairo_dir",
        "orchestrator.core",
        "orchestrator.errors",
        "agents",
    ),
    "orchestrator.runtime": (
        "orchestrator.runtime",
        "orchestrator.git",
        "orchestrator.tmux",
        "orchestrator.store",
        "orchestrator.kairo_dir",
        "orchestrator.logs",
        "orchestrator.core",
        "orchestrator.errors",
        "agents",
    ),
    # The edges: each of itself, and of the core's data.
    "orchestrator.git": (
        "orchestrator.git",
        "orchestrator.kairo_dir",
        "orchestrator.core",
        "orchestrator.errors",
    ),
    "orchestrator.tmux": ("orchestrator.tmux", "orchestrator.core", "orchestrator.errors"),
    "orchestrator.store": (
        "orchestrator.store",
        "orchestrator.kairo_dir",
        "orchestrator.core",
        "orchestrator.errors",
    ),
    # Pure: no I/O, so none of the layers that do it.
    "orchestrator.core": ("orchestrator.core", "orchestrator.errors"),
    "agents": ("agents", "orchestrator.core", "orchestrator.errors"),
}


def layer_of(module: str) -> str | None:
    found = [layer for layer in MAY_IMPORT if module == layer or module.startswith(layer + ".")]
    return max(found, key=len) if found else None


def crossings(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The (importer, imported) pairs the table does not allow."""
    wrong = []
    for module, targets in sorted(graph.items()):
        layer = layer_of(module)
        if layer is None:
            continue
        for target in sorted(targets):
            allowed = MAY_IMPORT[layer]
            if not any(target == a or target.startswith(a + ".") for a in allowed):
                wrong.append((module, target))
    return wrong


def main() -> int:
    found = crossings(imports(modules(ROOT, ["orchestrator", "agents"])))
    for module, target in found:
        print(f"layer crossed: {module} imports {target}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
