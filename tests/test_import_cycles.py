"""`make check`'s import-cycle check (scripts/import_cycles.py) finds a cycle however it is
hidden, and kairo-orch has none."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "import_cycles", ROOT / "scripts" / "import_cycles.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_cycle_through_a_function_or_type_checking_import_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import thing\n")
    (package / "b.py").write_text("def thing():\n    from pkg import c\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import x\n"
    )
    (package / "d.py").write_text("import pkg.a\n")  # leads into it, is not part of it
    check = checker()
    assert check.cycles(check.imports(check.modules(tmp_path, ["pkg"]))) == [
        ["pkg.a", "pkg.b", "pkg.c"]
    ]


def test_kairo_orch_has_no_import_cycle() -> None:
    check = checker()
    assert check.cycles(check.imports(check.modules(ROOT, ["orchestrator", "agents"]))) == []
