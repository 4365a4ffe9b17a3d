"""A small real Python project for real agents to work on, and the scripts that make the
scripted model do a rename in it the way Claude Code or Codex would: read the files,
edit them with its own tools, run the tests, say it is done.

    shop/<m>.py          def price_<m>(n): return n * <k>
    shop/__init__.py     (empty)
    tests/test_<m>.py    from shop.<m> import price_<m>; assert price_<m>(2) == 2 * <k>

Each task renames `price_<m>` to `total_<m>` in the module and its test, so the suite
passes before and after every task, and the six merged together.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from tests.e2e.conftest import git
from tests.model_server import (
    Reply,
    Rule,
    Script,
    ToolCall,
    Usage,
    apply_patch,
    bash,
    edit,
    exec_command,
    read,
    search_replace,
    update_patch,
)

MODULES = ("a", "b", "c", "d", "e", "f")
#: The check each subtask's attempt must pass: the project's own suite, with the Python
#: that has pytest (this one).
SUITE = f"{sys.executable} -m pytest -q -p no:cacheprovider"


def module(name: str) -> str:
    return f"shop/{name}.py"


def test_file(name: str) -> str:
    return f"tests/test_{name}.py"


def define(name: str, function: str) -> str:
    return f"def {function}(n):\n    return n * {MODULES.index(name) + 2}\n"


def use(name: str, function: str) -> str:
    return (
        f"from shop.{name} import {function}\n\n\n"
        f"def test_{function}():\n    assert {function}(2) == {2 * (MODULES.index(name) + 2)}\n"
    )


def make_project(repo: Path) -> None:
    """The project, committed on the repository's branch."""
    (repo / "shop").mkdir()
    (repo / "tests").mkdir()
    (repo / "shop" / "__init__.py").write_text("")
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    for name in MODULES:
        (repo / module(name)).write_text(define(name, f"price_{name}"))
        (repo / test_file(name)).write_text(use(name, f"price_{name}"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the shop")


def prompt(name: str) -> str:
    return f"Rename price_{name} to total_{name} in {module(name)}, and wherever it is used."


def usage(turn: int) -> Usage:
    """What each model turn reports: different per turn, so sums are telling."""
    return Usage(
        input_tokens=1000 + 100 * turn, output_tokens=40 + turn, cache_read_input_tokens=500
    )


def read_both(name: str) -> Reply:
    return Reply(text="Let me read the code.", tools=(read(module(name)), read(test_file(name))))


def edit_module(name: str) -> ToolCall:
    return edit(module(name), f"def price_{name}(n):", f"def total_{name}(n):")


def edit_test(name: str) -> ToolCall:
    return edit(test_file(name), use(name, f"price_{name}"), use(name, f"total_{name}"))


RUN_SUITE = Reply(tools=(bash(SUITE),))


def done(name: str) -> Reply:
    return Reply(text=f"Renamed price_{name} to total_{name}; the tests pass.")


def claude_rename(name: str) -> list[Reply]:
    """Claude Code's rename, a reply a turn: read both files, edit both, run the suite,
    say so."""
    return [
        read_both(name),
        Reply(tools=(edit_module(name), edit_test(name))),
        RUN_SUITE,
        done(name),
    ]


def turns(steps: list[Reply], first: int = 1, since: str | None = None) -> tuple[Rule, ...]:
    """One rule a turn from `first` on (counted from the message that said `since`, if
    given), each reporting its turn's usage."""
    return tuple(
        Rule(replace(step, usage=usage(turn)), turn=turn, since=since)
        for turn, step in enumerate(steps, first)
    )


def codex_rename(name: str) -> list[Reply]:
    """Codex's rename: the module by apply_patch, its test by sed, then the suite."""
    old, new = f"price_{name}", f"total_{name}"
    return [
        Reply(tools=(exec_command(f"cat {module(name)} {test_file(name)}"),)),
        Reply(tools=(apply_patch(update_patch(module(name), f"def {old}(n):", f"def {new}(n):")),)),
        Reply(tools=(exec_command(f"sed -i 's/{old}/{new}/g' {test_file(name)}"),)),
        Reply(tools=(exec_command(SUITE),)),
        Reply(text=f"Renamed {old} to {new}."),
    ]


def renamed(repo: Path, branch: str, name: str) -> bool:
    return git(repo, "show", f"{branch}:{module(name)}") == define(name, f"total_{name}") and (
        git(repo, "show", f"{branch}:{test_file(name)}") == use(name, f"total_{name}")
    )


def aider_rename(name: str) -> Rule:
    """Aider's rename, in its `diff` edit format: SEARCH/REPLACE blocks for both files, in
    its one reply to the prompt (its own few-shot examples precede it in the chat)."""
    old, new = f"price_{name}", f"total_{name}"
    edits = search_replace(module(name), f"def {old}(n):", f"def {new}(n):")
    edits += "\n" + search_replace(
        test_file(name), use(name, old).rstrip("\n"), use(name, new).rstrip("\n")
    )
    return Rule(
        Reply(text=f"Renaming {old} to {new}.\n\n{edits}", usage=usage(1)),
        last_contains=prompt(name),
    )


def script_for(subtask: str, *rules: Rule, default: Reply | None = None) -> Script:
    """Routed by the subtask's worktree, which ends in its id."""
    if default is None:
        return Script(*rules, match=f"/{subtask}", name=subtask)
    return Script(*rules, match=f"/{subtask}", name=subtask, default=default)
