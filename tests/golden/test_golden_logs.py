"""Logs written by earlier versions verify, fold and report as they did (logs.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.core import events as ev
from orchestrator.core.state import ExecutionState
from orchestrator.core.timeline import Gap, LoggedEvent, build_timeline
from orchestrator.runtime.state_reader import read_logged, read_state
from orchestrator.store.sqlite import SqliteStore
from tests.golden import logs


def test_there_are_golden_logs_of_every_kind() -> None:
    assert logs.golden_names() == [
        "completed",
        "conflicts_and_retries",
        "guard_breached",
        "merge_queue",
        "paused",
        "paused_integrating",
        "reasons_v2",
        "resumed",
        "resumed_v7",
        "stopped",
    ]


@pytest.mark.parametrize("name", logs.golden_names())
def test_a_golden_log_verifies_and_folds_as_it_did(name: str, tmp_path: Path) -> None:
    folder = logs.HERE / name
    database = tmp_path / "kairo.db"
    SqliteStore(database).close()  # the schema of today's code
    row = logs.load(folder, database)

    with SqliteStore(database) as store:
        assert store.verify(row.execution_id) == (row.head_seq, row.head_hash)
        state = read_state(store, row.execution_id)

    document, report = logs.folded(state, row)
    assert document == json.loads((folder / "status.json").read_text(encoding="utf-8"))
    assert report == (folder / "report.md").read_text(encoding="utf-8")


def test_a_resume_of_schema_version_6_has_its_band_from_the_last_event_before(
    tmp_path: Path,
) -> None:
    """Its supervisor_started does not say when the one before was last alive: the band
    without a supervisor starts at the last event before, as it did when it was written."""
    state, logged = _read("resumed", tmp_path)
    (resumed,) = [i for i, item in enumerate(logged) if is_resume(item.event)]
    gap = Gap(logged[resumed - 1].at, logged[resumed].at)
    assert build_timeline(state.plan, logged).gaps == (gap,)


def test_a_resume_of_schema_version_7_has_its_band_from_the_last_heartbeat_before(
    tmp_path: Path,
) -> None:
    state, logged = _read("resumed_v7", tmp_path)
    (resumed,) = [i for i, item in enumerate(logged) if is_resume(item.event)]
    started = logged[resumed].event
    assert isinstance(started, ev.SupervisorStarted)
    heartbeat = started.previous_heartbeat_at
    assert heartbeat is not None and heartbeat > logged[resumed - 1].at + 1.0
    assert build_timeline(state.plan, logged).gaps == (Gap(heartbeat, logged[resumed].at),)


def _read(name: str, tmp_path: Path) -> tuple[ExecutionState, list[LoggedEvent]]:
    database = tmp_path / f"{name}.db"
    SqliteStore(database).close()
    row = logs.load(logs.HERE / name, database)
    with SqliteStore(database) as store:
        state, logged = read_logged(store, row.execution_id)
    return state, list(logged)


def is_resume(event: ev.ExecutionEvent) -> bool:
    return isinstance(event, ev.SupervisorStarted) and event.resumed
