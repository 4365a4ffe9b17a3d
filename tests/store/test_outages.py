"""A store failing under a supervisor: an append whose answer was lost, a server away for
a while, a store deleted. Real servers and files; the network is cut by a real proxy."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import trio

from orchestrator.core import events as ev
from orchestrator.errors import EnvironmentProblem, OwnershipError, StoreLost
from orchestrator.runtime import journal as journal_module
from orchestrator.runtime.journal import Journal
from orchestrator.runtime.ownership import claim
from orchestrator.runtime.state_reader import read_state
from orchestrator.store.base import (
    AppendUnanswered,
    ConcurrentUpdate,
    ExecutionRow,
    NewEvent,
    StoredEvent,
    append_landed,
)
from orchestrator.store.postgres import PostgresStore
from orchestrator.store.sql_store import SqlStore
from orchestrator.store.sqlite import SqliteStore
from tests import postgres
from tests.core.test_decide import World, plan, run, start, subtask
from tests.faults.cutting_proxy import CuttingProxy

ROW = ExecutionRow("E1", "p", "RUNNING", 7, "h:1", None, 4, "h4", None, "t", "t")
ATTEMPTED = [StoredEvent("E1", 5, "id5", "x", 1, {}, "h5", "t")]


def unanswered(attempted: list[StoredEvent]) -> AppendUnanswered:
    return AppendUnanswered(EnvironmentProblem("the store failed"), attempted)


def test_an_append_that_left_the_version_as_it_was_did_not_land() -> None:
    assert append_landed(ROW, expected_version=7, unanswered=unanswered(ATTEMPTED)) is False
    assert append_landed(ROW, expected_version=7, unanswered=unanswered([])) is False


def test_an_append_whose_last_event_is_the_head_landed() -> None:
    landed = replace(ROW, version=8, head_seq=5, head_hash="h5")
    assert append_landed(landed, expected_version=7, unanswered=unanswered(ATTEMPTED)) is True


@pytest.mark.parametrize(
    "found",
    [
        replace(ROW, version=8, head_seq=5, head_hash="another writer's"),
        replace(ROW, version=9, head_seq=5, head_hash="h5"),  # ours, and someone's after it
        replace(ROW, version=8),  # a lease taken over, no event
    ],
)
def test_anything_else_is_another_writer(found: ExecutionRow) -> None:
    with pytest.raises(ConcurrentUpdate):
        append_landed(found, expected_version=7, unanswered=unanswered(ATTEMPTED))
    with pytest.raises(ConcurrentUpdate):
        append_landed(found, expected_version=7, unanswered=unanswered([]))


def new_journal(store: SqlStore) -> Journal:
    created = run(start(plan(subtask("a"))), World()).created
    store.create_execution("E1", "p", "RUNNING", [NewEvent(*ev.to_record(created))])
    row = claim(store, "E1", owner="host:1", status="RUNNING")
    return Journal(store, read_state(store, "E1"), owner="host:1", version=row.version)


def beat(n: int) -> ev.SupervisorStarted:
    return ev.SupervisorStarted(pid=n, host="host", resumed=False, at=float(n))


@pytest.fixture
def schema() -> Iterator[str]:
    with postgres.fresh_schema() as url:
        yield url


@pytest.fixture
def through_proxy(schema: str) -> Iterator[tuple[CuttingProxy, str]]:
    """`schema`, reached through a proxy that cuts on demand."""
    parts = urlsplit(schema)
    proxy = CuttingProxy(parts.port or 5432, parts.hostname or "127.0.0.1")
    try:
        yield proxy, urlunsplit(parts._replace(netloc=f"postgres@127.0.0.1:{proxy.port}"))
    finally:
        proxy.close()


@pytest.mark.parametrize("deliver", [True, False], ids=["answer_lost", "commit_lost"])
async def test_an_append_cut_at_its_commit_is_in_the_log_once(
    through_proxy: tuple[CuttingProxy, str], deliver: bool
) -> None:
    proxy, url = through_proxy
    with PostgresStore(url) as store:
        journal = new_journal(store)
        proxy.cut(b"COMMIT", deliver=deliver)
        with trio.fail_after(20):
            await journal.append([beat(1)])
            await journal.append([beat(2)])  # the version it goes on from is the row's

        assert proxy.cuts == 1
        pids = [e.payload.get("pid") for e in store.read_events("E1")]
        assert pids == [None, 1, 2]
        assert store.verify("E1")[0] == 2
        assert journal.version == store.get_execution("E1").version  # type: ignore[union-attr]
        assert journal.state.seq == 2


async def test_a_store_away_longer_than_the_lease_stops_the_supervisor_saying_so(
    through_proxy: tuple[CuttingProxy, str],
) -> None:
    proxy, url = through_proxy
    with PostgresStore(url) as store:
        journal = new_journal(store)
        journal.lease_ends = time.monotonic() + 1.0
        proxy.cut(b"COMMIT", deliver=False)
        proxy.close()  # and nothing answers any more
        started = time.monotonic()
        with pytest.raises(EnvironmentProblem, match="lease ran out") as stopped:
            await journal.append([beat(1)])
        assert time.monotonic() - started < 2.0
        assert "kairo-orch resume E1" in stopped.value.message


async def test_a_takeover_during_the_outage_stops_the_journal(
    through_proxy: tuple[CuttingProxy, str], schema: str
) -> None:
    proxy, url = through_proxy
    with PostgresStore(url) as store, PostgresStore(schema) as elsewhere:
        journal = new_journal(store)
        proxy.cut(b"COMMIT", deliver=False)

        async def take_over_once_cut() -> None:
            while not proxy.cuts:  # noqa: ASYNC110 - the proxy signals nothing
                await trio.sleep(0.01)
            await trio.to_thread.run_sync(
                lambda: elsewhere.set_status("E1", "RUNNING", owner="elsewhere:2")
            )

        taken_over = pytest.RaisesExc(OwnershipError, match="taken over")
        with pytest.RaisesGroup(taken_over), trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(take_over_once_cut)
                await journal.append([beat(1)])
        assert len(store.read_events("E1")) == 1


async def test_a_sqlite_store_deleted_or_replaced_is_noticed_at_the_next_append(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kairo.db"
    with SqliteStore(path) as store:
        journal = new_journal(store)
        await journal.append([beat(1)])
        for suffix in ("-wal", "-shm", ""):
            Path(f"{path}{suffix}").unlink(missing_ok=True)  # noqa: ASYNC240 - a test's own file
        with pytest.raises(StoreLost, match="was deleted while in use"):
            await journal.append([beat(2)])
        path.write_bytes(b"")
        with pytest.raises(StoreLost, match="replaced by another file"):
            await journal.append([beat(2)])


async def test_a_store_deleted_while_agents_run_is_noticed_by_the_next_lease_renewal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "HEARTBEAT_SECONDS", 0.05)
    path = tmp_path / "kairo.db"
    with SqliteStore(path) as store:
        journal = new_journal(store)
        path.unlink()
        lost = pytest.RaisesExc(StoreLost, match="the log of execution E1 is gone with it")
        with pytest.RaisesGroup(lost), trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(journal.keep_lease, "RUNNING")


async def test_a_postgresql_store_whose_tables_were_dropped_is_lost() -> None:
    with postgres.fresh_schema() as url, PostgresStore(url) as store:
        journal = new_journal(store)
        with postgres.connect(url) as admin:
            admin.execute("DROP TABLE kairo_execution_events, kairo_executions CASCADE")
        with pytest.raises(StoreLost, match="lost its tables"):
            await journal.append([beat(1)])
