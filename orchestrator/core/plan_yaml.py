"""The YAML layer of the plan loader: plain data, plus where each key and value was written.

ruamel.yaml's round-trip loader is the only one that keeps line and column on every mapping
and sequence (`.lc`). We copy the tree into plain dicts, lists and scalars (so pydantic sees
ordinary types, not ruamel's `ScalarInt` or `LiteralScalarString`) and keep a side table of
positions keyed by path, e.g. `("subtasks", 2, "depends_on", 0)`. A validation error or a
semantic check then names a path and gets back a 1-based `line:col`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from orchestrator.errors import PlanError

Path = tuple[str | int, ...]


@dataclass(frozen=True, order=True)
class Pos:
    line: int  # 1-based
    col: int  # 1-based


START = Pos(1, 1)


@dataclass(frozen=True)
class Document:
    data: Any  # dicts with str keys, lists, str, int, float, bool, None (dates etc. as loaded)
    values: Mapping[Path, Pos]
    keys: Mapping[Path, Pos]
    warnings: tuple[tuple[Pos, str], ...] = ()

    def value_at(self, path: Path) -> Pos:
        """Where the value at `path` starts; the nearest written ancestor when it is absent."""
        for end in range(len(path), -1, -1):
            found = self.values.get(path[:end])
            if found is not None:
                return found
        return START

    def key_at(self, path: Path) -> Pos:
        """Where the key naming `path` is written (for list items: the item itself)."""
        found = self.keys.get(path)
        return found if found is not None else self.value_at(path)


def parse_yaml(text: str, filename: str) -> Document:
    """Parse one YAML document; a syntax error is a PlanError naming its line and column."""
    refuse_deep_nesting(text, filename)
    yaml = YAML(typ="rt")
    values: dict[Path, Pos] = {}
    keys: dict[Path, Pos] = {}
    with warnings.catch_warnings(record=True) as caught:
        # YAML warnings (an anchor defined twice) go into the plan's warnings, not stderr.
        warnings.simplefilter("always")
        try:
            tree = yaml.load(text)
        except MarkedYAMLError as exc:
            raise PlanError([_syntax_problem(exc, filename)]) from None
        except YAMLError as exc:
            raise PlanError([f"{filename}:1:1: not valid YAML: {exc}"]) from None
        except RecursionError:
            raise PlanError([f"{filename}:1:1: {DEEP}"]) from None
    # A bare `=` loads as a tagged scalar whose position ruamel leaves unset.
    root = getattr(tree, "lc", None)
    line, col = (root.line, root.col) if root is not None else (None, None)
    values[()] = Pos(line + 1, col + 1) if line is not None and col is not None else START
    copy = _Copy(filename, values, keys)
    try:
        if _expanded_size(tree, {}) > MAX_VALUES:  # counted, not expanded: at once
            copy.too_many()
        data = copy.plain(tree, ())
    except RecursionError:
        raise PlanError([f"{filename}:1:1: {DEEP}"]) from None
    found = tuple(_warning(w.message) for w in caught)
    return Document(data=data, values=values, keys=keys, warnings=found)


#: How deep `[` and `{` may nest: ruamel's parser slows with the square of the depth (two
#: thousand levels took seconds before Python's recursion limit stopped it).
MAX_DEPTH = 64
_BRACKETS = re.compile(r"[\[\]{}]")


def refuse_deep_nesting(text: str, filename: str) -> None:
    """Lexical: brackets inside quoted text count too, which only a plan holding 64
    unclosed ones in its strings would notice."""
    depth = 0
    for found in _BRACKETS.finditer(text):
        depth += 1 if found.group() in "[{" else -1
        if depth > MAX_DEPTH:
            line = text.count("\n", 0, found.start()) + 1
            col = found.start() - text.rfind("\n", 0, found.start())
            raise PlanError(
                [f"{filename}:{line}:{col}: not valid YAML: nested more than {MAX_DEPTH} deep"]
            )


#: How many values a plan may hold once its YAML aliases are expanded: 10,000 subtasks of
#: some twenty values each. A few hundred bytes of nested aliases expand to billions
#: ("billion laughs"); this refuses them in about a second.
MAX_VALUES = 250_000
DEEP = "not valid YAML: nested too deep"


def _expanded_size(node: Any, sizes: dict[int, int]) -> int:
    """How many values `node` holds once its aliases are expanded; each mapping or list
    is counted once however many aliases name it (`sizes`, by identity)."""
    if not isinstance(node, CommentedMap | CommentedSeq):
        return 1
    known = sizes.get(id(node))
    if known is None:
        children = node.values() if isinstance(node, CommentedMap) else node
        known = sizes[id(node)] = 1 + sum(_expanded_size(child, sizes) for child in children)
    return known


class _Copy:
    """The ruamel tree as plain data, each value counted and checked on the way."""

    def __init__(self, filename: str, values: dict[Path, Pos], keys: dict[Path, Pos]) -> None:
        self.filename = filename
        self.values = values
        self.keys = keys
        self.count = 0

    def too_many(self) -> NoReturn:
        raise PlanError(
            [
                f"{self.filename}:1:1: the plan holds more than {MAX_VALUES:,} values once "
                "its YAML aliases are expanded; write it out, or repeat less"
            ]
        )

    def plain(self, node: Any, path: Path) -> Any:
        self.count += 1
        if self.count > MAX_VALUES:
            self.too_many()
        if isinstance(node, str) and ("\0" in node or not _encodable(node)):
            pos = self.values.get(path, START)
            what = (
                "a NUL character (\\0), which no command line, file name or variable can hold"
                if "\0" in node
                else "a lone UTF-16 surrogate (a \\ud800-\\udfff escape), which is no character"
            )
            raise PlanError([f"{self.filename}:{pos.line}:{pos.col}: a value holds {what}"])
        return _plain(node, path, self.values, self.keys, self.plain)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _plain(
    node: Any, path: Path, values: dict[Path, Pos], keys: dict[Path, Pos], plain: Any
) -> Any:
    if isinstance(node, CommentedMap):
        result: dict[str, Any] = {}
        for raw_key, child in node.items():
            key = raw_key if isinstance(raw_key, str) else str(raw_key)
            sub = (*path, key)
            # Keys pulled in by a `<<:` merge have no position of their own here; they
            # fall back to the enclosing mapping.
            try:
                line, col = node.lc.key(raw_key)
                keys[sub] = Pos(line + 1, col + 1)
                line, col = node.lc.value(raw_key)
                values[sub] = Pos(line + 1, col + 1)
            except (KeyError, TypeError):
                pass
            if "\0" in key or not _encodable(key):
                plain(key, sub)  # says where
            result[key] = plain(child, sub)
        return result
    if isinstance(node, CommentedSeq):
        items: list[Any] = []
        for index, child in enumerate(node):
            sub = (*path, index)
            try:
                line, col = node.lc.item(index)
                values[sub] = keys[sub] = Pos(line + 1, col + 1)
            except (KeyError, TypeError):
                pass
            items.append(plain(child, sub))
        return items
    if isinstance(node, TaggedScalar):
        # `!!str 3`, `!anything x` and a bare `=` (YAML 1.1's value tag): the text as written.
        return plain(str(node.value), path)
    # ruamel's scalar subclasses keep formatting we do not need; hand pydantic exact types.
    if isinstance(node, bool):
        return bool(node)
    if isinstance(node, str):
        return str.__str__(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


def _syntax_problem(exc: MarkedYAMLError, filename: str) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else "1:1"
    problem = str(exc.problem or exc.context or "invalid syntax")
    if problem.startswith("found duplicate key"):
        # ruamel says: found duplicate key "a" with value "2" (original value: "1")
        match = re.match(r'found duplicate key "(.*?)"', problem)
        name = match.group(1) if match else "?"
        return f"{filename}:{where}: key '{name}' is written twice in the same mapping"
    if exc.context and exc.problem:
        # The problem is where the parser gave up (for a quote left open: the end of the
        # file); where the construct it was reading began is what the user has to find.
        began = exc.context_mark
        since = "" if began is None else f" that starts at {began.line + 1}:{began.column + 1}"
        problem = f"{problem} ({exc.context}{since})"
    return f"{filename}:{where}: not valid YAML: {problem}"


def _warning(message: Warning | str) -> tuple[Pos, str]:
    text = str(message).strip()
    spots = re.findall(r"line (\d+), column (\d+)", text)
    pos = Pos(int(spots[-1][0]), int(spots[-1][1])) if spots else START
    return pos, text.splitlines()[0] if text else "YAML warning"
