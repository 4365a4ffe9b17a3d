"""The workers' rows of the PostgreSQL store: register, renew, lapse, come back, leave.

Leases are short here (a fraction of a second) and lapse by the database's own clock, so
these tests wait for real: a few hundred milliseconds in all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.store.migrations import newest_version
from orchestrator.store.postgres import PostgresStore
from orchestrator.store.sqlite import SqliteStore
from orchestrator.store.workers import Registration
from tests import postgres
from tests.store.tamper import raw

SHORT_LEASE_S = 0.3


@pytest.fixture
def store() -> Iterator[PostgresStore]:
    with postgres.fresh_schema() as url, PostgresStore(url) as opened:
        yield opened


def on(
    host: str, *, slots: int = 2, lease_s: float = 30.0, address: str | None = None
) -> Registration:
    return Registration(host=host, address=address, pid=4242, slots=slots, lease_seconds=lease_s)


def test_a_registered_worker_is_listed_alive_with_the_address_it_connects_from(
    store: PostgresStore,
) -> None:
    row = store.register_worker("w1", on("alpha", slots=3))
    assert (row.worker_id, row.host, row.slots, row.pid, row.lapses) == ("w1", "alpha", 3, 4242, 0)
    assert row.address == "127.0.0.1"  # tests.postgres connects over TCP to 127.0.0.1
    assert row.alive
    assert row.started_at == row.heartbeat_at < row.lease_expires_at
    assert [(w.worker_id, w.alive) for w in store.list_workers()] == [("w1", True)]


def test_an_address_given_is_kept(store: PostgresStore) -> None:
    assert store.register_worker("w1", on("alpha", address="10.0.0.7")).address == "10.0.0.7"


def test_workers_are_listed_by_host(store: PostgresStore) -> None:
    store.register_worker("w1", on("zulu"))
    store.register_worker("w2", on("alpha"))
    store.register_worker("w3", on("alpha"))
    assert [w.worker_id for w in store.list_workers()] == ["w2", "w3", "w1"]


def test_a_lease_not_renewed_lapses_and_a_renewal_counts_the_lapse(store: PostgresStore) -> None:
    first = store.register_worker("w1", on("alpha", lease_s=SHORT_LEASE_S))
    time.sleep(SHORT_LEASE_S + 0.1)
    (lapsed,) = store.list_workers()
    assert not lapsed.alive
    assert lapsed.heartbeat_age_s >= SHORT_LEASE_S
    back = store.renew_worker("w1", on("alpha", lease_s=SHORT_LEASE_S))
    assert back.alive and back.lapses == 1
    assert back.heartbeat_at > first.heartbeat_at
    assert back.started_at == first.started_at


def test_a_renewal_in_time_is_no_lapse(store: PostgresStore) -> None:
    store.register_worker("w1", on("alpha"))
    renewed = store.renew_worker("w1", on("alpha"))
    assert renewed.alive and renewed.lapses == 0


def test_a_new_worker_of_a_host_replaces_its_lapsed_ones_only(store: PostgresStore) -> None:
    store.register_worker("dead", on("alpha", lease_s=SHORT_LEASE_S))
    store.register_worker("other-host", on("beta", lease_s=SHORT_LEASE_S))
    store.register_worker("alive", on("alpha"))
    time.sleep(SHORT_LEASE_S + 0.1)
    store.register_worker("new", on("alpha"))
    listed = {w.worker_id: w.alive for w in store.list_workers()}
    assert listed == {"alive": True, "new": True, "other-host": False}


def test_a_worker_forgotten_while_away_registers_again(store: PostgresStore) -> None:
    store.register_worker("stalled", on("alpha", lease_s=SHORT_LEASE_S))
    time.sleep(SHORT_LEASE_S + 0.1)
    store.register_worker("successor", on("alpha"))  # forgets "stalled"
    back = store.renew_worker("stalled", on("alpha", lease_s=SHORT_LEASE_S))
    assert back.alive and back.lapses == 1
    assert {w.worker_id for w in store.list_workers()} == {"stalled", "successor"}


def test_a_deregistered_worker_is_gone(store: PostgresStore) -> None:
    store.register_worker("w1", on("alpha"))
    store.register_worker("w2", on("beta"))
    store.deregister_worker("w1")
    store.deregister_worker("w1")  # twice: nothing more
    assert [w.worker_id for w in store.list_workers()] == ["w2"]


def test_sqlite_has_the_table_yet_no_way_to_fill_it(tmp_path: Path) -> None:
    """One schema on both backends; only the PostgreSQL store registers workers."""
    with SqliteStore(tmp_path / "k.db") as store:
        assert not hasattr(store, "register_worker")
    with raw(tmp_path / "k.db") as connection:
        assert connection.execute("SELECT COUNT(*) FROM kairo_workers").fetchone() == (0,)
        (version,) = connection.execute("SELECT MAX(version) FROM kairo_schema_version").fetchone()
    assert version == newest_version()
