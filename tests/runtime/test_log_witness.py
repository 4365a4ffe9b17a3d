"""What a supervisor wrote, kept beside the log (runtime/log_witness.py), and the journal
that stops at its next write when the log is no longer what it wrote (reproduction 35.4)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.core import events as ev
from orchestrator.core.canonical import canonical_json, chain_hash, envelope
from orchestrator.errors import LogRewritten
from orchestrator.runtime.journal import Journal
from orchestrator.runtime.log_witness import LINE, LogWitness, rewritten
from orchestrator.runtime.ownership import claim
from orchestrator.runtime.state_reader import read_state
from orchestrator.store.base import NewEvent
from orchestrator.store.sqlite import SqliteStore
from tests.core.test_decide import World, plan, run, start, subtask
from tests.store.tamper import tampering

EID = "E1"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(tmp_path / "kairo.db") as opened:
        yield opened


@pytest.fixture
def witness(tmp_path: Path) -> Iterator[LogWitness]:
    taken = LogWitness(tmp_path / "runs" / EID / "log-hashes")
    yield taken
    taken.close()


def created_event() -> ev.ExecutionCreated:
    return run(start(plan(subtask("a"), subtask("b"))), World()).created


def stored_hashes(store: SqliteStore) -> list[str]:
    return [event.event_hash for event in store.read_events(EID)]


def rewrite(path: Path, seq: int) -> None:
    """The attack: a past event changed, and every hash from it on computed anew."""
    with tampering(path) as connection:
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
        connection.execute("UPDATE kairo_executions SET head_hash = ?", (previous,))


def test_taken_up_it_holds_the_hash_of_every_event_one_line_a_seq(
    store: SqliteStore, witness: LogWitness
) -> None:
    store.create_execution(EID, "p", "RUNNING", [NewEvent("a", {}), NewEvent("b", {})])
    witness.take_up(store, EID)
    assert witness.last() == (1, stored_hashes(store)[1])
    witness.add(store.append(EID, [NewEvent("c", {})]))
    assert witness.hashes() == stored_hashes(store)
    assert witness.path.stat().st_size == 3 * LINE
    assert witness.last() == (2, stored_hashes(store)[2])
    assert rewritten(store, EID, witness) is None


def test_the_log_may_go_on_past_it_and_a_torn_line_is_cut_off(
    store: SqliteStore, witness: LogWitness
) -> None:
    """A supervisor killed between an append and its line, or killed writing the line."""
    store.create_execution(EID, "p", "RUNNING", [NewEvent("a", {})])
    witness.take_up(store, EID)
    store.append(EID, [NewEvent("b", {}), NewEvent("c", {})])  # no line for these
    witness.close()
    with witness.path.open("ab") as file:
        file.write(stored_hashes(store)[1][:20].encode())
    assert rewritten(store, EID, witness) is None
    again = LogWitness(witness.path)
    again.take_up(store, EID)
    assert again.hashes() == stored_hashes(store)
    again.close()


def test_a_rewritten_log_is_named_at_its_first_changed_seq_though_its_chain_holds(
    store: SqliteStore, witness: LogWitness, tmp_path: Path
) -> None:
    store.create_execution(EID, "p", "RUNNING", [NewEvent(str(n), {}) for n in range(5)])
    witness.take_up(store, EID)
    rewrite(tmp_path / "kairo.db", 2)
    store.verify(EID)  # the chain alone holds

    found = rewritten(store, EID, witness)

    assert found is not None and found.bad_seq == 2
    assert found.what == "the event at seq 2 is not the one it wrote"
    with pytest.raises(LogRewritten, match="seq 2"):
        LogWitness(witness.path).take_up(store, EID)  # and no supervisor takes it up


def test_events_cut_off_the_end_are_named_too(
    store: SqliteStore, witness: LogWitness, tmp_path: Path
) -> None:
    store.create_execution(EID, "p", "RUNNING", [NewEvent(str(n), {}) for n in range(4)])
    witness.take_up(store, EID)
    with tampering(tmp_path / "kairo.db") as connection:
        connection.execute("DELETE FROM kairo_execution_events WHERE seq > 1")
        head = stored_hashes(store)[1]
        connection.execute("UPDATE kairo_executions SET head_seq = 1, head_hash = ?", (head,))
    store.verify(EID)

    found = rewritten(store, EID, witness)

    assert found is not None and found.bad_seq == 2
    assert found.what == "the log ends at seq 1, but its supervisor wrote up to seq 3"


async def test_the_journal_stops_at_its_next_write_naming_the_first_changed_seq(
    store: SqliteStore, witness: LogWitness, tmp_path: Path
) -> None:
    store.create_execution(EID, "p", "RUNNING", [NewEvent(*ev.to_record(created_event()))])
    witness.take_up(store, EID)
    row = claim(store, EID, owner="host:1", status="RUNNING")
    journal = Journal(
        store,
        read_state(store, EID),
        owner="host:1",
        version=row.version,
        written_head=(row.head_seq, row.head_hash),
        witness=witness,
    )
    await journal.append([ev.SupervisorStarted(pid=1, host="h")])
    await journal.append([ev.SubtaskScheduled(subtask_id="a", start_commit="c" * 40)])
    rewrite(tmp_path / "kairo.db", 1)
    forged = store.get_execution(EID)

    with pytest.raises(LogRewritten) as caught:
        await journal.append([ev.SubtaskScheduled(subtask_id="b", start_commit="c" * 40)])

    assert caught.value.bad_seq == 1
    assert "was changed while its supervisor ran: the event at seq 1 is not the one it wrote" in (
        caught.value.message
    )
    assert store.get_execution(EID) == forged  # nothing written on top
    assert rewritten(store, EID, witness) is not None  # and `status` says so after it


def test_a_file_that_cannot_be_written_is_said_and_the_log_goes_on_without_it(
    store: SqliteStore, tmp_path: Path
) -> None:
    store.create_execution(EID, "p", "RUNNING", [NewEvent("a", {})])
    (tmp_path / "runs").write_text("not a folder")
    witness = LogWitness(tmp_path / "runs" / EID / "log-hashes")
    with pytest.raises(OSError):
        witness.take_up(store, EID)
    witness.add(store.append(EID, [NewEvent("b", {})]))  # nothing: it was given up
    assert rewritten(store, EID, witness) is None
