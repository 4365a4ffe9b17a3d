"""The core decides; it never does I/O (ARCHITECTURE.md). This test keeps it so."""

from __future__ import annotations

import ast
from pathlib import Path

import orchestrator.core

FORBIDDEN = {"trio", "git", "libtmux", "sqlite3", "psycopg", "subprocess", "socket", "structlog"}
CORE = Path(orchestrator.core.__file__).parent


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_core_imports_no_io_library() -> None:
    offenders = {
        path.name: sorted(imported_roots(path) & FORBIDDEN) for path in sorted(CORE.glob("*.py"))
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_core_imports_nothing_of_the_outer_layers() -> None:
    outer = (
        "orchestrator.runtime",
        "orchestrator.store",
        "orchestrator.git",
        "orchestrator.tmux",
        "orchestrator.cli",
        "agents",
    )
    for path in CORE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(outer), f"{path.name} imports {node.module}"
