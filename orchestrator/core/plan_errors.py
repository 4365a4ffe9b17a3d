"""Collecting plan problems, and wording pydantic's errors for someone editing plan.yaml.

pydantic says `Input should be greater than or equal to 1` at `('limits', 'max_attempts')`;
a user wants `plan.yaml:20:21: subtask 'b': limits.max_attempts must be a whole number >= 1
(got 0)`. This module does that translation, and gathers every problem of one load so the
user fixes them in one round instead of one per run.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from orchestrator.core.plan_yaml import Document, Path, Pos
from orchestrator.errors import PlanError

M = TypeVar("M", bound=BaseModel)

_WHOLE = "must be a whole number >= 1"
# Errors whose value may hold a secret (a URL with a password), not shown back.
_NOT_ECHOED = frozenset({"plan_url"})
_KINDS = "must be one of shell, command, claude-code, codex, aider"
# What each key must be, by dotted key path first and by the last key second. Used for
# pydantic's own error types; our validators word their errors themselves.
EXPECT: Mapping[str, str] = {
    "version": "must be 1 (the only plan version)",
    "max_parallel": _WHOLE,
    "max_attempts": _WHOLE,
    "token_budget": _WHOLE,
    "max_files": _WHOLE,
    "integration_batch": _WHOLE,
    "merge_order": "must be 'plan' or 'completion'",
    "kind": _KINDS,
    "by": "must be 'directory' or 'count'",
    "idempotent": "must be true or false",
    "allow_empty": "must be true or false",
    "command": "must be a non-empty list of arguments, e.g. [aider, --message-file, "
    "'{prompt_file}'] (for one command line, use kind shell and run)",
    "depends_on": "must be a subtask id or a list of them",
    "files": "must be a glob or a list of globs",
    "split.files": "must be a glob or a non-empty list of globs",
    "subtasks": "must be a list of at least one subtask",
    "agent": "must be a mapping such as {kind: shell, run: ...}",
    "limits": "must be a mapping such as {timeout: 30m, max_attempts: 3}",
    "execution_limits": "must be a mapping such as {timeout: 4h}",
    "split": "must be a mapping such as {files: 'src/**/*.py', max_files: 10}",
    "worktree": "must be a mapping such as {copy_files: [.env], setup: 'npm ci'}",
    "copy_files": "must be a glob or a list of globs",
    "port_base": "must be a whole number from 1024 to 65000",
    "ports": "must be a whole number from 1 to 1000",
    "sandbox": "must be a mapping such as {kind: bwrap, network: endpoint}",
    "sandbox.kind": "must be 'local' or 'bwrap'",
    "sandbox.network.agent": "must be none, endpoint or all",
    "sandbox.network.setup": "must be none or all (endpoint is an agent's: its model)",
    "sandbox.network.checks": "must be none or all (endpoint is an agent's: its model)",
    "writable": "must be a path or a list of paths",
    "pass_env": "must be a variable name or a list of them",
    "review": "must be a mapping such as {push: origin, pr_command: 'gh pr create ...'}",
    "push_subtask_branches": "must be true or false",
    "resolve_conflicts": "must be 'agent', 'off' or a mapping such as {attempts: 2}",
    "resolve_conflicts.by": "must be 'agent' or 'off'",
    "attempts": _WHOLE,
}


@dataclass(frozen=True, order=True)
class Problem:
    pos: Pos
    message: str


class Problems:
    """Every problem of one plan file, reported together, in file order."""

    def __init__(self, filename: str, doc: Document) -> None:
        self.filename = filename
        self.doc = doc
        self._found: set[Problem] = set()

    def __bool__(self) -> bool:
        return bool(self._found)

    def at(self, pos: Pos, message: str) -> None:
        self._found.add(Problem(pos, message))

    def at_value(self, path: Path, message: str) -> None:
        self.at(self.doc.value_at(path), message)

    def at_key(self, path: Path, message: str) -> None:
        self.at(self.doc.key_at(path), message)

    def formatted(self) -> list[str]:
        return [format_problem(self.filename, p) for p in sorted(self._found)]

    def raise_if_any(self) -> None:
        if self._found:
            raise PlanError(self.formatted())

    def validate(
        self,
        model: type[M],
        data: Any,
        base: Path,
        subject: str,
        known_keys: Mapping[str, Collection[str]],
    ) -> M | None:
        """`model` validated from `data` (found at `base`), or None with its problems added.

        `subject` prefixes messages (`subtask 'b': `); `known_keys` maps a section (by its
        key, '' for the top) to its keys, for did-you-mean hints on unknown keys.
        """
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            for error in exc.errors():
                self._add_error(error, base, subject, known_keys)
            return None

    def _add_error(
        self,
        error: ErrorDetails,
        base: Path,
        subject: str,
        known_keys: Mapping[str, Collection[str]],
    ) -> None:
        loc: Path = tuple(error["loc"])
        path = (*base, *loc)
        keys = [part for part in loc if isinstance(part, str)]
        kind = error["type"]
        if kind == "extra_forbidden":
            name = str(loc[-1])
            section = ".".join(keys[:-1])
            where = f" in {section}" if section else ""
            options = known_keys.get(keys[-2] if len(keys) > 1 else "", ())
            close = difflib.get_close_matches(name, options, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            self.at_key(path, f"{subject}unknown key '{name}'{where}{hint}")
            return
        if kind == "missing":
            parent = path[:-1]
            section = ".".join(keys[:-1])
            if section:
                owner = f"{subject}{section} is"
            else:
                owner = "the plan is" if base == () else "subtask is"
            # The key that opens the section (`split:`) is easier to find than its first child.
            pos = self.doc.key_at(parent) if section else self.doc.value_at(parent)
            hint = " (write version: 1)" if path == ("version",) else ""
            self.at(pos, f"{owner} missing required key '{keys[-1]}'{hint}")
            return
        if loc[-1:] == ("[key]",):  # a mapping's key is wrong, not its value: point at it
            name = ".".join(keys[:-1])
            self.at_key(path[:-1], f"{subject}{name} {error['msg']}")
            return
        label = ".".join(keys) or "each subtask"
        if keys == ["id"] and base != ():
            label = "subtask id"
        if loc == ():
            expect = "must be a mapping with at least an id, e.g. {id: fix-auth, prompt: ...}"
        elif kind == "string_type":
            expect = "must be a string"
        elif kind.startswith("plan_"):  # raised by the schema's own validators, worded there
            expect = error["msg"]
        else:
            expect = EXPECT.get(label) or EXPECT.get(keys[-1] if keys else "", error["msg"])
        got = "" if kind in _NOT_ECHOED else _got(error["input"], kind)
        self.at_value(path, f"{subject}{label} {expect}{got}")


def format_problem(filename: str, problem: Problem) -> str:
    return f"{filename}:{problem.pos.line}:{problem.pos.col}: {problem.message}"


def _got(value: Any, kind: str) -> str:
    shown = describe_value(value)
    if kind == "string_type" and isinstance(value, int | float | bool):
        return f" (got {shown}; put it in quotes to make it a string)"
    return f" (got {shown})"


def describe_value(value: Any) -> str:
    """A value as the user wrote it in YAML terms: 'text', 3, true, null, a list."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict):
        return "a mapping" if value else "an empty mapping"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    name = type(value).__name__
    return f"a {name}"
