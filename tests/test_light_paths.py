"""Processes that start often, or on the way to the first worktree, import only what they use.

Each import here costs tens of milliseconds of every run (bench.py's fanout_16 and
status_ms); these tests keep them from coming back unnoticed.
"""

from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    """The top-level packages loaded by a fresh interpreter that runs `code` (not those
    marked absent, which sys.modules holds as None)."""
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            "-c",
            f"{code}\nimport sys; print(' '.join(n for n, m in sys.modules.items() if m))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return {name.split(".")[0] for name in done.stdout.split()}


def test_status_and_the_live_view_do_not_import_trio() -> None:
    loaded = _modules_after("import orchestrator.cli.inspect, orchestrator.cli.watch")
    assert "rich" in loaded and "orchestrator" in loaded  # what they do use
    assert "trio" not in loaded


def test_start_validate_and_resume_do_not_import_trio() -> None:
    # They run before the supervisor's first worktree, beside its own imports.
    loaded = _modules_after(
        "import orchestrator.cli.validate, orchestrator.app.starting, orchestrator.app.resuming,"
        " orchestrator.cli.outcomes"
    )
    assert "pydantic" in loaded and "orchestrator" in loaded
    assert "trio" not in loaded


def test_the_supervisor_process_imports_neither_rich_nor_what_few_plans_use() -> None:
    # As `start` forks it (supervisor_process._serve), after what they share; wcmatch only
    # for a plan's copy_files, ulid not at all (orchestrator/store/ulid.py).
    loaded = _modules_after(
        "import orchestrator.app.project\n"
        "from orchestrator.runtime.without_rich import without_rich\n"
        "without_rich()\n"
        "import orchestrator.runtime.daemon"
    )
    assert "structlog" in loaded and "trio" in loaded
    assert not {"rich", "wcmatch", "ulid"} & loaded


def test_a_supervisor_run_directly_does_not_import_rich() -> None:
    # As `python -m orchestrator.runtime.daemon` runs it; --help ends it after its imports.
    loaded = _modules_after(
        "import runpy, sys, contextlib\n"
        "sys.argv = ['daemon', '--help']\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(None):\n"
        "    runpy.run_module('orchestrator.runtime.daemon', run_name='__main__')"
    )
    assert "structlog" in loaded and "trio" in loaded
    assert "rich" not in loaded


def test_what_start_imports_before_it_forks_the_supervisor_is_free_of_the_supervisors_own() -> None:
    # Only what both use comes before the fork: the supervisor's own imports (trio,
    # structlog) and start's (the YAML parser) then run side by side.
    loaded = _modules_after("import orchestrator.cli.start, orchestrator.app.project")
    assert "pydantic" in loaded
    assert not {"trio", "structlog", "ruamel"} & loaded
