"""Reading a check's command line and what site-packages holds, for `validate`'s warning
of a check that would test the checkout (orchestrator/core/checkout_imports.py)."""

from __future__ import annotations

import pytest

from orchestrator.core.checkout_imports import (
    CheckCommand,
    CheckoutImport,
    check_command,
    egg_link_directory,
    finder_directories,
    pth_directories,
    shadows_the_worktree,
    shebang_program,
)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("python -m pytest -q", CheckCommand("python", worktree_first=True)),
        ("python3 -X dev -m pytest", CheckCommand("python3", worktree_first=True)),
        ("python -Xdev -mpytest", CheckCommand("python", worktree_first=True)),
        ("python -c 'import x'", CheckCommand("python", worktree_first=True)),
        ("python -I -m pytest", CheckCommand("python", worktree_first=False)),
        ("python -Pm pytest", CheckCommand("python", worktree_first=False)),
        ("python tests/run.py", CheckCommand("python", worktree_first=False)),
        ("pytest -q", CheckCommand("pytest", worktree_first=False)),
        ("LANG=C python -m pytest", CheckCommand("python", worktree_first=True)),
        ("env LANG=C pytest && ruff check", CheckCommand("pytest", worktree_first=False)),
        ("PYTHONPATH=src python -m pytest", None),
        ("env PYTHONPATH=src pytest", None),
        ("env -i python -m pytest", None),
        ("python -m 'unclosed", None),
        ("LANG=C", None),
    ],
)
def test_the_program_a_check_runs_and_whether_the_worktree_leads_its_path(
    command: str, expected: CheckCommand | None
) -> None:
    assert check_command(command) == expected


def test_pythonsafepath_keeps_the_working_directory_off_the_path() -> None:
    assert check_command("python -m pytest", safe_path=True) == CheckCommand("python", False)


def test_a_pth_file_s_directories_but_its_imports_and_comments() -> None:
    text = "# a comment\n/repo/src\n\nimport _virtualenv\nrelative/dir\n  /repo/lib  \n"
    assert pth_directories(text, "/venv/site") == [
        "/repo/src",
        "/venv/site/relative/dir",
        "/repo/lib",
    ]


def test_a_setuptools_editable_finder_s_packages_are_imported_from_their_parent() -> None:
    # As setuptools writes it (`pip install -e .` of a flat layout).
    text = (
        "from __future__ import annotations\nimport sys\n\n"
        "MAPPING: dict[str, str] = {'agents': '/repo/agents', 'orchestrator': '/repo/orchestrator',"
        " 'tool': '/repo/src/tool.py'}\n"
        "NAMESPACES: dict[str, list[str]] = {}\n"
        "PATH_PLACEHOLDER = '__editable__.x-0.1.finder' + \".__path_hook__\"\n"
    )
    assert finder_directories(text) == ["/repo", "/repo", "/repo/src"]
    assert finder_directories("MAPPING = {'a': '/r/src/a'}\n") == ["/r/src"]
    assert finder_directories("MAPPING = not_a_literal()\n") == []
    assert finder_directories("import sys\n") == []


def test_an_egg_link_names_its_directory_on_its_first_line() -> None:
    assert egg_link_directory("/repo/src\n../\n") == "/repo/src"
    assert egg_link_directory("\n") is None


def test_a_shebang_names_the_interpreter() -> None:
    assert shebang_program(b"#!/venv/bin/python\n") == ("/venv/bin/python",)
    assert shebang_program(b"#!/usr/bin/env python3\n") == ("/usr/bin/env", "python3")
    assert shebang_program(b"\x7fELF") is None


def test_only_the_checkout_s_root_is_the_worktree_s_under_python_m() -> None:
    module, script = CheckCommand("python", True), CheckCommand("pytest", False)
    root, src = CheckoutImport("", "x.pth"), CheckoutImport("src", "x.pth")
    assert not shadows_the_worktree(root, module)
    assert shadows_the_worktree(root, script)
    assert shadows_the_worktree(src, module) and shadows_the_worktree(src, script)
