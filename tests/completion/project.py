"""The generated project each completion scenario works on, and what its correct result is.

Every scenario owns a slot `s` of its own: a module and its test, and for the two-file
task a second module that uses the first, so that scenarios run side by side as subtasks
of one plan without touching each other's files:

    shop/<s>.py               def price_<s>(n): return n * <k>
    shop/<s>_cart.py          (two-file task) def cart_<s>(items): sum of price_<s>
    tests/test_<s>.py         the slot's visible tests
    tests/test_no_todo.py     no module of the shop says TODO

The task renames `price_<s>` to `total_<s>` wherever it is used. The hidden reference
test (`hidden_test`) is not in the repository: the bench runs it on the merged result.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.conftest import git

#: The project's suite, with the Python that has pytest (this one): each attempt's `verify`.
SUITE = f"{sys.executable} -m pytest -q -p no:cacheprovider"

NO_TODO = """from pathlib import Path


def test_no_module_is_left_with_a_todo():
    left = [p.name for p in Path("shop").glob("*.py") if "TODO" in p.read_text()]
    assert left == [], f"a TODO is left in {left}"
"""


@dataclass(frozen=True)
class Slot:
    """One scenario's corner of the project."""

    name: str  # a Python identifier
    factor: int
    two_files: bool = False

    @property
    def module(self) -> str:
        return f"shop/{self.name}.py"

    @property
    def cart(self) -> str:
        return f"shop/{self.name}_cart.py"

    @property
    def test(self) -> str:
        return f"tests/test_{self.name}.py"

    @property
    def old(self) -> str:
        return f"price_{self.name}"

    @property
    def new(self) -> str:
        return f"total_{self.name}"

    def define(self, function: str, factor: int | None = None) -> str:
        return f"def {function}(n):\n    return n * {factor or self.factor}\n"

    def cart_code(self, function: str) -> str:
        return (
            f"from shop.{self.name} import {function}\n\n\n"
            f"def cart_{self.name}(items):\n"
            f"    return sum({function}(n) for n in items)\n"
        )

    def test_code(self, function: str) -> str:
        code = (
            f"from shop.{self.name} import {function}\n\n\n"
            f"def test_{function}():\n    assert {function}(2) == {2 * self.factor}\n"
        )
        if self.two_files:
            code += (
                f"\n\ndef test_cart_{self.name}():\n"
                f"    from shop.{self.name}_cart import cart_{self.name}\n\n"
                f"    assert cart_{self.name}([1, 2]) == {3 * self.factor}\n"
            )
        return code

    def files(self, function: str) -> dict[str, str]:
        """The slot's files with the function named `function`."""
        files = {self.module: self.define(function), self.test: self.test_code(function)}
        if self.two_files:
            files[self.cart] = self.cart_code(function)
        return files

    @property
    def prompt(self) -> str:
        where = f"{self.module} and {self.cart}" if self.two_files else self.module
        return f"Rename {self.old} to {self.new} in {where}, and wherever it is used."

    @property
    def owned(self) -> tuple[str, ...]:
        """The plan's `files` of its subtask."""
        return tuple(sorted(self.files(self.old)))

    def hidden_test(self) -> str:
        """The reference: the function renamed and right, no trace of the old name, no TODO
        left in the slot's modules; run beside the slot's own tests on the merged tree."""
        modules = [self.module, self.cart] if self.two_files else [self.module]
        code = (
            "from pathlib import Path\n\n"
            f"import shop.{self.name} as module\n\n\n"
            f"def test_{self.name}_is_renamed_and_right():\n"
            f"    assert module.{self.new}(3) == {3 * self.factor}\n"
            f"    assert not hasattr(module, {self.old!r})\n"
            f"    for path in {modules!r} + [{self.test!r}]:\n"
            "        text = Path(path).read_text()\n"
            f"        assert {self.old!r} not in text and 'TODO' not in text, path\n"
        )
        if self.two_files:
            code += (
                f"    from shop.{self.name}_cart import cart_{self.name}\n\n"
                f"    assert cart_{self.name}([1, 2]) == {3 * self.factor}\n"
            )
        return code


def make_project(repo: Path, slots: list[Slot]) -> None:
    """The project of `slots`, committed on the repository's branch."""
    (repo / "shop").mkdir()
    (repo / "tests").mkdir()
    (repo / "shop" / "__init__.py").write_text("")
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    (repo / "tests" / "test_no_todo.py").write_text(NO_TODO)
    for slot in slots:
        for path, text in slot.files(slot.old).items():
            (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the shop")


def correct(repo: Path, commit: str, slot: Slot, scratch: Path) -> bool:
    """Whether `commit` holds the slot's task done right: its hidden reference test and its
    own tests pass in a checkout of it."""
    checkout = scratch / f"check-{slot.name}"
    git(repo, "worktree", "add", "-q", "--detach", str(checkout), commit)
    try:
        hidden = checkout / "tests" / f"hidden_{slot.name}.py"
        hidden.write_text(slot.hidden_test())
        done = subprocess.run(
            [*SUITE.split(), str(hidden), slot.test],
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return done.returncode == 0
    finally:
        git(repo, "worktree", "remove", "--force", str(checkout))
