"""The journal over a real SQLite store: checkpoints, ownership, fault injection."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from orchestrator.core import checkpoints
from orchestrator.core import events as ev
from orchestrator.core.commands import CreateIntegrationBranch
from orchestrator.core.decide import decide
from orchestrator.core.lifecycle import IllegalMove
from orchestrator.core.secrets import Redactor
from orchestrator.core.state import fold
from orchestrator.errors import EnvironmentProblem, OwnershipError
from orchestrator.runtime import journal as journal_module
from orchestrator.runtime.journal import Journal
from orchestrator.runtime.ownership import claim, owner_token
from orchestrator.runtime.state_reader import advance_state, read_state
from orchestrator.store.base import NewEvent
from orchestrator.store.sqlite import SqliteStore
from tests.core.test_decide import World, plan, run, start, subtask

Recorded = tuple[SqliteStore, str, list[ev.ExecutionEvent]]


async def drive(journal: Journal, world: World) -> None:
    """The execution decided by the core and answered by `world`, one command at a time,
    each outcome appended through the journal."""
    for _ in range(500):
        decision = decide(journal.state)
        if decision.events:
            await journal.append(decision.events)
        elif not decision.commands:
            return
        elif isinstance(decision.commands[0], CreateIntegrationBranch):
            created = journal.state.created
            branch = ev.IntegrationBranchCreated(
                branch=created.integration_branch, commit=created.base_commit
            )
            await journal.append([branch])
        else:
            await journal.append(world.answer(journal.state, decision.commands[0]))


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[Recorded]:
    """A whole execution (decided by the core, answered by a scripted world), stored."""
    final = run(start(plan(subtask("a"), subtask("b", "a"), subtask("c"))), World(conflicts=["c"]))
    with SqliteStore(tmp_path / "kairo.db") as store:
        created = final.created
        store.create_execution("E1", "p", "RUNNING", [NewEvent(*ev.to_record(created))])
        yield store, "E1", [created]


async def test_appends_keep_a_checkpoint_that_read_state_resumes_from(recorded: Recorded) -> None:
    store, execution_id, _ = recorded
    state = read_state(store, execution_id)
    before = state
    row = claim(store, execution_id, owner="host:1", status="RUNNING")
    journal = Journal(store, state, owner="host:1", version=row.version)
    await drive(journal, World(conflicts=["c"]))
    assert journal.state.ended == "FAILED"
    row = store.get_execution(execution_id)
    assert row is not None and row.checkpoint_json is not None
    restored = checkpoints.restore(row.checkpoint_json)
    assert restored is not None and restored[1] == journal.state.seq  # taken as it ended
    stored = store.read_events(execution_id)
    refolded = fold(execution_id, (ev.from_record(e.event_type, e.payload) for e in stored))
    assert read_state(store, execution_id) == refolded == journal.state
    # What a poll does: the state read before the run, moved on by the new events only.
    assert advance_state(store, before) == journal.state


async def test_checkpoints_are_as_far_apart_as_the_plan_is_large(tmp_path: Path) -> None:
    ids = [f"s{i}" for i in range(12)]
    created = start(plan(*(subtask(sid) for sid in ids), max_parallel=12)).created
    saved: list[int] = []

    class Counting(SqliteStore):
        def save_checkpoint(self, execution_id: str, checkpoint_json: str) -> None:
            restored = checkpoints.restore(checkpoint_json)
            assert restored is not None
            saved.append(restored[1])
            super().save_checkpoint(execution_id, checkpoint_json)

    with Counting(tmp_path / "kairo.db") as store:
        store.create_execution("E1", "p", "RUNNING", [NewEvent(*ev.to_record(created))])
        row = claim(store, "E1", owner="host:1", status="RUNNING")
        journal = Journal(store, read_state(store, "E1"), owner="host:1", version=row.version)
        await drive(journal, World())
    assert journal.state.ended == "COMPLETED"
    gaps = [later - earlier for earlier, later in zip([0, *saved], saved, strict=False)]
    assert saved[-1] == journal.state.seq  # the end
    assert all(gap >= len(ids) for gap in gaps[:-1]), saved
    assert len(saved) <= journal.state.seq // len(ids) + 1


def test_a_checkpoint_that_does_not_match_the_log_is_ignored(recorded: Recorded) -> None:
    store, execution_id, _ = recorded
    store.save_checkpoint(
        execution_id, '{"format": 1, "seq": 0, "event_hash": "nope", "state": {}}'
    )
    assert read_state(store, execution_id).seq == 0


def test_a_second_owner_is_refused_while_the_first_lives(recorded: Recorded) -> None:
    store, execution_id, _ = recorded
    # A live stand-in supervisor: a process of ours whose command line names kairo's code.
    with subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", "orchestrator"]
    ) as alive:
        try:
            claim(store, execution_id, owner=owner_token(alive.pid), status="RUNNING")
            with pytest.raises(OwnershipError, match="supervised by"):
                claim(store, execution_id, owner=owner_token(), status="RUNNING")
        finally:
            alive.kill()
    # Once it is gone, the execution can be claimed again.
    claim(store, execution_id, owner=owner_token(), status="RUNNING")


async def test_a_stale_version_loses_ownership(recorded: Recorded) -> None:
    store, execution_id, _ = recorded
    row = claim(store, execution_id, owner="host:1", status="RUNNING")
    journal = Journal(store, read_state(store, execution_id), owner="host:1", version=row.version)
    store.set_status(execution_id, "RUNNING", owner="elsewhere:2")  # someone took it over
    with pytest.raises(OwnershipError, match="taken over"):
        await journal.append([ev.SupervisorStarted(pid=1, host="host")])


async def lease_kept_until(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch, *, version: int
) -> Journal:
    """A journal of a new execution "E1" of `store`, owned by host:1, that kept its lease
    (beats 50 ms apart) until the row reached `version`; `keep_lease` raising fails it."""
    monkeypatch.setattr(journal_module, "HEARTBEAT_SECONDS", 0.05)
    monkeypatch.setattr(journal_module, "LEASE_RETRY_SECONDS", 0.05)
    created = run(start(plan(subtask("a"))), World()).created
    store.create_execution("E1", "p", "RUNNING", [NewEvent(*ev.to_record(created))])
    journal = Journal(store, read_state(store, "E1"), owner="host:1", version=0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(journal.keep_lease, "RUNNING")
        with trio.fail_after(10):
            while journal.version < version:  # noqa: ASYNC110 - a renewal signals nothing
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    return journal


class FlakyStore(SqliteStore):
    """A store whose first `failures` row updates fail as a server restarting would."""

    failures = 2

    def set_status(self, *args: Any, **kwargs: Any) -> Any:
        if self.failures:
            self.failures -= 1
            raise EnvironmentProblem("the store at test failed: the server is restarting")
        return super().set_status(*args, **kwargs)


async def test_a_lease_renewal_the_store_failed_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FlakyStore(tmp_path / "kairo.db") as store:
        await lease_kept_until(store, monkeypatch, version=1)
        row = store.get_execution("E1")
        assert store.failures == 0
        assert row is not None and (row.owner, row.version) == ("host:1", 1)


class LostAnswerStore(SqliteStore):
    """A store whose first row update commits, then fails as a connection cut before the
    answer would: the writer cannot know it was done."""

    lost = 1

    def set_status(self, *args: Any, **kwargs: Any) -> Any:
        row = super().set_status(*args, **kwargs)
        if self.lost:
            self.lost -= 1
            raise EnvironmentProblem("the store at test failed: the connection was cut")
        return row


async def test_a_renewal_committed_whose_answer_was_lost_is_not_taken_for_a_takeover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LostAnswerStore(tmp_path / "kairo.db") as store:
        journal = await lease_kept_until(store, monkeypatch, version=2)
        row = store.get_execution("E1")
        assert row is not None and (row.owner, row.version) == ("host:1", journal.version)
        store.set_status("E1", "RUNNING", owner="elsewhere:2")  # a real takeover still is one
        with pytest.raises(OwnershipError, match="taken over"):
            await journal.set_status("RUNNING")


async def test_an_event_that_would_make_an_illegal_move_is_refused_unwritten(
    recorded: Recorded,
) -> None:
    store, execution_id, _ = recorded
    row = claim(store, execution_id, owner="host:1", status="RUNNING")
    journal = Journal(store, read_state(store, execution_id), owner="host:1", version=row.version)
    await journal.append([ev.SubtaskScheduled(subtask_id="a", start_commit="c" * 40)])
    before = (journal.state, journal.version, store.get_execution(execution_id))
    # `a` scheduled a second time: a writer's bug, in a batch after a good event.
    batch = [
        ev.SubtaskScheduled(subtask_id="c", start_commit="c" * 40),
        ev.SubtaskScheduled(subtask_id="a", start_commit="c" * 40),
    ]
    with pytest.raises(IllegalMove, match="subtask_scheduled for a: it would take the subtask"):
        await journal.append(batch)
    assert (journal.state, journal.version, store.get_execution(execution_id)) == before
    assert [e.event_type for e in store.read_events(execution_id)][-1] == "subtask_scheduled"
    assert len(store.read_events(execution_id)) == 2


async def test_what_events_quote_is_logged_with_the_supervisor_s_secrets_cut_out(
    recorded: Recorded,
) -> None:
    store, execution_id, _ = recorded
    secret = "deploy-9f8e7d6c5b4a"
    row = claim(store, execution_id, owner="host:1", status="RUNNING")
    journal = Journal(
        store,
        read_state(store, execution_id),
        owner="host:1",
        version=row.version,
        redactor=Redactor.of({"DEPLOY_TOKEN": secret}),
    )

    # Each agent says the token in how its run ended (its usage file's `result`).
    await drive(journal, World(results={sid: (f"used {secret}", False) for sid in "abc"}))

    stored = json.dumps([e.payload for e in store.read_events(execution_id)])
    row = store.get_execution(execution_id)
    assert row is not None and row.checkpoint_json is not None
    assert secret not in stored and secret not in row.checkpoint_json
    assert "used [redacted: DEPLOY_TOKEN]" in stored
    assert journal.state.subtask("a").attempts[0].result == "used [redacted: DEPLOY_TOKEN]"
