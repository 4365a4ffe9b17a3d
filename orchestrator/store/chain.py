"""The event log's hash chain: sealing new events and verifying a log (pure: no database).

Also the write side, `prepare` and `seal`, so every backend stores and hashes the same
bytes. The formula is store.md's, implemented once in `orchestrator.core.canonical`:

    event_hash_0 = sha256_hex("GENESIS" + canonical_json(envelope_0))
    event_hash_n = sha256_hex(event_hash_{n-1} + canonical_json(envelope_n))

Recovery verifies a whole log before anything else, so this is on the hot path, and the
reference `canonical_json` (the pure-Python rfc8785 package) costs ~18 us an event: 1.8 s for
100,000. Payloads parsed from JSON are nearly always made of str, int, bool, None, list and
dict with ASCII keys; for exactly those values the stdlib's C JSON encoder (sorted keys,
no spaces, no ASCII escaping) writes the same bytes as RFC 8785:

- strings: both escape only `"`, `\\` and U+0000..U+001F, with the same short forms and
  lower-case `\\u00xx`; a lone surrogate fails the UTF-8 encode and falls back;
- integers within +-(2**53 - 1): both write `str(n)`; larger ones fall back (and are refused);
- keys: for ASCII keys code-point order is UTF-16 order, which RFC 8785 sorts by.

Anything else (floats, non-ASCII keys, tuples, subclasses) takes the reference path, so the
fast path can only ever be a shortcut to the same bytes; tests/store/test_chain.py checks
the two agree on arbitrary JSON values. Writes always use the reference `chain_hash`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.canonical import GENESIS, canonical_json, chain_hash, envelope
from orchestrator.errors import LogVerificationError
from orchestrator.store.base import EMPTY_HEAD_HASH, EMPTY_HEAD_SEQ, NewEvent, StoredEvent

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


def _fail(execution_id: str, seq: int, reason: str) -> LogVerificationError:
    return LogVerificationError(
        f"the event log of {execution_id} fails verification at seq {seq}: {reason}",
        execution_id=execution_id,
        bad_seq=seq,
    )


def verify_chain(
    execution_id: str, events: Iterable[StoredEvent], head_seq: int, head_hash: str
) -> tuple[int, str]:
    """Check `events` (in seq order) from seq 0 against their hashes and the row's head.

    Returns the verified head (seq, hash); (-1, GENESIS) for an empty log. Raises
    `LogVerificationError` naming the first seq that does not hold: an edited event fails
    at its own seq, a deleted one at the seq that is missing, a reordered pair at the
    lower seq, a cut-off tail at the first seq the head promises but the log lacks, and
    events past the head at the first one the head does not cover.
    """
    expected_seq = 0
    previous = EMPTY_HEAD_HASH
    for event in events:
        if event.seq != expected_seq:
            if isinstance(event.seq, int) and event.seq > expected_seq:
                reason = f"it is missing (the next event has seq {event.seq})"
            else:
                reason = f"an event with seq {event.seq!r} is in its place"
            raise _fail(execution_id, expected_seq, reason)
        if event.execution_id != execution_id:
            reason = f"it belongs to execution {event.execution_id}"
            raise _fail(execution_id, expected_seq, reason)
        try:
            computed = event_hash(previous, event)
        except ValueError as error:
            reason = f"its content has no canonical JSON form ({error})"
            raise _fail(execution_id, expected_seq, reason) from None
        if computed != event.event_hash:
            raise _fail(execution_id, expected_seq, "its hash does not match its content")
        previous = computed
        expected_seq += 1

    last_seq = expected_seq - 1
    if head_seq > last_seq:
        reason = f"the head says the log ends at seq {head_seq}, but it ends at seq {last_seq}"
        raise _fail(execution_id, last_seq + 1, reason)
    if head_seq < last_seq:
        reason = f"the log goes on to seq {last_seq}, past its head at seq {head_seq}"
        raise _fail(execution_id, head_seq + 1, reason)
    if head_hash != previous:
        reason = "the execution's head hash does not match the last event"
        raise _fail(execution_id, max(last_seq, 0), reason)
    if last_seq == EMPTY_HEAD_SEQ:
        return EMPTY_HEAD_SEQ, EMPTY_HEAD_HASH
    return last_seq, previous


@dataclass(frozen=True, slots=True)
class PreparedEvent:
    """A `NewEvent` with its payload in the form it is stored and read back in."""

    event_type: str
    schema_version: int
    payload_json: str  # canonical JSON: the text in `payload_json`
    payload: dict[str, Any]  # json.loads(payload_json): what every reader will see


def prepare(event: NewEvent) -> PreparedEvent:
    """Canonicalize a payload, refusing one that would not read back as the same value.

    The hash must be of what a reader parses, not of what the writer held: a float such
    as 1e20 is written `100000000000000000000`, which reads back as an integer past
    2**53 that has no canonical form, and a tuple reads back as a list.
    """
    if type(event.payload) is not dict:
        raise TypeError(f"the payload of a {event.event_type} event must be a dict")
    what = f"the payload of a {event.event_type} event"
    try:
        text = canonical_json(event.payload)
    except ValueError as error:
        raise ValueError(f"{what} has no canonical JSON form: {error}") from error
    payload = json.loads(text)
    try:
        survives = canonical_json(payload) == text
    except ValueError:
        survives = False
    if not survives:
        raise ValueError(f"{what} does not survive JSON (a float beyond 2**53?)")
    return PreparedEvent(event.event_type, event.schema_version, text.decode("utf-8"), payload)


def seal(
    execution_id: str,
    head_seq: int,
    head_hash: str,
    events: Sequence[PreparedEvent],
    *,
    created_at: str,
    new_id: Callable[[], str],
) -> list[StoredEvent]:
    """The events that follow the head (head_seq, head_hash), hashed with core's reference
    `chain_hash` (never the fast path: a writer's mistake must not be self-consistent)."""
    sealed: list[StoredEvent] = []
    previous = head_hash
    for seq, event in enumerate(events, start=head_seq + 1):
        value = envelope(
            execution_id=execution_id,
            seq=seq,
            event_type=event.event_type,
            schema_version=event.schema_version,
            created_at=created_at,
            payload=event.payload,
        )
        previous = chain_hash(previous, value)
        sealed.append(
            StoredEvent(
                execution_id,
                seq,
                new_id(),
                event.event_type,
                event.schema_version,
                event.payload,
                previous,
                created_at,
            )
        )
    return sealed
