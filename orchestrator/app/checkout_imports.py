"""`validate` and `start`: does a check of the plan test the checkout rather than the
worktree it runs in? (orchestrator/core/checkout_imports.py says how that happens.)

Each check's first word is looked up on PATH as its shell would; if it is a Python
interpreter, or a script that one runs (`pytest`), that interpreter is asked for its
site-packages directories, and what they hold is read for pointers into the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from orchestrator.core import checkout_imports as ci
from orchestrator.core.plan import ResolvedPlan
from orchestrator.errors import EnvironmentProblem

#: Printed by the interpreter asked: the directories its site module reads `.pth` files of.
_SITE_DIRECTORIES = (
    "import json, site\n"
    "found = list(site.getsitepackages()) if hasattr(site, 'getsitepackages') else []\n"
    "if site.ENABLE_USER_SITE:\n"
    "    found.append(site.getusersitepackages())\n"
    "print(json.dumps(found))\n"
)
_ASK_TIMEOUT_S = 20.0


def checks_import_checkout(
    plan: ResolvedPlan,
    mode: str,
    checkout: Path,
    filename: str,
    environment: Mapping[str, str],
) -> tuple[str, ...]:
    """A warning for each check that would import the checkout's code (`mode` warn), or
    EnvironmentProblem (exit 5) naming them (`mode` error); nothing with `mode` off."""
    if mode == "off":
        return ()
    keys: dict[str, list[str]] = {}
    for spec in plan.subtasks:
        if spec.verify and "verify" not in keys.setdefault(spec.verify, []):
            keys[spec.verify].append("verify")
    if plan.integration_verify:
        keys.setdefault(plan.integration_verify, []).append("integration_verify")
    looked = _Look(checkout, environment, refused=mode == "error")
    warnings = tuple(
        found for command, named in keys.items() if (found := looked.at(command, named, filename))
    )
    if warnings and mode == "error":
        raise EnvironmentProblem("\n".join(warnings))
    return warnings


class _Look:
    """The lookups of one plan's checks: each interpreter is asked once."""

    def __init__(self, checkout: Path, environment: Mapping[str, str], *, refused: bool) -> None:
        self.refused = refused
        self.checkout = os.path.realpath(checkout)
        self.environment = environment
        self.imports: dict[str, list[ci.CheckoutImport]] = {}

    def at(self, command: str, keys: list[str], filename: str) -> str | None:
        safe_path = bool(self.environment.get("PYTHONSAFEPATH"))
        check = ci.check_command(command, safe_path=safe_path)
        if check is None:
            return None
        interpreter = self._interpreter(check.program)
        if interpreter is None:
            return None
        if interpreter not in self.imports:
            self.imports[interpreter] = self._checkout_imports(interpreter)
        found = [item for item in self.imports[interpreter] if ci.shadows_the_worktree(item, check)]
        if not found:
            return None
        return ci.warning(
            filename, keys, command, interpreter, found, self.checkout, refused=self.refused
        )

    def _interpreter(self, program: str) -> str | None:
        """The Python interpreter that `program` is or that runs it, as the check's shell
        finds it; None for anything else, and for a path relative to the worktree, which
        is not made yet."""
        if "/" in program:
            if not Path(program).is_absolute():
                return None
            path: str | None = program
        else:
            path = shutil.which(program, path=self.environment.get("PATH"))
        if path is None:
            return None
        if ci.INTERPRETER_NAME.fullmatch(Path(path).name):
            return path
        try:
            with open(path, "rb") as script:
                first_line = script.readline(512)
        except OSError:
            return None
        runs = ci.shebang_program(first_line)
        if runs is None:
            return None
        if Path(runs[0]).name == "env" and len(runs) > 1:
            runs = (shutil.which(runs[1], path=self.environment.get("PATH")) or "", *runs[2:])
        named = runs[0]
        return named if ci.INTERPRETER_NAME.fullmatch(Path(named).name) else None

    def _checkout_imports(self, interpreter: str) -> list[ci.CheckoutImport]:
        found = []
        for site_dir in self._site_directories(interpreter):
            try:
                entries = sorted(os.scandir(site_dir), key=lambda entry: entry.name)
            except OSError:
                continue
            for entry in entries:
                for directory in self._directories_of(entry):
                    relative = self._in_checkout(directory)
                    if relative is not None:
                        found.append(ci.CheckoutImport(relative, entry.path))
        return found

    def _site_directories(self, interpreter: str) -> list[str]:
        try:
            asked = subprocess.run(
                [interpreter, "-c", _SITE_DIRECTORIES],
                capture_output=True,
                text=True,
                env=dict(self.environment),
                stdin=subprocess.DEVNULL,
                timeout=_ASK_TIMEOUT_S,
            )
            listed = json.loads(asked.stdout) if asked.returncode == 0 else []
        except (OSError, subprocess.SubprocessError, ValueError):
            return []  # not an interpreter after all, or a broken one: the check will say
        return [item for item in listed if isinstance(item, str)]

    @staticmethod
    def _directories_of(entry: os.DirEntry[str]) -> list[str]:
        name = entry.name
        wanted = name.endswith((".pth", ".egg-link")) or (
            name.startswith("__editable___") and name.endswith("_finder.py")
        )
        if not wanted or not entry.is_file():
            return []
        try:
            text = Path(entry.path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        if name.endswith(".pth"):
            return ci.pth_directories(text, str(Path(entry.path).parent))
        if name.endswith(".egg-link"):
            directory = ci.egg_link_directory(text)
            return [directory] if directory else []
        return ci.finder_directories(text)

    def _in_checkout(self, directory: str) -> str | None:
        """`directory` relative to the checkout's root ("" for the root), or None when it
        lies outside it."""
        real = os.path.realpath(directory)
        if real == self.checkout:
            return ""
        if real.startswith(self.checkout + os.sep):
            return os.path.relpath(real, self.checkout)
        return None
