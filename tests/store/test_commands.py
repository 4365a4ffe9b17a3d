"""Commands of placed subtasks in the PostgreSQL store (`kairo_commands`): queued by an
owner, taken once by their worker (never while its lease has lapsed), finished with
their events, read back; a NOTIFY wakes a worker waiting for one."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from orchestrator.core import events as ev
from orchestrator.store.postgres import PostgresStore
from orchestrator.store.workers import Registration
from tests import postgres

PREPARE = {"type": "PrepareWorkspace", "subtask_id": "a", "attempt": 0, "start_commit": "c0"}


@pytest.fixture
def store() -> Iterator[PostgresStore]:
    with postgres.fresh_schema() as url, PostgresStore(url) as opened:
        yield opened


def _worker(store: PostgresStore, worker_id: str, *, lease_s: float = 30.0) -> None:
    registration = Registration(
        host=worker_id, address=None, pid=1, slots=2, lease_seconds=lease_s, remote="git://r"
    )
    store.register_worker(worker_id, registration)


def test_a_queued_command_is_taken_once_and_its_events_read_back(store: PostgresStore) -> None:
    _worker(store, "w1")
    _worker(store, "w2")
    first = store.queue_command("x1", "a", "w1", 1, PREPARE)
    second = store.queue_command("x1", "b", "w1", 2, {**PREPARE, "subtask_id": "b"})
    assert store.take_commands("w2") == []  # not its own
    taken = store.take_commands("w1")
    assert [(q.command_id, q.subtask_id, q.epoch) for q in taken] == [
        (first, "a", 1),
        (second, "b", 2),
    ]
    assert taken[0].command == PREPARE
    assert store.take_commands("w1") == []  # taken already
    outcome = store.command_outcome(first)
    assert outcome is not None and outcome.state == "taken" and outcome.results == []

    created = ev.WorkspaceCreated(subtask_id="a", path="/w/a", branch="b/a", commit="c0")
    store.finish_command(first, results=[ev.to_record(created)], error=None)
    store.finish_command(second, results=[], error="setup failed")
    done = store.command_outcome(first)
    assert done is not None and done.state == "done" and done.error is None
    assert [ev.from_record(kind, payload) for kind, payload in done.results] == [created]
    failed = store.command_outcome(second)
    assert failed is not None and (failed.state, failed.error) == ("failed", "setup failed")
    assert store.command_outcome(9999) is None


def test_a_worker_whose_lease_lapsed_takes_nothing_until_it_renews(store: PostgresStore) -> None:
    _worker(store, "w1", lease_s=0.3)
    store.queue_command("x1", "a", "w1", 1, PREPARE)
    time.sleep(0.5)
    assert store.take_commands("w1") == []
    registration = Registration(
        host="w1", address=None, pid=1, slots=2, lease_seconds=30.0, remote="git://r"
    )
    store.renew_worker("w1", registration)
    assert [q.subtask_id for q in store.take_commands("w1")] == ["a"]


def test_a_queued_command_wakes_its_waiting_worker(store: PostgresStore) -> None:
    _worker(store, "w1")
    store.wait_for_commands("w1", 0.01)  # listening from now on
    woken = threading.Event()

    def wait() -> None:
        store.wait_for_commands("w1", 10.0)
        woken.set()

    waiter = threading.Thread(target=wait)
    started = time.monotonic()
    waiter.start()
    store.queue_command("x1", "a", "w2", 1, PREPARE)  # another's: no wake-up
    assert not woken.wait(0.3)
    store.queue_command("x1", "a", "w1", 1, PREPARE)
    waiter.join(timeout=10)
    assert woken.is_set() and time.monotonic() - started < 5


def test_a_worker_runs_the_agents_whose_awaits_it_has_taken_and_not_finished(
    store: PostgresStore,
) -> None:
    _worker(store, "w1")
    _worker(store, "w2")

    def running() -> dict[str, int]:
        return {w.worker_id: w.running for w in store.list_workers()}

    assert running() == {"w1": 0, "w2": 0}
    store.queue_command("x1", "a", "w1", 1, PREPARE)  # not an agent
    awaits = [
        store.queue_command("x1", sid, "w1", 1, {"type": "AwaitAttempt", "subtask_id": sid})
        for sid in ("a", "b")
    ]
    assert running() == {"w1": 0, "w2": 0}  # queued, not yet taken
    store.take_commands("w1")
    assert running() == {"w1": 2, "w2": 0}
    # An owner that took over awaits b anew while the first await is still taken: one agent.
    again = store.queue_command("x1", "b", "w1", 1, {"type": "AwaitAttempt", "subtask_id": "b"})
    store.take_commands("w1")
    assert running() == {"w1": 2, "w2": 0}
    store.finish_command(awaits[0], results=[], error=None)  # a's agent ended
    assert running() == {"w1": 1, "w2": 0}
    store.finish_command(awaits[1], results=[], error=None)
    store.finish_command(again, results=[], error="gone")
    assert running() == {"w1": 0, "w2": 0}
