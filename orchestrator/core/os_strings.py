"""Names as git and the file system give them: any bytes, held in a str, and their JSON form.

git accepts any bytes in a path but NUL (not UTF-8, newlines, escapes, a leading dash),
and an agent may make any of them. kairo-orch decodes what git prints as UTF-8 with
`surrogateescape` (git/repo.py), as Python's own `os.fsdecode` does: each byte that is not
part of valid UTF-8 becomes a lone surrogate, U+DC80..U+DCFF, and encoding the str the same
way gives back the very bytes, to hand to git or to open. So the core carries such a name
as a plain `str`, which renderers show escaped.

What the log cannot hold is a lone surrogate: canonical JSON (RFC 8785) is Unicode text,
and the hash chain is over its UTF-8 bytes. An `OsStr` field is written as its string
when its bytes are UTF-8, which every name of an old log was, so old logs read and hash
as they always did; otherwise as `{"base64": ...}`, the standard base64 (with padding) of
its bytes. One value has one form: an object whose bytes are UTF-8, or whose base64 is
not the one this writes, is refused, so a reader never holds a value two spellings
could stand for. A JSON consumer of the log, of `status --json` or of `report --json` gets
a name's bytes back as `s.encode()` of a string, or `base64.b64decode(o["base64"])` of an
object (store.md).

A str that no bytes decode to (a lone surrogate outside U+DC80..U+DCFF, which only an
agent's JSON escape `\\ud800` can make) has its strays written as U+FFFD: it names no
file, and writing it must never stop the supervisor.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

#: The one key of a name's JSON form when its bytes are not UTF-8.
BYTES_KEY = "base64"

_ESCAPED = range(0xDC80, 0xDD00)  # what surrogateescape makes of the bytes 0x80..0xFF


def as_bytes(text: str) -> bytes:
    """The bytes `text` stands for: its UTF-8, each escaped byte given back as it was."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        stray = "".join(
            "\ufffd" if 0xD800 <= ord(c) <= 0xDFFF and ord(c) not in _ESCAPED else c for c in text
        )
        return stray.encode("utf-8", "surrogateescape")


def from_bytes(raw: bytes) -> str:
    """`raw` as kairo-orch holds a name: `as_bytes` gives it back."""
    return raw.decode("utf-8", "surrogateescape")


def to_json(text: str) -> str | dict[str, str]:
    """The JSON form of a name: itself when its bytes are UTF-8, else its bytes in base64."""
    if text.isascii():
        return text
    raw = as_bytes(text)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {BYTES_KEY: base64.b64encode(raw).decode("ascii")}


def from_json(value: str | Mapping[str, str]) -> str:
    """A name from its JSON form, refusing any form `to_json` would not have written."""
    if isinstance(value, str):
        return value
    if set(value) != {BYTES_KEY}:
        raise ValueError(f"a name is a string or {{{BYTES_KEY!r}: ...}}, not {sorted(value)}")
    encoded = value[BYTES_KEY]
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{encoded!r} is not base64") from None
    if base64.b64encode(raw).decode("ascii") != encoded:
        raise ValueError(f"{encoded!r} is not the canonical base64 of its bytes")
    text = from_bytes(raw)
    if to_json(text) != value:
        raise ValueError(f"{encoded!r} is UTF-8: it is written as a string")
    return text


def json_safe(value: Any) -> Any:
    """`value`, a document made of JSON's types, with every string that is not Unicode
    (a name's undecodable bytes) in its JSON form: what `json.dumps` of `status --json`
    and `report --json` must be given so that their output is valid JSON (I-JSON)."""
    if isinstance(value, str):
        return value if value.isascii() else to_json(value)
    if isinstance(value, Mapping):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


class _OsStrSchema:
    """A str in memory; a string, or `{"base64": ...}`, in JSON. The string branch is
    pydantic's own (no Python call a field when a log is folded)."""

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        encoded = core_schema.typed_dict_schema(
            {BYTES_KEY: core_schema.typed_dict_field(core_schema.str_schema(strict=True))},
            extra_behavior="forbid",
        )
        return core_schema.union_schema(
            [
                core_schema.str_schema(strict=True),
                core_schema.no_info_after_validator_function(from_json, encoded),
            ],
            serialization=core_schema.plain_serializer_function_ser_schema(
                to_json, when_used="json"
            ),
        )


#: A field that may hold a name from git or the file system, or an agent's text: any
#: bytes, losslessly, in the log (see the module's docstring).
OsStr = Annotated[str, _OsStrSchema]
