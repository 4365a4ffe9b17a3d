"""What a user does by hand around an execution, found by trying it as a newcomer: a
worktree deleted while it was paused, another store selected, Ctrl-C on `--wait`."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo
from tests.e2e.test_recovery import running_agents, start_then_kill_9, wait_for

pytestmark = pytest.mark.slow


def test_a_worktree_deleted_while_paused_is_made_again_by_resume_and_clean_goes_through(
    kairo: Kairo, tmp_path: Path
) -> None:
    start_then_kill_9(kairo, tmp_path / "runs", sleep=30)
    kairo.tmux("kill-server")  # and its agents with it, as a reboot would
    left = next(s for s in kairo.json("status")["subtasks"] if s["id"] == "left")
    shutil.rmtree(left["worktree"])

    resumed = kairo.run("resume", "--rerun-interrupted", "--wait")

    assert resumed.returncode == 0, resumed.stderr
    assert all(s["state"] == "merged" for s in kairo.json("status")["subtasks"])
    cleaned = kairo.run("clean")
    assert cleaned.returncode == 0, cleaned.stderr


def test_clean_with_another_store_leaves_a_paused_execution_and_its_agents_alone(
    kairo: Kairo, tmp_path: Path
) -> None:
    start_then_kill_9(kairo, tmp_path / "runs", sleep=30)
    status = kairo.json("status")
    short = status["execution_id"][-6:].lower()
    other = Kairo(
        repo=kairo.repo,
        env=dict(kairo.env, KAIRO_STORE=f"sqlite:///{tmp_path / 'other.db'}"),
        socket=kairo.socket,
    )

    listed = other.run("list")
    refused = other.run("clean", short)

    assert f"execution {short}" not in listed.stdout
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "runs with another store than this one" in refused.stderr
    assert kairo.tmux("has-session", "-t", f"={status['tmux_session']}").returncode == 0
    assert running_agents(kairo) == 2


def test_ctrl_c_on_start_wait_stops_the_waiting_not_the_execution(
    kairo: Kairo, tmp_path: Path
) -> None:
    plan = kairo.write_plan(
        "version: 1\nname: long\nagent: {kind: shell, run: 'sleep 30; echo x > x.txt'}\n"
        "subtasks:\n  - id: a\n"
    )
    waiting = kairo.spawn("start", str(plan), "--wait")
    wait_for(lambda: kairo.run("status").returncode == 0 and running_agents(kairo) == 1)
    waiting.send_signal(signal.SIGINT)
    _, err = waiting.communicate(timeout=30)

    assert waiting.returncode == 130, err
    assert "stopped waiting; execution" in err and "`kairo-orch stop" in err
    assert kairo.json("status")["status"] == "RUNNING"
