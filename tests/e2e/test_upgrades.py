"""Logs across versions of kairo-orch: one written by a newer version, correctly chained,
is refused with exit 5 before anything is done, never misread."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.core import events as ev
from orchestrator.store.base import NewEvent
from orchestrator.store.sqlite import SqliteStore
from tests.e2e.conftest import Kairo
from tests.e2e.test_recovery import start_then_kill_9

pytestmark = pytest.mark.slow


def test_a_log_a_newer_kairo_orch_wrote_is_refused_not_misread(
    kairo: Kairo, tmp_path: Path
) -> None:
    start_then_kill_9(kairo, tmp_path / "runs", sleep=30)
    status = kairo.json("status")
    execution_id = status["execution_id"]
    newer = NewEvent(
        "supervisor_started",
        {"pid": 1, "host": "h", "resumed": True, "at": 0.0, "by": "a later version"},
        schema_version=ev.SCHEMA_VERSION + 1,
    )
    with SqliteStore(kairo.repo / ".git" / "kairo" / "kairo.db") as store:
        store.append(execution_id, [newer])  # sealed by the store: the chain holds
        row_before = store.get_execution(execution_id)

    assert kairo.run("verify").returncode == 0
    for command in (["status"], ["report"], ["resume", "--detach"], ["stop"]):
        refused = kairo.run(*command)
        assert refused.returncode == 5, (command, refused.stderr)
        assert "written by a newer kairo-orch" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
    with SqliteStore(kairo.repo / ".git" / "kairo" / "kairo.db") as store:
        assert store.get_execution(execution_id) == row_before  # nothing claimed or written
