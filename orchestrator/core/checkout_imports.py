"""Whether a check (`verify`, `integration_verify`) would test the user's checkout instead
of the worktree it runs in (docs/plan.md, "Checks that test the worktree").

With the usual `pip install -e .`, the interpreter's site-packages holds a pointer into the
checkout: a `.pth` line naming a directory, a setuptools `__editable___*_finder.py`
mapping a package to its directory, or an `.egg-link`. A check run by that interpreter in
a worktree then imports the package from the checkout, and passes or fails on code no
agent wrote. `python -m` and `python -c` put their working directory (the worktree) first
on `sys.path`, so a package at the top of the checkout (a flat layout) is the worktree's
there; one under `src/` (a src layout) is still the checkout's.

What is read here is text; the I/O (which program, which site-packages) is
orchestrator/app/checkout_imports.py's.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=.*", re.DOTALL)
#: python, python3, python3.12, pypy3: what runs Python code when named as a program.
INTERPRETER_NAME = re.compile(r"(python|pypy)[0-9.]*")
#: Options of the interpreter that take the next word as their value.
_WITH_VALUE = frozenset("WX")


@dataclass(frozen=True)
class CheckCommand:
    program: str  # the first word, as the shell finds it
    worktree_first: bool  # run as `python -m`/`-c`: its working directory leads sys.path


def check_command(command: str, *, safe_path: bool = False) -> CheckCommand | None:
    """The program a check's command line runs, or None when there is none to look into:
    a line the shell would parse otherwise than words, or one that sets PYTHONPATH itself
    (its author chose what it imports). `safe_path`: PYTHONSAFEPATH is set, so no working
    directory leads sys.path."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    position = 0
    if words[:1] == ["env"]:
        position = 1
    while position < len(words) and (assigned := _ASSIGNMENT.fullmatch(words[position])):
        if assigned.group(1) == "PYTHONPATH":
            return None
        position += 1
    if position >= len(words) or words[position].startswith("-"):
        return None
    program, arguments = words[position], words[position + 1 :]
    return CheckCommand(program, not safe_path and _runs_from_working_directory(arguments))


def _runs_from_working_directory(arguments: Sequence[str]) -> bool:
    """Whether an interpreter given `arguments` puts its working directory first on
    sys.path: `-m` and `-c` do, unless `-I` or `-P` says not to; a script puts its own
    directory there instead."""
    safe = False
    skip = False
    for argument in arguments:
        if skip:
            skip = False
            continue
        if not argument.startswith("-") or argument.startswith("--") or argument == "-":
            return False
        for position, flag in enumerate(argument[1:], start=1):
            if flag in "IP":
                safe = True
            elif flag in "mc":
                return not safe
            elif flag in _WITH_VALUE:
                skip = position == len(argument) - 1  # `-X dev`, not `-Xdev`
                break
    return False


def shebang_program(first_line: bytes) -> tuple[str, ...] | None:
    """The program (and its first argument) a script's `#!` line runs, or None."""
    if not first_line.startswith(b"#!"):
        return None
    words = first_line[2:].decode(errors="replace").split()
    return tuple(words[:2]) or None


def pth_directories(text: str, site_dir: str) -> list[str]:
    """The directories a `.pth` file puts on sys.path (its lines that are not comments nor
    `import` statements; a relative one is relative to the site directory)."""
    found = []
    for line in text.splitlines():
        entry = line.strip()
        if not entry or entry.startswith("#") or re.match(r"import[ \t]", entry):
            continue
        found.append(posixpath.normpath(posixpath.join(site_dir, entry)))
    return found


_MAPPING = re.compile(r"^MAPPING\b[^=\n]*=\s*(\{.*?\})\s*$", re.MULTILINE | re.DOTALL)


def finder_directories(text: str) -> list[str]:
    """The directories a setuptools `__editable___*_finder.py` imports its packages from:
    each package's location in its `MAPPING`, but one level up (where `import NAME` finds
    it)."""
    import ast  # only `validate` and `start` come here, and only for such a file

    found = _MAPPING.search(text)
    if found is None:
        return []
    try:
        mapping = ast.literal_eval(found.group(1))
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return []
    if not isinstance(mapping, dict):
        return []
    return [posixpath.dirname(str(location).rstrip("/")) for location in mapping.values()]


def egg_link_directory(text: str) -> str | None:
    """The directory an `.egg-link` file (a `setup.py develop` install) names: its first
    line."""
    first = text.splitlines()[0].strip() if text.strip() else ""
    return first or None


@dataclass(frozen=True)
class CheckoutImport:
    """A directory of the checkout that an interpreter's site-packages puts on its path."""

    directory: str  # relative to the checkout's root; "" for the root itself
    via: str  # the file of site-packages that does it


def shadows_the_worktree(found: CheckoutImport, command: CheckCommand) -> bool:
    """Whether this import shadows the worktree's own code for `command`: anything but the
    checkout's root under `python -m`/`-c`, whose working directory (the worktree) comes
    first."""
    return found.directory != "" or not command.worktree_first


def warning(
    filename: str,
    keys: Sequence[str],
    command: str,
    interpreter: str,
    found: Sequence[CheckoutImport],
    checkout: str,
    *,
    refused: bool,
) -> str:
    """The sentence `validate` and `start` say of a check that would test the checkout."""
    where = "; ".join(
        f"{posixpath.join(checkout, item.directory) if item.directory else checkout} "
        f"(by {item.via})"
        for item in found
    )
    path = ":".join(dict.fromkeys(item.directory or "." for item in found))
    then = (
        "(the plan says `checks_import_checkout: error`)"
        if refused
        else "(`checks_import_checkout: error` in the plan refuses it, `off` silences this)"
    )
    return (
        f"{filename}: {' and '.join(keys)} `{command}` would test your checkout, not the "
        f"worktree it runs in: {interpreter} imports from {where}, an editable install of "
        f"the checkout. Make it `PYTHONPATH={path} {command}` so that it imports the "
        "worktree's code, or run it with an interpreter that has the worktree installed "
        f"(a virtualenv that `worktree.setup` makes in each worktree) {then}"
    )
