"""The in-pane runner's files: JSON by json's C half (`_json`), which imports nothing, and
records written so that a reader sees the old file or the whole new one.

`import json` loads its Python half, and with it `re` and what that imports, which with
signal's Python half was more than the rest of the runner's start (agents/runner.py says
why that counts). The runner reads one JSON document (its spec) and writes flat records
(its start and exit), which is all this does.
"""

from __future__ import annotations

import os
from _json import encode_basestring_ascii as _quoted  # json's C half, which json uses
from _json import make_scanner as _make_scanner

# pathlib would be a visible part of the runner's startup; os.path is free.
# ruff: noqa: PTH100, PTH105, PTH108, PTH118, PTH119, PTH120

PRIVATE = 0o600  # an agent's output may well print the secrets its environment holds


class _Decoding:
    """What json's C scanner reads off its context: json.loads's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity and -Infinity, which float() reads as they are


def json_loads(text: str) -> object:
    """`json.loads(text)`, by json's C scanner (ValueError on a malformed document)."""
    scan = _make_scanner(_Decoding)  # type: ignore[arg-type]  # it reads attributes only
    start = len(text) - len(text.lstrip(" \t\n\r"))
    try:
        value, end = scan(text, start)
    except StopIteration as stop:
        raise ValueError(f"not a JSON document (at character {stop.value})") from None
    if text[end:].strip(" \t\n\r"):
        raise ValueError(f"extra data after the JSON document (at character {end})")
    return value


def json_dumps(record: dict[str, object]) -> str:
    """A flat record (its values strings, integers, booleans or None) as compact JSON."""
    return "{" + ",".join(f"{_quoted(k)}:{_json_value(v)}" for k, v in record.items()) + "}"


def _json_value(value: object) -> str:
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _quoted(value)
    raise TypeError(f"a runner record holds no {type(value).__name__}")


def write_json_atomic(path: str, record: dict[str, object]) -> None:
    """Replace `path` with `record` so that a reader sees the old file or the whole new one,
    even across a power cut: write a temporary file, fsync, rename, fsync the directory.

    Nothing planted in the directory is written through: the temporary file is made anew
    (`O_EXCL`, never a symbolic link followed: one found in its place, or a hard link to
    someone's file, is unlinked first), and the rename replaces whatever `path` is, a link
    included, without following it.
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    data = json_dumps(record).encode()
    fd = create_new(tmp)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def create_new(path: str) -> int:
    """A new private file at `path`, open for writing: whatever was there before (a file, a
    symbolic or hard link someone planted) unlinked, never written through."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags, PRIVATE)
    except FileExistsError:
        os.unlink(path)  # a link's own name goes, not what it points at
        return os.open(path, flags, PRIVATE)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
