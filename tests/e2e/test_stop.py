"""Stopping a running execution, and the integration check that undoes a broken merge."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git, run_to_its_end, shared_with_agents
from tests.e2e.test_limits import processes_with
from tests.e2e.test_recovery import running_agents, wait_for

pytestmark = pytest.mark.slow


def queue_plan(kairo: Kairo, first_agent: str, *shared: Path) -> Path:
    """One agent at a time: `first` runs while `second` and `third` wait their turn; the
    agents may reach the test's `shared` files."""
    return kairo.write_plan(
        f"version: 1\nname: queue\nmax_parallel: 1\n{shared_with_agents(*shared) if shared else ''}"
        "agent: {kind: shell, run: 'echo $KAIRO_SUBTASK_ID > $KAIRO_SUBTASK_ID.txt'}\n"
        f"subtasks:\n  - id: first\n    agent: {{run: '{first_agent}'}}\n"
        "  - id: second\n  - id: third\n"
    )


def states(kairo: Kairo) -> dict[str, str]:
    return {s["id"]: s["state"] for s in kairo.json("status")["subtasks"]}


def test_stop_lets_the_running_attempt_finish_and_starts_nothing_more(
    kairo: Kairo, tmp_path: Path
) -> None:
    # The agent finishes when the test says so, not after a sleep a loaded machine outruns.
    release = tmp_path / "gate" / "release"
    release.parent.mkdir()
    plan = queue_plan(
        kairo,
        f"while [ ! -e {release} ]; do sleep 0.05; done; echo first > first.txt",
        release.parent,
    )
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    wait_for(lambda: running_agents(kairo) == 1)

    asked = kairo.run("stop")

    assert asked.returncode == 0, asked.stderr
    assert "1 running attempt(s) finish" in asked.stderr
    assert kairo.json("status")["stopping"] == "graceful"
    assert "stopping: running attempts finish, nothing new starts" in kairo.run("status").stdout
    assert states(kairo)["first"] == "running"  # stop returned without waiting for it
    release.touch()
    done = kairo.run("stop", "--wait")  # asking again changes nothing, and waits
    assert done.returncode == 0, done.stderr
    status = kairo.json("status")
    assert status["status"] == "STOPPED"
    assert states(kairo) == {"first": "merged", "second": "stopped", "third": "stopped"}
    assert git(kairo.repo, "show", f"{status['integration_branch']}:first.txt") == "first\n"
    assert running_agents(kairo) == 1  # second and third never started
    report = kairo.run("report").stdout
    assert "## Stopped" in report and "stopped before this subtask started" in report
    again = kairo.run("stop")
    assert again.returncode == 0
    assert (
        f"already ended STOPPED; `kairo-orch report {status['execution_id'][-6:].lower()}`"
        in again.stderr
    )


def test_stop_now_kills_the_agents_and_keeps_their_partial_work(kairo: Kairo) -> None:
    marker = f"kairo-stop-now-{time.monotonic_ns()}"
    plan = queue_plan(kairo, f"echo partial > first.txt; sleep 60 # {marker}")
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    wait_for(lambda: running_agents(kairo) == 1 and bool(processes_with(marker)))
    began = time.monotonic()

    done = kairo.run("stop", "--now", "--wait")

    assert done.returncode == 0, done.stderr
    assert time.monotonic() - began < 10
    assert processes_with(marker) == []
    first = kairo.json("status")["subtasks"][0]
    assert first["state"] == "stopped"
    assert first["reason"].startswith("stopped: kairo-orch stop --now")
    ref = first["reason"].rpartition("its partial work is on ")[2]
    assert git(kairo.repo, "show", f"{ref}:first.txt") == "partial\n"
    assert kairo.json("status")["status"] == "STOPPED"


def test_sigterm_to_the_supervisor_is_a_graceful_stop(kairo: Kairo) -> None:
    plan = queue_plan(kairo, "sleep 2; echo first > first.txt")
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    wait_for(lambda: running_agents(kairo) == 1)

    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGTERM)

    wait_for(lambda: kairo.json("status")["status"] == "STOPPED")
    assert states(kairo) == {"first": "merged", "second": "stopped", "third": "stopped"}


def test_stop_of_a_paused_execution_settles_its_running_agent_then_stops(
    kairo: Kairo,
) -> None:
    plan = queue_plan(kairo, "sleep 3; echo first > first.txt")
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    wait_for(lambda: running_agents(kairo) == 1)
    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGKILL)
    wait_for(lambda: kairo.json("status")["status"] == "PAUSED")
    short = kairo.json("status")["execution_id"][-6:].lower()
    assert f"PAUSED  interrupted: kairo-orch resume {short} goes on" in kairo.run("status").stdout

    done = kairo.run("stop", "--wait")

    assert done.returncode == 0, done.stderr
    assert kairo.json("status")["status"] == "STOPPED"
    assert states(kairo) == {"first": "merged", "second": "stopped", "third": "stopped"}


def test_stop_now_of_a_paused_execution_counts_the_agents_it_kills(kairo: Kairo) -> None:
    plan = kairo.write_plan(
        "version: 1\nname: pair\nagent: {kind: shell, run: 'sleep 60'}\n"
        "subtasks:\n  - id: one\n  - id: two\n"
    )
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    wait_for(lambda: running_agents(kairo) == 2)
    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGKILL)
    wait_for(lambda: kairo.json("status")["status"] == "PAUSED")

    done = kairo.run("stop", "--now", "--wait")

    assert done.returncode == 0, done.stderr
    # Counted as the request found them, not as the killing had got on by the time it was told.
    assert "2 running agent(s)" in done.stderr
    assert set(states(kairo).values()) == {"stopped"}


