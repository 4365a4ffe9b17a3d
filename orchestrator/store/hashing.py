"""The hash of one event, fast: the hot half of verification (pure).

The formula is store.md's, implemented once in `orchestrator.core.canonical`:

    event_hash_0 = sha256_hex("GENESIS" + canonical_json(envelope_0))
    event_hash_n = sha256_hex(event_hash_{n-1} + canonical_json(envelope_n))

Recovery verifies a whole log before anything else, and the reference `canonical_json`
(the pure-Python rfc8785 package) costs seconds for a long log (docs/benchmarks.md,
"Figures behind the code"). Payloads
parsed from JSON are nearly always made of str, int, bool, None, list and dict with ASCII
keys; for exactly those values the stdlib's C JSON encoder (sorted keys, no spaces, no
ASCII escaping) writes the same bytes as RFC 8785:

- strings: both escape only `"`, `\\` and U+0000..U+001F, with the same short forms and
  lower-case `\\u00xx`; a lone surrogate fails the UTF-8 encode and falls back;
- integers within +-(2**53 - 1): both write `str(n)`; larger ones fall back (and are refused);
- keys: for ASCII keys code-point order is UTF-16 order, which RFC 8785 sorts by.

Anything else (floats, non-ASCII keys, tuples, subclasses) takes the reference path, so the
fast path can only ever be a shortcut to the same bytes; tests/store/test_chain.py checks
the two agree on arbitrary values. Writers (`chain.seal`) always use the reference.

A stored row needs no parsing at all: `payload_json` holds the payload's canonical text
(`chain.prepare`), and the canonical envelope is that text with the other fields around
it, so `follow_stored_rows` splices it in as it is. A row whose spliced bytes hash to the
`event_hash` a writer sealed is, byte for byte, the envelope it sealed; any edit of those
bytes changes the hash, and such a row is then parsed and judged by `event_hash` as
before, which names what is wrong with it (or accepts a payload stored in another
spelling of the same canonical JSON, as verification always has). What a matching row
no longer proves is that its text parses: only a forger who recomputed every hash from
that row to the head could make one, and such a forger can write any canonical content
anyway; `SqliteStore.read_events` names such a row (exit 3) where it parses it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from orchestrator.core.canonical import GENESIS, chain_hash, envelope
from orchestrator.store.base import StoredEvent

_ENCODER = json.JSONEncoder(
    ensure_ascii=False,
    allow_nan=False,
    sort_keys=True,
    separators=(",", ":"),
    check_circular=False,
)
_quote = json.encoder.encode_basestring  # the string writer of an ensure_ascii=False encoder
_MAX_SAFE_INT = 2**53 - 1


def _reject(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def _make_encode() -> Callable[[Any], str]:
    """`_ENCODER.encode`, minus the C encoder it builds on every call when CPython has one.

    JSONEncoder.encode constructs a `_json.make_encoder` object per call (0.6 us here, a
    third of encoding a small payload); building it once with the very arguments
    JSONEncoder.iterencode passes keeps the bytes identical. Elsewhere, the public path.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _ENCODER.encode
    try:
        # (markers, default, encoder, indent, key_sep, item_sep, sort_keys, skipkeys, allow_nan)
        encoder = make(None, _reject, _quote, None, ":", ",", True, False, False)
    except TypeError:  # a future CPython changed the private signature
        return _ENCODER.encode

    def encode(value: Any) -> str:
        return "".join(encoder(value, 0))

    return encode


_encode = _make_encode()


