"""Both stores, one contract: rows, the log, the head, the optimistic lock, ids, threads,
and tampering behind the store's back caught at its first bad seq."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.core.canonical import canonical_json, chain_hash, envelope
from orchestrator.errors import LogRewritten, LogVerificationError, OwnershipError, UsageError
from orchestrator.store import DurableExecutionStore
from orchestrator.store.base import ConcurrentUpdate, NewEvent, UnknownExecution
from orchestrator.store.sql_store import SqlStore
from tests import postgres
from tests.store.backends import Backend, PostgresBackend, SqliteBackend
from tests.store.conftest import Clock
from tests.store.strategies import parsed_payloads

EID = "01JDQ8ZK7M4X2Y9V3T6R5W8NQE"
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def events(*types: str) -> list[NewEvent]:
    return [NewEvent(kind, {"n": i, "kind": kind}) for i, kind in enumerate(types)]


def plain(*types: str) -> list[NewEvent]:
    return [NewEvent(kind, {}) for kind in types]


def test_it_is_a_durable_execution_store(store: SqlStore) -> None:
    port: DurableExecutionStore = store
    assert port.list_executions() == []


def test_a_round_trip_keeps_every_field(store: SqlStore) -> None:
    created = store.create_execution(EID, "rename", "RUNNING", events("execution_created"))
    appended = store.append(EID, [NewEvent("x", {"é": [1, None, True, "q"]}, schema_version=2)])
    read = store.read_events(EID)
    assert read == created + appended
    assert [e.seq for e in read] == [0, 1]
    assert read[1].payload == {"é": [1, None, True, "q"]}
    assert read[1].schema_version == 2
    assert all(TIMESTAMP.match(e.created_at) for e in read)
    assert len({e.event_id for e in read}) == 2
    assert store.read_events(EID, after_seq=0) == appended
    row = store.get_execution(EID)
    assert row is not None
    assert (row.plan_name, row.status, row.version, row.owner) == ("rename", "RUNNING", 1, None)
    assert TIMESTAMP.match(row.created_at)
    assert row.updated_at > row.created_at


def test_seqs_run_from_zero_without_gaps_and_the_head_follows_every_append(
    store: SqlStore,
) -> None:
    store.create_execution(EID, "p", "RUNNING", [])
    assert store.verify(EID) == (-1, "GENESIS")
    for batch in range(5):
        sealed = store.append(EID, events(*["t"] * batch))
        row = store.get_execution(EID)
        assert row is not None
        if sealed:
            assert (row.head_seq, row.head_hash) == (sealed[-1].seq, sealed[-1].event_hash)
        assert store.verify(EID) == (row.head_seq, row.head_hash)
        assert row.version == batch + 1
    assert [e.seq for e in store.read_events(EID)] == list(range(10))


def test_an_append_is_all_or_nothing(store: SqlStore, backend: Backend) -> None:
    store.create_execution(EID, "p", "RUNNING", events("a"))
    with backend.raw() as connection:  # a stray row at seq 3, past the head at 0
        connection.execute(
            "INSERT INTO kairo_execution_events VALUES (?, 3, 'stray', 't', 1, '{}', 'h', 'now')",
            (EID,),
        )
    before = store.get_execution(EID)
    with pytest.raises(LogVerificationError) as caught:
        store.append(EID, events("b", "c", "d"))
    assert caught.value.bad_seq == 1  # as verify would say: seq 1 is missing
    assert store.get_execution(EID) == before
    assert [e.event_id for e in store.read_events(EID)][1:] == ["stray"]


# What takes a store's write lock on one execution, in each backend's own words.
HOLD_THE_LOCK = {
    "sqlite": ["BEGIN IMMEDIATE"],
    "postgresql": ["BEGIN", "SELECT 1 FROM kairo_executions WHERE execution_id = ? FOR UPDATE"],
}


def waits_for_the_lock(backend: Backend, waiting: threading.Thread) -> None:
    """Until the append waits for the lock: PostgreSQL says when a session does; a SQLite
    writer waits in its busy handler, which nothing shows, so it gets a moment to start."""
    if backend.name != "postgresql":
        waiting.join(0.3)
        return
    deadline = time.monotonic() + 10
    with backend.raw() as connection:
        while time.monotonic() < deadline:
            query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            if connection.execute(query).fetchone()[0]:
                return
            time.sleep(0.01)
    raise AssertionError("the append never waited for the execution's lock")


def test_a_row_written_past_the_head_while_an_append_waits_is_refused(
    store: SqlStore, backend: Backend
) -> None:
    store.create_execution(EID, "p", "RUNNING", events("a"))
    before = store.get_execution(EID)
    outcome: list[object] = []

    def append() -> None:
        try:
            outcome.append(store.append(EID, events("b")))
        except Exception as error:  # what it raised is what is checked
            outcome.append(error)

    with backend.raw() as connection:
        for statement in HOLD_THE_LOCK[backend.name]:
            connection.execute(statement, (EID,) if "?" in statement else ())
        waiting = threading.Thread(target=append)
        waiting.start()
        waits_for_the_lock(backend, waiting)
        connection.execute(
            "INSERT INTO kairo_execution_events VALUES (?, 1, 'stray', 't', 1, '{}', 'h', 'now')",
            (EID,),
        )
        connection.execute("COMMIT")
    waiting.join()
    [error] = outcome
    assert isinstance(error, LogVerificationError), error
    assert error.bad_seq == 1 and error.exit_code == 3
    assert store.get_execution(EID) == before


def test_a_stale_version_is_refused(backend: Backend) -> None:
    mine, theirs = backend.open(), backend.open()
    mine.create_execution(EID, "p", "RUNNING", events("a"))
    theirs.append(EID, events("b"), expected_version=0, owner="theirs")
    with pytest.raises(ConcurrentUpdate) as caught:
        mine.append(EID, events("c"), expected_version=0, status="DONE")
    assert isinstance(caught.value, OwnershipError)
    assert caught.value.exit_code == 4
    assert (caught.value.expected, caught.value.found) == (0, 1)
    with pytest.raises(ConcurrentUpdate):
        mine.set_status(EID, "DONE", expected_version=0)
    row = mine.get_execution(EID)
    assert row is not None
    assert (row.head_seq, row.status, row.owner, row.version) == (1, "RUNNING", "theirs", 1)


def test_set_status_and_checkpoints(store: SqlStore) -> None:
    store.create_execution(EID, "p", "RUNNING", events("a"))
    row = store.set_status(EID, "PAUSED", owner="me", lease_expires_at="2026-12-03T00:00:00Z")
    assert (row.status, row.owner, row.lease_expires_at, row.version) == (
        "PAUSED",
        "me",
        "2026-12-03T00:00:00Z",
        1,
    )
    row = store.set_status(EID, "RUNNING", expected_version=1)
    assert (row.owner, row.version) == ("me", 2)
    assert store.set_status(EID, "DONE", owner=None).owner is None
    store.save_checkpoint(EID, '{"at_seq": 0}')
    row_after = store.get_execution(EID)
    assert row_after is not None
    assert row_after.checkpoint_json == '{"at_seq": 0}'
    assert row_after.version == 3  # a checkpoint is a cache, not an update to lock against
    with pytest.raises(ValueError):
        store.save_checkpoint(EID, "{not json")
    with pytest.raises(UnknownExecution):
        store.save_checkpoint("nope", "{}")


def test_unknown_and_duplicate_executions(store: SqlStore) -> None:
    assert store.get_execution(EID) is None
    for call in (
        lambda: store.append(EID, events("a")),
        lambda: store.set_status(EID, "X"),
        lambda: store.read_events(EID),
        lambda: store.verify(EID),
    ):
        with pytest.raises(UnknownExecution, match=f"no execution matches {EID}"):
            call()
    store.create_execution(EID, "p", "RUNNING", [])
    with pytest.raises(UsageError, match="already exists"):
        store.create_execution(EID, "p", "RUNNING", events("a"))
    # The refusal (PostgreSQL's comes as its pipelined write ends) leaves the store usable.
    store.append(EID, events("a"))
    assert store.verify(EID)[0] == 0


def test_a_payload_that_does_not_survive_json_is_refused(store: SqlStore) -> None:
    store.create_execution(EID, "p", "RUNNING", [])
    with pytest.raises(ValueError, match="does not survive JSON"):
        store.append(EID, [NewEvent("t", {"big": 1e20})])
    with pytest.raises(ValueError):
        store.append(EID, [NewEvent("t", {"nan": float("nan")})])
    assert store.read_events(EID) == []


def test_executions_are_listed_newest_first(store: SqlStore) -> None:
    for eid in ("01A", "01C", "01B"):
        store.create_execution(eid, "p", "RUNNING", [])
    assert [row.execution_id for row in store.list_executions()] == ["01B", "01C", "01A"]


def test_ids_resolve_from_a_prefix_or_a_short_id(store: SqlStore) -> None:
    ids = ["01JDQ8ZK7M4X2Y9V3T6R5W8NQE", "01JDQ8ZK7M4X2Y9V3T6R5ABCDE", "01JDR00000000000000ZZZZZZ9"]
    for eid in ids:
        store.create_execution(eid, "p", "RUNNING", [])
    assert store.resolve_id("01jdr") == ids[2]
    assert store.resolve_id(" 01JDQ8ZK7M4X2Y9V3T6R5W ") == ids[0]
    assert store.resolve_id("5w8nqe") == ids[0]
    assert store.resolve_id("ABCDE".lower().rjust(6, "5").upper()) == ids[1]
    assert store.resolve_id(ids[1].lower()) == ids[1]
    with pytest.raises(UsageError, match="no execution matches 01JX"):
        store.resolve_id("01JX")
    with pytest.raises(UsageError) as caught:
        store.resolve_id("01jdq8")
    assert caught.value.message == (
        f"01jdq8 matches 2 executions ({ids[1]}, {ids[0]}); give more characters"
    )
    with pytest.raises(UsageError):
        store.resolve_id("  ")


def test_the_events_table_is_append_only(store: SqlStore, backend: Backend) -> None:
    store.create_execution(EID, "p", "RUNNING", events("a", "b"))
    with backend.raw() as connection:
        for statement in (
            "UPDATE kairo_execution_events SET payload_json = '{}' WHERE seq = 1",
            "UPDATE kairo_execution_events SET seq = 5 WHERE seq = 1",
            "DELETE FROM kairo_execution_events WHERE seq = 1",
            "DELETE FROM kairo_execution_events",
        ):
            with pytest.raises(backend.integrity_error, match="append-only"):
                connection.execute(statement)
        if backend.name == "sqlite":
            connection.execute("PRAGMA foreign_keys = ON")
        with pytest.raises(backend.integrity_error):  # nor can its execution go
            connection.execute("DELETE FROM kairo_executions")
    assert store.verify(EID) == (1, store.read_events(EID)[1].event_hash)


def test_a_failed_verify_does_not_leave_the_store_reading_the_past(
    store: SqlStore, backend: Backend
) -> None:
    store.create_execution(EID, "p", "RUNNING", plain("a", "b", "c"))
    with backend.tampering() as connection:
        connection.execute("UPDATE kairo_execution_events SET payload_json = '{' WHERE seq = 0")
    kept: list[BaseException] = []
    try:
        store.verify(EID)
    except LogVerificationError as error:
        kept.append(error)  # its traceback keeps verify's frame, and its cursor, alive
    assert kept
    with backend.tampering() as connection:
        connection.execute("UPDATE kairo_execution_events SET payload_json = '{}' WHERE seq = 0")
        connection.execute("UPDATE kairo_execution_events SET event_type = 'x' WHERE seq = 2")
    with pytest.raises(LogVerificationError) as caught:
        store.verify(EID)
    assert caught.value.bad_seq == 2


def test_a_payload_that_is_not_json_is_named_by_read_events_too(
    store: SqlStore, backend: Backend
) -> None:
    """verify hashes stored text unparsed: a forger who rehashes text that is not JSON is
    caught where it is parsed, as a log that fails at that seq (exit 3), not a crash."""
    store.create_execution(EID, "p", "RUNNING", plain("a", "b", "c"))
    with backend.tampering() as connection:
        connection.execute("UPDATE kairo_execution_events SET payload_json = '{' WHERE seq = 1")
    with pytest.raises(LogVerificationError) as caught:
        store.read_events(EID)
    assert caught.value.bad_seq == 1
    assert "at seq 1: its payload is not JSON" in caught.value.message
    assert [e.seq for e in store.read_events(EID, after_seq=1)] == [2]


def test_threads_and_processes_append_without_losing_a_seq(
    backend: Backend,
) -> None:
    stores = [backend.open(), backend.open()]  # two connections, as two supervisors would
    stores[0].create_execution(EID, "p", "RUNNING", [])
    failures: list[BaseException] = []

    def work(store: SqlStore) -> None:
        try:
            for _ in range(15):
                store.append(EID, events("t", "u"))
        except BaseException as error:  # reported below, on the test's thread
            failures.append(error)
            raise

    threads = [threading.Thread(target=work, args=(stores[i % 2],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert [e.seq for e in stores[1].read_events(EID)] == list(range(120))
    assert stores[1].verify(EID)[0] == 119


# Tampering with the database itself, as SQL; each is named at seq :k unless EXPECTED says
# otherwise (the swap trades seq :k with the last seq).
_ROW = "execution_id = :eid AND seq"
TAMPER_SQL = {
    "payload": f"UPDATE kairo_execution_events SET payload_json = '{{\"n\":-1}}' WHERE {_ROW} = :k",
    "not_json": f"UPDATE kairo_execution_events SET payload_json = '{{' WHERE {_ROW} = :k",
    "type": f"UPDATE kairo_execution_events SET event_type = 'x' WHERE {_ROW} = :k",
    "time": f"UPDATE kairo_execution_events SET created_at = '2025' WHERE {_ROW} = :k",
    "schema": f"UPDATE kairo_execution_events SET schema_version = 2 WHERE {_ROW} = :k",
    "schema_text": f"UPDATE kairo_execution_events SET schema_version = 'one' WHERE {_ROW} = :k",
    "hash": f"UPDATE kairo_execution_events SET event_hash = 'x' || event_hash WHERE {_ROW} = :k",
    "delete": f"DELETE FROM kairo_execution_events WHERE {_ROW} = :k",
    "truncate": f"DELETE FROM kairo_execution_events WHERE {_ROW} >= :k",
    "swap": f"UPDATE kairo_execution_events SET seq = 999999 WHERE {_ROW} = :k;"
    f" UPDATE kairo_execution_events SET seq = :k WHERE {_ROW} = :n - 1;"
    f" UPDATE kairo_execution_events SET seq = :n - 1 WHERE {_ROW} = 999999",
    "head": "UPDATE kairo_executions SET head_hash = 'x' || head_hash WHERE execution_id = :eid",
    "unheaded_tail": "INSERT INTO kairo_execution_events SELECT execution_id, seq + 1,"
    " event_id || 'x', event_type, schema_version, payload_json, event_hash, created_at"
    f" FROM kairo_execution_events WHERE {_ROW} = :n - 1",
}
EXPECTED: dict[str, Callable[[int, int], int]] = {
    "head": lambda n, k: n - 1,
    "unheaded_tail": lambda n, k: n,
}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def shared(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Backend, SqlStore]]:
    """One database for every example of the tampering test, each its own execution."""
    if request.param == "sqlite":
        backend: Backend = SqliteBackend(tmp_path_factory.mktemp("tamper") / "kairo.db", Clock)
        yield backend, backend.open()
        backend.close()
        return
    with postgres.fresh_schema() as url:
        backend = PostgresBackend(url, Clock)
        yield backend, backend.open()
        backend.close()


@pytest.mark.parametrize("kind", TAMPER_SQL)
@settings(max_examples=15, deadline=None)
@given(
    payloads=st.lists(parsed_payloads.filter(lambda p: "n" not in p), min_size=1, max_size=6),
    data=st.data(),
)
def test_tampering_with_the_database_is_caught_at_its_first_bad_seq(
    shared: tuple[Backend, SqlStore],
    kind: str,
    payloads: list[dict[str, object]],
    data: st.DataObject,
) -> None:
    backend, shared_store = shared
    if kind == "schema_text" and backend.name == "postgresql":
        return  # its column is typed: PostgreSQL itself refuses a text there
    eid = uuid.uuid4().hex  # not drawn: a replayed example must not meet its own execution
    try:
        shared_store.create_execution(eid, "p", "RUNNING", [NewEvent("t", p) for p in payloads])
    except ValueError:
        return  # a float such as 1e20 that does not survive JSON: refused, tested above
    n = len(payloads)
    if kind == "swap" and n < 2:
        return
    k = data.draw(st.integers(0, n - 2 if kind == "swap" else n - 1))
    with backend.tampering() as connection:
        for statement in TAMPER_SQL[kind].split(";"):
            connection.execute(statement, {"eid": eid, "k": k, "n": n})
    with pytest.raises(LogVerificationError) as caught:
        shared_store.verify(eid)
    assert caught.value.bad_seq == (EXPECTED[kind](n, k) if kind in EXPECTED else k)


def test_executions_are_listed_by_repository_with_those_of_none_in_each(store: SqlStore) -> None:
    store.create_execution("01A", "p", "RUNNING", [], repository="box:/a/.git")
    store.create_execution("01B", "p", "RUNNING", [], repository="box:/b/.git")
    store.create_execution("01C", "p", "RUNNING", [])  # made before rows said whose

    assert [r.execution_id for r in store.list_executions(repository="box:/a/.git")] == [
        "01C",
        "01A",
    ]
    assert [r.execution_id for r in store.list_executions()] == ["01C", "01B", "01A"]
    row = store.get_execution("01B")
    assert row is not None and row.repository == "box:/b/.git"


def _rewrite_and_rehash(backend: Backend, seq: int) -> tuple[int, str]:
    """A past event changed and every hash from it on recomputed with kairo-orch's own
    code, head included, as an attacker with the store's password would: the chain holds.
    The head it leaves."""
    with backend.tampering() as connection:
        rows = connection.execute(
            "SELECT seq, event_type, schema_version, payload_json, created_at"
            " FROM kairo_execution_events WHERE execution_id = ? ORDER BY seq",
            (EID,),
        ).fetchall()
        previous = None
        for at, kind, version, text, created_at in rows:
            payload = json.loads(text) | ({"forged": True} if at == seq else {})
            value = envelope(
                execution_id=EID, seq=at, event_type=kind, schema_version=version,
                created_at=created_at, payload=payload,
            )  # fmt: skip
            previous = chain_hash(previous, value)
            connection.execute(
                "UPDATE kairo_execution_events SET payload_json = ?, event_hash = ?"
                " WHERE execution_id = ? AND seq = ?",
                (canonical_json(payload).decode(), previous, EID, at),
            )
        connection.execute(
            "UPDATE kairo_executions SET head_hash = ? WHERE execution_id = ?", (previous, EID)
        )
    assert previous is not None
    return len(rows) - 1, previous


def _head(store: SqlStore) -> tuple[int, str]:
    row = store.get_execution(EID)
    assert row is not None
    return row.head_seq, row.head_hash


def test_an_append_after_its_writers_last_event_was_rewritten_is_refused(
    store: SqlStore, backend: Backend
) -> None:
    store.create_execution(EID, "p", "RUNNING", plain("a", "b", "c"))
    written = _head(store)
    assert store.append(EID, plain("d"), written_head=written)  # its own head: appended
    written = _head(store)
    forged = _rewrite_and_rehash(backend, 1)
    assert store.verify(EID) == forged  # the chain alone holds

    with pytest.raises(LogRewritten) as caught:
        store.append(EID, plain("e"), expected_version=1, written_head=written)

    assert caught.value.bad_seq == 3
    assert caught.value.what == "the event at seq 3 is not the one it wrote"
    assert _head(store) == forged  # nothing appended on top
    assert store.append(EID, plain("e"), written_head=forged)  # a writer of the new head may


def test_a_head_changed_alone_and_events_forged_past_it_are_refused_too(
    store: SqlStore, backend: Backend
) -> None:
    store.create_execution(EID, "p", "RUNNING", plain("a", "b"))
    written = _head(store)
    with backend.tampering() as connection:
        connection.execute(
            "UPDATE kairo_executions SET head_hash = 'x' WHERE execution_id = ?", (EID,)
        )
    with pytest.raises(LogRewritten, match="its head at seq 1 is not the one it wrote"):
        store.append(EID, plain("c"), written_head=written)
    with backend.tampering() as connection:
        connection.execute(
            "UPDATE kairo_executions SET head_hash = ? WHERE execution_id = ?", (written[1], EID)
        )
    other = backend.open()
    other.append(EID, plain("c"))  # another writer, the version then put back
    with backend.tampering() as connection:
        connection.execute("UPDATE kairo_executions SET version = 0 WHERE execution_id = ?", (EID,))
    with pytest.raises(LogRewritten, match="seq 2 to 2 follow the last event it wrote") as caught:
        store.append(EID, plain("d"), expected_version=0, written_head=written)
    assert caught.value.bad_seq == 2


def test_a_takeover_is_not_taken_for_a_rewrite(store: SqlStore, backend: Backend) -> None:
    """Another supervisor that took the execution over appends after the last event this
    one wrote, and moves the version: that is `ConcurrentUpdate`, as it always was."""
    store.create_execution(EID, "p", "RUNNING", plain("a"))
    written = _head(store)
    backend.open().append(EID, plain("b"), expected_version=0)
    with pytest.raises(ConcurrentUpdate):
        store.append(EID, plain("c"), expected_version=0, written_head=written)


def test_event_hashes_are_those_stored(store: SqlStore) -> None:
    sealed = store.create_execution(EID, "p", "RUNNING", plain("a", "b", "c"))
    assert store.event_hashes(EID, 1, 5) == {e.seq: e.event_hash for e in sealed[1:]}
    assert store.event_hashes(EID, 4, 5) == {}