def test_a_merge_that_breaks_the_integration_check_is_undone_and_reported(
    kairo: Kairo, repo: Path
) -> None:
    plan = kairo.write_plan(
        """\
version: 1
name: checked
integration_verify: "test ! -f broken.txt || { echo 'broken.txt breaks the build'; exit 1; }"
agent: {kind: shell, run: 'echo $KAIRO_SUBTASK_ID > $KAIRO_SUBTASK_ID.txt'}
subtasks:
  - id: good
  - id: bad
    agent: {run: 'echo oops > broken.txt'}
  - id: later
"""
    )
    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 1, done.stderr
    status = kairo.json("status")
    subtasks = {s["id"]: s for s in status["subtasks"]}
    assert {k: v["state"] for k, v in subtasks.items()} == {
        "good": "merged",
        "bad": "failed",
        "later": "merged",
    }
    reason = subtasks["bad"]["reason"]
    assert reason.startswith("integration_verify_failed: `test ! -f broken.txt")
    assert "exited with status 1" in reason and subtasks["bad"]["branch"] in reason
    branch = status["integration_branch"]
    assert sorted(git(repo, "ls-tree", "--name-only", branch).split()) == [
        "README.md",
        "good.txt",
        "later.txt",
    ]
    assert git(repo, "rev-parse", branch).strip() == status["integration_head"]
    assert git(repo, "show", f"{subtasks['bad']['branch']}:broken.txt") == "oops\n"  # kept
    report = kairo.run("report").stdout
    assert "broken.txt breaks the build" in report
    integration_checkout = [
        line for line in git(repo, "worktree", "list").splitlines() if ".integration" in line
    ]
    assert integration_checkout == []  # removed with the execution's end


def sleeper(kairo: Kairo, name: str) -> Path:
    return kairo.write_plan(
        f"version: 1\nname: {name}\nagent: {{kind: shell, run: 'sleep 60'}}\n"
        "subtasks:\n  - id: a\n",
        f"{name}.yaml",
    )


def test_stop_without_an_id_stops_the_newest_execution_that_has_not_ended(
    kairo: Kairo,
) -> None:
    assert kairo.run("start", str(sleeper(kairo, "older")), "--detach").returncode == 0
    older = kairo.json("status")["execution_id"]
    run_to_its_end(kairo, "newer")  # the newest, ended

    done = kairo.run("stop", "--now", "--wait")

    assert done.returncode == 0, done.stderr
    assert older in done.stderr and "what they changed, if anything" in done.stderr
    assert kairo.json("status", older)["status"] == "STOPPED"


def test_a_running_execution_is_not_started_twice_nor_cleaned(kairo: Kairo) -> None:
    # A first run leaves its two worktrees as spares; the running execution takes one.
    run_to_its_end(kairo, "quick", "a", "b")
    plan = sleeper(kairo, "long")
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    short = kairo.json("status")["execution_id"][-6:].lower()

    again = kairo.run("start", str(plan), "--detach")
    cleaned = kairo.run("clean")
    forced = kairo.run("clean", "--force")
    spares = kairo.run("clean", "--spares")

    assert again.returncode == 4, again.stderr
    assert f"is RUNNING: `kairo-orch attach {short}` shows it" in again.stderr
    assert f"`kairo-orch start --fresh {plan}` starts another beside it" in again.stderr
    assert len(kairo.json("list")) == 2
    for refused in (cleaned, forced):
        assert refused.returncode == 4, refused.stderr
        assert f"has not ended (it is RUNNING); `kairo-orch stop {short}` ends it" in refused.stderr
    # The spares are the repository's: the running execution is named and left alone.
    assert spares.returncode == 0, spares.stderr
    assert "left alone, execution" in spares.stdout and "(it is RUNNING)" in spares.stdout
    assert "removed 1 spare worktree\n" in spares.stdout
    assert kairo.run("start", str(plan), "--detach", "--fresh").returncode == 0
    assert [row["status"] for row in kairo.json("list")] == ["RUNNING", "RUNNING", "COMPLETED"]


def test_a_merge_waiting_for_its_integration_check_is_integrating(
    kairo: Kairo, tmp_path: Path
) -> None:
    """Between its merge and the end of `integration_verify` a subtask is `integrating`,
    not `verifying` (its own `verify` ran before it was accepted)."""
    # In a folder of its own that the plan binds: a sandboxed check sees no other of /tmp.
    gate = tmp_path / "gate"
    gate.mkdir()
    release = gate / "release"
    plan = kairo.write_plan(
        f"version: 1\nname: checked\nverify: 'true'\nsandbox: {{writable: [{gate}]}}\n"
        f"integration_verify: 'while [ ! -e {release} ]; do sleep 0.05; done'\n"
        "agent: {kind: shell, run: 'echo $KAIRO_SUBTASK_ID > $KAIRO_SUBTASK_ID.txt'}\n"
        "subtasks:\n  - id: first\n"
    )
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    seen: list[str] = []

    def checked() -> bool:
        seen.append(states(kairo)["first"])
        return seen[-1] not in ("pending", "preparing", "running", "verifying", "succeeded")

    wait_for(checked, 60)
    status = kairo.json("status")
    assert seen[-1] == "integrating", seen
    assert status["integration_head"] != status["base_commit"]  # merged, and checked now
    assert "integrating" in kairo.run("status").stdout
    release.touch()
    wait_for(lambda: kairo.json("status")["status"] == "COMPLETED", 60)
    assert states(kairo) == {"first": "merged"}
