"""The event log's hash chain: sealing new events, and verifying a log from seq 0 (pure).

Both halves live here so that every backend stores and hashes the same bytes: `prepare`
and `seal` on the write side (with core's reference `chain_hash`), `verify_chain` (over
events) and `verify_rows` (over a store's rows, hashing their stored text as it is) on
the read side, with the fast hashes of `hashing`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.canonical import canonical_json, chain_hash, envelope
from orchestrator.errors import LogRewritten, LogVerificationError
from orchestrator.store.base import EMPTY_HEAD_HASH, NewEvent, StoredEvent
from orchestrator.store.hashing import event_hash, follow_stored_rows, json_string


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
        previous = _check_event(execution_id, expected_seq, previous, event)
        expected_seq += 1
    return _check_head(execution_id, expected_seq - 1, previous, head_seq, head_hash)


def verify_rows(
    execution_id: str, rows: Iterable[Sequence[Any]], head_seq: int, head_hash: str
) -> tuple[int, str]:
    """`verify_chain` over a store's rows of (seq, event_type, schema_version,
    payload_json, event_hash, created_at), all of `execution_id`, in seq order: the same
    checks and the same first bad seq, read lazily, so a long log is never held whole.

    A row whose spliced stored text hashes to its `event_hash` holds without being parsed
    (`hashing.follow_stored_rows`); any other row is parsed and checked as `verify_chain`
    checks an event, which either names it or accepts it (a payload stored in another
    spelling of its canonical JSON, as `verify_chain` has always accepted).
    """
    quoted_id = json_string(execution_id)
    remaining = iter(rows)
    expected_seq, previous = 0, EMPTY_HEAD_HASH
    while True:
        expected_seq, previous, row = follow_stored_rows(
            quoted_id, remaining, expected_seq, previous
        )
        if row is None:
            return _check_head(execution_id, expected_seq - 1, previous, head_seq, head_hash)
        event = _parse(execution_id, expected_seq, row)
        previous = _check_event(execution_id, expected_seq, previous, event)
        expected_seq += 1


def _parse(execution_id: str, expected_seq: int, row: Sequence[Any]) -> StoredEvent:
    """A row of `verify_rows` as an event, for `_check_event`. A payload that is not JSON
    fails at its seq, unless that seq is missing, which `_check_event` then names.
    `event_id` is not read: no hash covers it."""
    seq, kind, version, text, digest, at = row
    try:
        payload = json.loads(text)
    except (TypeError, ValueError):
        if seq == expected_seq:
            raise _fail(execution_id, seq, "its payload is not JSON") from None
        payload = {}
    return StoredEvent(execution_id, seq, "", kind, version, payload, digest, at)


def _check_event(execution_id: str, expected_seq: int, previous: str, event: StoredEvent) -> str:
    """The hash of `event` when it holds as `expected_seq` after `previous`."""
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
    return computed


def _check_head(
    execution_id: str, last_seq: int, previous: str, head_seq: int, head_hash: str
) -> tuple[int, str]:
    if head_seq > last_seq:
        ends = f"it ends at seq {last_seq}" if last_seq >= 0 else "it has no event"
        reason = f"the head says the log ends at seq {head_seq}, but {ends}"
        raise _fail(execution_id, last_seq + 1, reason)
    if head_seq < last_seq:
        reason = f"the log goes on to seq {last_seq}, past its head at seq {head_seq}"
        raise _fail(execution_id, head_seq + 1, reason)
    if head_hash != previous:
        reason = "the execution's head hash does not match the last event"
        raise _fail(execution_id, max(last_seq, 0), reason)
    return last_seq, previous  # (-1, GENESIS) for an empty log


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


def past_head(execution_id: str, head_seq: int) -> LogVerificationError:
    """Events past the head: what verify would refuse, at the seq after the head."""
    return LogVerificationError(
        f"the event log of {execution_id} fails verification at seq {head_seq + 1}:"
        f" it has events past its head at seq {head_seq}",
        execution_id=execution_id,
        bad_seq=head_seq + 1,
    )


def check_written_head(
    execution_id: str,
    written: tuple[int, str],
    hash_at_written: str | None,
    head_seq: int,
    head_hash: str,
) -> None:
    """Refuse to extend a log whose event at `written`'s seq, the last its writer wrote,
    is not the one it wrote (`hash_at_written`, what the log holds there now), nor a head
    at that seq that is not its hash. A chain rewritten from any seq up to it and hashed
    anew, so that it verifies, changes that hash: nothing else does."""
    seq, digest = written
    if hash_at_written is None:
        what = f"seq {seq}, the last event it wrote, is gone (the log ends at seq {head_seq})"
        raise _rewritten(execution_id, min(seq, head_seq + 1), what)
    if hash_at_written != digest:
        raise _rewritten(execution_id, seq, f"the event at seq {seq} is not the one it wrote")
    if head_seq == seq and head_hash != digest:
        raise _rewritten(execution_id, seq, f"its head at seq {seq} is not the one it wrote")


def written_over(execution_id: str, written: tuple[int, str], head_seq: int) -> LogRewritten:
    """Events after the last its writer wrote, with the row's version left as it was: no
    store's append made them (each moves the version)."""
    seq = written[0]
    what = f"seq {seq + 1} to {head_seq} follow the last event it wrote, and it wrote none of them"
    return _rewritten(execution_id, seq + 1, what)


def _rewritten(execution_id: str, seq: int, what: str) -> LogRewritten:
    return LogRewritten(
        f"the event log of {execution_id} was changed behind its writer's back: {what}",
        execution_id=execution_id,
        bad_seq=seq,
        what=what,
    )
