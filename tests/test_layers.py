"""`make check`'s layering check (scripts/layers.py): the CLI reaches git, tmux, the store
and the runtime only through the application layer, however the import is hidden."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def checker() -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts"))  # it imports import_cycles beside it
    try:
        spec = importlib.util.spec_from_file_location("layers", ROOT / "scripts" / "layers.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "scripts"))


def _package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_cli_module_that_imports_an_edge_or_the_runtime_is_caught(tmp_path: Path) -> None:
    _package(
        tmp_path,
        {
            "orchestrator/__init__.py": "",
            "orchestrator/errors.py": "",
            "orchestrator/core/__init__.py": "",
            "orchestrator/core/ids.py": "",
            "orchestrator/app/__init__.py": "",
            "orchestrator/app/use.py": "from orchestrator.git import refs\n",
            "orchestrator/git/__init__.py": "",
            "orchestrator/git/refs.py": "",
            "orchestrator/store/__init__.py": "",
            "orchestrator/tmux/__init__.py": "",
            "orchestrator/tmux/server.py": "",
            "orchestrator/runtime/__init__.py": "",
            "orchestrator/runtime/ownership.py": "",
            "orchestrator/cli/__init__.py": "",
            # allowed: the application layer, the core, the errors, itself
            "orchestrator/cli/fine.py": (
                "from orchestrator.app import use\nfrom orchestrator.core.ids import x\n"
                "from orchestrator.errors import E\nfrom orchestrator.cli import fine\n"
            ),
            "orchestrator/cli/a.py": "from orchestrator.git.refs import rev_parse\n",
            "orchestrator/cli/b.py": "def f():\n    import orchestrator.tmux.server\n",
            "orchestrator/cli/c.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from orchestrator.store import Store\n"
            ),
            "orchestrator/cli/d.py": "from orchestrator.runtime import ownership\n",
            "orchestrator/core/e.py": "from orchestrator.app import use\n",  # the core is pure
        },
    )
    check = checker()
    graph = check.imports(check.modules(tmp_path, ["orchestrator"]))
    assert check.crossings(graph) == [
        ("orchestrator.cli.a", "orchestrator.git.refs"),
        ("orchestrator.cli.b", "orchestrator.tmux.server"),
        ("orchestrator.cli.c", "orchestrator.store"),
        ("orchestrator.cli.d", "orchestrator.runtime.ownership"),
        ("orchestrator.core.e", "orchestrator.app.use"),
    ]


def test_kairo_orch_keeps_its_layers() -> None:
    check = checker()
    assert check.crossings(check.imports(check.modules(ROOT, ["orchestrator", "agents"]))) == []
