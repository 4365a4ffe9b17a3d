"""The hash chain, apart from any database: the formula, the fast path, every kind of tampering."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.core.canonical import chain_hash, envelope
from orchestrator.errors import LogVerificationError
from orchestrator.store import chain
from orchestrator.store.base import StoredEvent
from orchestrator.store.chain import verify_chain, verify_rows
from orchestrator.store.hashing import (
    _fast_envelope_json,
    event_hash,
    follow_stored_rows,
    json_string,
)
from tests.store.strategies import EXECUTION_ID, TRICKY_TEXT, any_values, build_log, logs

Log = list[StoredEvent]
Head = tuple[int, str]
SETTINGS = settings(max_examples=60, deadline=None)

# Written out by hand from store.md: keys in RFC 8785 order, no spaces, é as UTF-8.
ENVELOPE_0 = (
    '{"created_at":"2026-12-02T17:14:51.123456Z","event_type":"execution_created",'
    '"execution_id":"01JDQ8ZK7M4X2Y9V3T6R5W8NQE","payload":{"plan":"rename",'
    '"z\u00e9":[1,true,null,"a\\"b"]},"schema_version":1,"seq":0}'
)
ENVELOPE_1 = (
    '{"created_at":"2026-12-02T17:14:52.000001Z","event_type":"supervisor_started",'
    '"execution_id":"01JDQ8ZK7M4X2Y9V3T6R5W8NQE","payload":{"host":"box","pid":4242},'
    '"schema_version":1,"seq":1}'
)
HASH_0 = "b1cebf267e8be428a294c323a541a5ff6a30f8a16da194535792c950ab107d0b"
HASH_1 = "697a3b27dfd996a13f1721dd97a526bb94bae17391f4f25104e8ae1301f4f62a"


def _pinned_log() -> Log:
    first = {"z\u00e9": [1, True, None, 'a"b'], "plan": "rename"}
    return [
        StoredEvent(
            EXECUTION_ID,
            0,
            "e0",
            "execution_created",
            1,
            first,
            HASH_0,
            "2026-12-02T17:14:51.123456Z",
        ),
        StoredEvent(
            EXECUTION_ID,
            1,
            "e1",
            "supervisor_started",
            1,
            {"pid": 4242, "host": "box"},
            HASH_1,
            "2026-12-02T17:14:52.000001Z",
        ),
    ]


def test_the_formula_is_genesis_then_the_previous_hash_before_the_canonical_envelope() -> None:
    zero, one = _pinned_log()
    assert hashlib.sha256(b"GENESIS" + ENVELOPE_0.encode()).hexdigest() == HASH_0
    assert hashlib.sha256((HASH_0 + ENVELOPE_1).encode()).hexdigest() == HASH_1
    value = envelope(
        execution_id=EXECUTION_ID,
        seq=0,
        event_type=zero.event_type,
        schema_version=1,
        created_at=zero.created_at,
        payload=zero.payload,
    )
    assert rfc8785.dumps(value) == ENVELOPE_0.encode()
    assert chain_hash(None, value) == HASH_0
    assert event_hash(None, zero) == HASH_0
    assert event_hash(HASH_0, one) == HASH_1
    assert verify_chain(EXECUTION_ID, [zero, one], 1, HASH_1) == (1, HASH_1)


def test_an_empty_log_verifies_against_the_empty_head_only() -> None:
    assert verify_chain(EXECUTION_ID, [], -1, "GENESIS") == (-1, "GENESIS")
    with pytest.raises(LogVerificationError) as caught:
        verify_chain(EXECUTION_ID, [], -1, HASH_0)
    assert caught.value.bad_seq == 0
    with pytest.raises(LogVerificationError) as caught:
        verify_chain(EXECUTION_ID, [], 3, HASH_0)
    assert caught.value.bad_seq == 0


def test_the_error_names_the_execution_and_the_seq() -> None:
    zero, one = _pinned_log()
    edited = dataclasses.replace(one, payload={"pid": 1, "host": "box"})
    with pytest.raises(LogVerificationError) as caught:
        verify_chain(EXECUTION_ID, [zero, edited], 1, HASH_1)
    assert caught.value.message == (
        f"the event log of {EXECUTION_ID} fails verification at seq 1: "
        "its hash does not match its content"
    )
    assert (caught.value.execution_id, caught.value.bad_seq, caught.value.exit_code) == (
        EXECUTION_ID,
        1,
        3,
    )


@SETTINGS
@given(value=any_values, key=st.text(max_size=3), seq=st.integers(0, 2**60))
def test_the_fast_path_writes_exactly_what_rfc8785_writes(value: Any, key: str, seq: int) -> None:
    event = StoredEvent(EXECUTION_ID, seq, "e", "t\u00e9", 1, {key: value}, "", "2026")
    value_env = envelope(
        execution_id=EXECUTION_ID,
        seq=seq,
        event_type="t\u00e9",
        schema_version=1,
        created_at="2026",
        payload={key: value},
    )
    try:
        reference: str | None = chain_hash("prev", value_env)
    except ValueError:
        reference = None
    fast_text = _fast_envelope_json(event)
    if fast_text is not None and reference is not None:
        assert fast_text.encode() == rfc8785.dumps(value_env)
    if reference is None:
        with pytest.raises(ValueError):
            event_hash("prev", event)
    else:
        assert event_hash("prev", event) == reference


def test_payloads_parsed_from_json_take_the_fast_path() -> None:
    payload = json.loads('{"subtask_id":"a","attempt":2,"ok":true,"x":null,"l":[1,"b",{}]}')
    event = StoredEvent(EXECUTION_ID, 7, "e", "attempt_started", 1, payload, "", "2026")
    assert _fast_envelope_json(event) is not None
    assert _fast_envelope_json(dataclasses.replace(event, payload={"f": 1.5})) is None
    assert _fast_envelope_json(dataclasses.replace(event, payload={"\u00e9": 1})) is None


@SETTINGS
@given(log=logs(min_size=0))
def test_every_untouched_log_verifies(log: Log) -> None:
    head = (log[-1].seq, log[-1].event_hash) if log else (-1, "GENESIS")
    assert verify_chain(EXECUTION_ID, log, *head) == head


# A tampering takes a valid log, its head and a draw, and gives the tampered log, the
# head to check against and the first seq verification must name.
Tampering = Callable[[st.DataObject, Log, Head], tuple[Log, Head, int]]


def _index(data: st.DataObject, log: Log, extra: int = 0) -> int:
    return data.draw(st.integers(0, len(log) - 1 + extra))


def _changed(data: st.DataObject, log: Log, head: Head, **fields: Any) -> tuple[Log, Head, int]:
    k = _index(data, log)
    values = {name: make(log[k]) for name, make in fields.items()}
    return [*log[:k], dataclasses.replace(log[k], **values), *log[k + 1 :]], head, k


def _wrapped_payload(event: StoredEvent) -> dict[str, Any]:
    if not event.payload:
        return {"added": 0}
    key = sorted(event.payload)[0]
    return {**event.payload, key: [event.payload[key]]}  # [v] never encodes as v


def edit_payload(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    return _changed(data, log, head, payload=_wrapped_payload)


def edit_event_type(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    return _changed(data, log, head, event_type=lambda e: e.event_type + "x")


def edit_created_at(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    return _changed(data, log, head, created_at=lambda e: e.created_at.replace("2026", "2025"))


def edit_schema_version(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    return _changed(data, log, head, schema_version=lambda e: e.schema_version + 1)


def edit_event_hash(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    flip = {"0": "1"}
    return _changed(
        data, log, head, event_hash=lambda e: flip.get(e.event_hash[0], "0") + e.event_hash[1:]
    )


def edit_execution_id(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    return _changed(data, log, head, execution_id=lambda e: e.execution_id.lower())


def edit_and_rehash(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    """A forger who rehashes the edited event breaks the next one, or the head."""
    k = _index(data, log)
    edited = dataclasses.replace(log[k], payload=_wrapped_payload(log[k]))
    edited = dataclasses.replace(
        edited, event_hash=event_hash(log[k - 1].event_hash if k else None, edited)
    )
    return [*log[:k], edited, *log[k + 1 :]], head, min(k + 1, len(log) - 1)


def delete(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    k = _index(data, log)
    return [*log[:k], *log[k + 1 :]], head, k


def _renumbered(events: Log, by: int) -> Log:
    return [dataclasses.replace(e, seq=e.seq + by) for e in events]


def insert_forged(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    """A well-hashed event slipped in at k, the rest renumbered: the old k no longer fits."""
    k = _index(data, log, extra=1)
    forged = StoredEvent(EXECUTION_ID, k, "forged", "forged", 1, {}, "", "2026")
    forged = dataclasses.replace(
        forged, event_hash=event_hash(log[k - 1].event_hash if k else None, forged)
    )
    tampered = [*log[:k], forged, *_renumbered(log[k:], 1)]
    return tampered, head, k + 1 if k < len(log) else len(log)


def insert_garbage(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    k = _index(data, log, extra=1)
    forged = StoredEvent(EXECUTION_ID, k, "forged", "forged", 1, {}, "0" * 64, "2026")
    return [*log[:k], forged, *_renumbered(log[k:], 1)], head, k


def duplicate(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    k = _index(data, log)
    return [*log[: k + 1], log[k], *log[k + 1 :]], head, k + 1


def swap_seqs(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    """Two rows trade seqs (an UPDATE in SQL): read back in seq order, their contents swap."""
    i, j = sorted(
        data.draw(st.lists(st.integers(0, len(log) - 1), min_size=2, max_size=2, unique=True))
    )
    tampered = list(log)
    tampered[i] = dataclasses.replace(log[j], seq=i)
    tampered[j] = dataclasses.replace(log[i], seq=j)
    return tampered, head, i


def swap_positions(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    i, j = sorted(
        data.draw(st.lists(st.integers(0, len(log) - 1), min_size=2, max_size=2, unique=True))
    )
    tampered = list(log)
    tampered[i], tampered[j] = log[j], log[i]
    return tampered, head, i


def truncate_tail(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    cut = data.draw(st.integers(1, len(log)))
    return log[: len(log) - cut], head, len(log) - cut


def edit_head_hash(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    return log, (head[0], log[0].event_hash if len(log) > 1 else "0" * 64), len(log) - 1


def edit_head_seq(data: st.DataObject, log: Log, head: Head) -> tuple[Log, Head, int]:
    seq = data.draw(st.integers(-1, len(log) + 3).filter(lambda s: s != head[0]))
    return log, (seq, head[1]), len(log) if seq > head[0] else seq + 1


TAMPERINGS: dict[Tampering, int] = {  # each with the shortest log it needs
    edit_payload: 1,
    edit_event_type: 1,
    edit_created_at: 1,
    edit_schema_version: 1,
    edit_event_hash: 1,
    edit_execution_id: 1,
    edit_and_rehash: 1,
    delete: 1,
    insert_forged: 1,
    insert_garbage: 1,
    duplicate: 1,
    swap_seqs: 2,
    swap_positions: 2,
    truncate_tail: 1,
    edit_head_hash: 1,
    edit_head_seq: 1,
}


@pytest.mark.parametrize("tamper", TAMPERINGS, ids=lambda t: t.__name__)
@SETTINGS
@given(data=st.data())
def test_every_tampering_is_caught_at_its_first_bad_seq(
    tamper: Tampering, data: st.DataObject
) -> None:
    log = data.draw(logs(min_size=TAMPERINGS[tamper]), label="log")
    tampered, head, bad_seq = tamper(data, log, (log[-1].seq, log[-1].event_hash))
    with pytest.raises(LogVerificationError) as caught:
        verify_chain(EXECUTION_ID, tampered, *head)
    assert caught.value.bad_seq == bad_seq
    assert f"fails verification at seq {bad_seq}:" in caught.value.message


def test_content_with_no_canonical_form_fails_at_its_seq() -> None:
    log = build_log([{"a": 1}, {"b": 2}])
    broken = dataclasses.replace(log[1], payload={"b": float("nan")})
    with pytest.raises(LogVerificationError, match="at seq 1: its content has no canonical"):
        verify_chain(EXECUTION_ID, [log[0], broken], 1, log[1].event_hash)


# verify_rows: the same log as a store's rows, the payload as the canonical text it is stored in.
Row = tuple[Any, ...]


def _rows(log: Log) -> list[Row]:
    return [
        (e.seq, e.event_type, e.schema_version, _stored(e.payload), e.event_hash, e.created_at)
        for e in log
    ]


def _stored(payload: Any) -> str:
    try:
        return rfc8785.dumps(payload).decode()
    except ValueError:  # no canonical form (NaN): stored as a naive writer would
        return json.dumps(payload)


def _with(rows: list[Row], k: int, **fields: Any) -> list[Row]:
    names = ("seq", "event_type", "schema_version", "payload_json", "event_hash", "created_at")
    edited = tuple(fields.get(name, value) for name, value in zip(names, rows[k], strict=True))
    return [*rows[:k], edited, *rows[k + 1 :]]


@SETTINGS
@given(
    value=any_values,
    key=st.text(max_size=3),
    kind=st.text(max_size=3) | TRICKY_TEXT,
    seq=st.integers(0, 2**60),
    version=st.integers(-(2**60), 2**60),
)
def test_the_spliced_stored_text_hashes_as_the_reference_does(
    value: Any, key: str, kind: str, seq: int, version: int
) -> None:
    payload = {key: value}
    value_env = envelope(
        execution_id=EXECUTION_ID,
        seq=seq,
        event_type=kind,
        schema_version=version,
        created_at="2026",
        payload=payload,
    )
    try:
        reference = chain_hash("prev", value_env)
    except ValueError:
        return  # nothing canonical to store
    row = (seq, kind, version, rfc8785.dumps(payload).decode(), reference, "2026")
    followed = follow_stored_rows(json_string(EXECUTION_ID), iter([row]), seq, "prev")
    assert followed == (seq + 1, reference, None)


def test_the_spliced_hash_is_of_the_stored_bytes_and_only_of_well_typed_fields() -> None:
    (zero,) = build_log([{"a": 1, "b": [True]}])
    canonical = '{"a":1,"b":[true]}'

    def holds(text: object, *, seq: object = 0, version: object = 1, at: object = None) -> bool:
        row = (seq, zero.event_type, version, text, zero.event_hash, at or zero.created_at)
        followed = follow_stored_rows(json_string(EXECUTION_ID), iter([row]), 0, "GENESIS")
        assert followed in ((1, zero.event_hash, None), (0, "GENESIS", row))
        return followed[2] is None

    assert holds(canonical)
    for other_spelling in ('{"a": 1,"b":[true]}', '{"b":[true],"a":1}', '{"a":1.0,"b":[true]}'):
        assert not holds(other_spelling)  # left to the reference, which parses it
    # "1" and True would be spliced as the very bytes of 1: refused, left to the reference.
    assert not holds(canonical, version="1")
    assert not holds(canonical, seq=False)
    assert not holds(canonical, seq=1)
    assert not holds(canonical, version=2**53)
    assert not holds(canonical.encode())
    assert not holds(canonical, at=7)
    assert not holds(canonical, at=chr(0xD800))  # no UTF-8 for it


@SETTINGS
@given(log=logs(min_size=0))
def test_every_untouched_log_verifies_from_its_rows(log: Log) -> None:
    head = (log[-1].seq, log[-1].event_hash) if log else (-1, "GENESIS")
    assert verify_rows(EXECUTION_ID, _rows(log), *head) == head


@pytest.mark.parametrize(
    "tamper",
    [t for t in TAMPERINGS if t is not edit_execution_id],  # rows are selected by execution
    ids=lambda t: t.__name__,
)
@SETTINGS
@given(data=st.data())
def test_every_tampering_of_the_rows_is_caught_at_the_same_first_bad_seq(
    tamper: Tampering, data: st.DataObject
) -> None:
    log = data.draw(logs(min_size=TAMPERINGS[tamper]), label="log")
    tampered, head, bad_seq = tamper(data, log, (log[-1].seq, log[-1].event_hash))
    with pytest.raises(LogVerificationError) as caught:
        verify_rows(EXECUTION_ID, _rows(tampered), *head)
    assert caught.value.bad_seq == bad_seq
    assert f"fails verification at seq {bad_seq}:" in caught.value.message


def test_a_stored_text_is_judged_by_the_reference_when_its_bytes_do_not_hash() -> None:
    rows = _rows(build_log([{"a": 1}, {"b": 2}, {"c": 3}]))
    head = (2, rows[2][4])

    def failure(tampered: list[Row]) -> tuple[int, str]:
        with pytest.raises(LogVerificationError) as caught:
            verify_rows(EXECUTION_ID, tampered, *head)
        return caught.value.bad_seq, caught.value.message.partition(": ")[2]

    # Another spelling of the same canonical JSON is what verify_chain has always accepted.
    assert verify_rows(EXECUTION_ID, _with(rows, 1, payload_json='{ "b" : 2 }'), *head) == head
    assert failure(_with(rows, 1, payload_json='{"b":3}')) == (
        1,
        "its hash does not match its content",
    )
    assert failure(_with(rows, 1, payload_json="{")) == (1, "its payload is not JSON")
    assert failure(_with(rows, 1, payload_json=None)) == (1, "its payload is not JSON")
    assert failure(_with(rows, 1, payload_json='{"b":NaN}'))[0] == 1
    assert failure(_with(rows, 1, schema_version="1")) == (
        1,
        "its hash does not match its content",
    )
    gap = [rows[0], *_with(rows, 2, payload_json="{")[2:]]  # seq 1 gone, seq 2 not JSON
    assert failure(gap) == (1, "it is missing (the next event has seq 2)")


def test_untouched_rows_are_never_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    log = build_log([{"a": 1e20, "b": "\u00e9\u2028"}, {"\u00e9": [None, 1.5]}, {}])
    rows = _rows(log)

    def parse(*args: object) -> StoredEvent:
        raise AssertionError("an untouched row was parsed")

    monkeypatch.setattr(chain, "_parse", parse)
    assert verify_rows(EXECUTION_ID, rows, 2, log[2].event_hash) == (2, log[2].event_hash)