def _is_plain(value: Any) -> bool:
    """True when `value` is in the subset the C encoder writes exactly as RFC 8785 does."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        number: int = value
        return -_MAX_SAFE_INT <= number <= _MAX_SAFE_INT
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not key.isascii() or not _is_plain(item):
                return False
        return True
    if kind is list:
        return all(_is_plain(item) for item in value)
    return False


# The canonical envelope with its keys in RFC 8785 order, filled in by the fast path. It
# restates `envelope()`'s key set, so the import fails loudly if core's envelope changes.
_ENVELOPE_KEYS = ("created_at", "event_type", "execution_id", "payload", "schema_version", "seq")
_PROBE = envelope(
    execution_id="", seq=0, event_type="", schema_version=0, created_at="", payload={}
)
if sorted(_PROBE) != list(_ENVELOPE_KEYS):
    raise ImportError("orchestrator.store.chain no longer matches core.canonical.envelope")


def _fast_envelope_json(event: StoredEvent) -> str | None:
    """The canonical envelope of `event` as text, or None when only the reference will do."""
    seq, schema_version, payload = event.seq, event.schema_version, event.payload
    if not (
        type(seq) is int
        and type(schema_version) is int
        and -_MAX_SAFE_INT <= seq <= _MAX_SAFE_INT
        and -_MAX_SAFE_INT <= schema_version <= _MAX_SAFE_INT
        and type(event.created_at) is str
        and type(event.event_type) is str
        and type(event.execution_id) is str
        and type(payload) is dict
        and _is_plain(payload)
    ):
        return None
    quote = _quote
    return (
        f'{{"created_at":{quote(event.created_at)},"event_type":{quote(event.event_type)},'
        f'"execution_id":{quote(event.execution_id)},"payload":{_encode(payload)},'
        f'"schema_version":{schema_version},"seq":{seq}}}'
    )


def event_hash(previous_hash: str | None, event: StoredEvent) -> str:
    """The hash `event` must carry after `previous_hash` (None or GENESIS at seq 0).

    Raises ValueError when the content has no canonical JSON form (NaN, a huge integer, a
    lone surrogate): such an event cannot have been written by a store.
    """
    prefix = GENESIS if previous_hash is None else previous_hash
    text = _fast_envelope_json(event)
    if text is not None:
        try:
            return hashlib.sha256((prefix + text).encode("utf-8")).hexdigest()
        except UnicodeEncodeError:
            pass  # a lone surrogate: let the reference say what is wrong
    value = envelope(
        execution_id=event.execution_id,
        seq=event.seq,
        event_type=event.event_type,
        schema_version=event.schema_version,
        created_at=event.created_at,
        payload=event.payload,
    )
    return chain_hash(prefix, value)


def follow_stored_rows(
    quoted_execution_id: str, rows: Iterator[Sequence[Any]], seq: int, previous_hash: str
) -> tuple[int, str, Sequence[Any] | None]:
    """Follow the chain from `previous_hash` through `rows`, expected to start at `seq`,
    while each row's stored text, spliced into its envelope, hashes to its `event_hash`.

    Rows are (seq, event_type, schema_version, payload_json, event_hash, created_at);
    `quoted_execution_id` is `json_string(execution_id)`, made once per log. Returns the
    seq and hash the chain has reached, and the first row that did not hold that way
    (None when `rows` ran out), for the caller to parse and judge with `event_hash`.

    The envelope is written field by field in RFC 8785 order: each string one JSON string
    literal, each number a bare integer (only an int is spliced: a "1" would write the
    very bytes of 1), so the bytes can equal a sealed envelope's only if every field,
    the payload's text included, is the very one that was sealed. One loop rather than a
    call a row: a call a row is a tenth of a long log's verify (docs/benchmarks.md,
    "Figures behind the code").
    """
    sha256, quote = hashlib.sha256, _quote
    for row in rows:
        row_seq, kind, version, text, digest, at = row
        if not (
            row_seq == seq
            and type(row_seq) is int
            and type(version) is int
            and type(text) is str
            and -_MAX_SAFE_INT <= version <= _MAX_SAFE_INT
        ):
            return seq, previous_hash, row
        try:
            spliced = sha256(
                f'{previous_hash}{{"created_at":{quote(at)},"event_type":{quote(kind)},'
                f'"execution_id":{quoted_execution_id},"payload":{text},'
                f'"schema_version":{version},"seq":{seq}}}'.encode()
            ).hexdigest()
        except (TypeError, UnicodeEncodeError):  # a str field that is not; a lone surrogate
            return seq, previous_hash, row
        if spliced != digest:
            return seq, previous_hash, row
        previous_hash = spliced
        seq += 1
    return seq, previous_hash, None


def json_string(value: str) -> str:
    """`value` as a JSON string literal, as RFC 8785 writes it (for `follow_stored_rows`)."""
    return _quote(value)
