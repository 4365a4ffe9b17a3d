"""A check that hangs (a `verify` gate, `integration_verify`) ends with its subtask's
timeout, or at `kairo-orch stop --now`, with everything it started; what it printed stays."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git
from tests.e2e.test_limits import processes_with
from tests.e2e.test_recovery import wait_for

pytestmark = pytest.mark.slow


def hanging(marker: str) -> str:
    """A check that says how far it got, then waits forever in a child of its own (as a
    test runner's worker would), and its pid is not its shell's."""
    return f"echo collected 3 tests; (sleep 600; echo {marker}) & sleep 600; : {marker}"


def test_a_verify_that_hangs_ends_with_its_subtask_timeout_and_says_so(kairo: Kairo) -> None:
    marker = f"kairo-hung-verify-{time.monotonic_ns()}"
    plan = kairo.write_plan(
        "version: 1\nname: hung\nagent: {kind: shell, run: 'echo x > x.txt'}\n"
        f"verify: '{hanging(marker)}'\n"
        "subtasks:\n  - id: hung\n    limits: {timeout: 2s, max_attempts: 1}\n"
    )
    began = time.monotonic()

    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 1, done.stderr
    assert time.monotonic() - began < 20
    view = kairo.json("status")["subtasks"][0]
    assert view["state"] == "failed"
    assert "exited with status 124" in view["reason"], view["reason"]
    report = kairo.run("report").stdout
    assert "collected 3 tests" in report and "ended after its timeout of 2s" in report
    assert report == kairo.run("report", "--markdown").stdout  # off a terminal: Markdown
    assert max(len(line) for line in report.splitlines()) > 240  # that rich would wrap
    assert processes_with(marker) == []


def test_an_integration_check_that_hangs_is_undone_at_the_timeout_and_the_rest_merge(
    kairo: Kairo, repo: Path
) -> None:
    marker = f"kairo-hung-check-{time.monotonic_ns()}"
    plan = kairo.write_plan(
        "version: 1\nname: hungcheck\nlimits: {timeout: 2s}\n"
        f"integration_verify: 'test ! -f hang.txt || {{ {hanging(marker)}; }}'\n"
        "agent: {kind: shell, run: 'echo $KAIRO_SUBTASK_ID > $KAIRO_SUBTASK_ID.txt'}\n"
        "subtasks:\n  - id: hangs\n    agent: {run: 'echo > hang.txt'}\n  - id: fine\n"
    )
    began = time.monotonic()

    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 1, done.stderr
    assert time.monotonic() - began < 20
    subtasks = {s["id"]: s for s in kairo.json("status")["subtasks"]}
    assert subtasks["hangs"]["state"] == "failed"
    assert subtasks["hangs"]["reason"].startswith("integration_verify_failed:")
    assert "exited with status 124" in subtasks["hangs"]["reason"]
    assert subtasks["fine"]["state"] == "merged"  # merges went on after it
    branch = kairo.json("status")["integration_branch"]
    assert "hang.txt" not in git(repo, "ls-tree", "--name-only", branch).split()
    assert "ended after its timeout of 2s" in kairo.run("report").stdout
    assert processes_with(marker) == []


def test_stop_now_ends_a_check_under_way(kairo: Kairo) -> None:
    marker = f"kairo-stop-check-{time.monotonic_ns()}"
    plan = kairo.write_plan(
        "version: 1\nname: stopcheck\nagent: {kind: shell, run: 'echo x > x.txt'}\n"
        f"verify: '{hanging(marker)}'\nsubtasks:\n  - id: checked\n"
    )
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    wait_for(lambda: len(processes_with(marker)) == 2)  # no timeout: it would wait 600 s
    began = time.monotonic()

    done = kairo.run("stop", "--now", "--wait")

    assert done.returncode == 0, done.stderr
    assert time.monotonic() - began < 15
    assert kairo.json("status")["status"] == "STOPPED"
    view = kairo.json("status")["subtasks"][0]
    assert view["state"] == "stopped", view
    assert view["reason"].endswith("stopped the execution before attempt 1's check finished")
    assert processes_with(marker) == []


def test_a_check_a_killed_supervisor_left_running_is_ended_before_resume_checks_again(
    kairo: Kairo,
) -> None:
    marker = f"kairo-left-check-{time.monotonic_ns()}"
    # The first run of the check hangs; the one resume starts passes at once. Its mark is
    # in the integration checkout, the one place besides its scratch a sandboxed check
    # may write, and ignored, so that it stays from one check to the next. (Named through
    # its environment: a command line naming the test's folder would hold "pytest", which
    # processes_with leaves out.)
    once = '"$KAIRO_WORKTREE/checked-once"'
    agent = "echo x > x.txt; echo checked-once > .gitignore"
    plan = kairo.write_plan(
        f"version: 1\nname: leftcheck\nagent: {{kind: shell, run: '{agent}'}}\n"
        f"integration_verify: 'test -e {once} || {{ touch {once}; {hanging(marker)}; }}'\n"
        "subtasks:\n  - id: checked\n"
    )
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    wait_for(lambda: len(processes_with(marker)) == 2)
    pid = kairo.json("status")["supervisor_pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: kairo.json("status")["status"] == "PAUSED")
    assert len(processes_with(marker)) == 2  # the check outlived its supervisor

    done = kairo.run("resume", "--wait")

    assert done.returncode == 0, done.stderr
    assert kairo.json("status")["subtasks"][0]["state"] == "merged"
    assert processes_with(marker) == []  # ended, not left to run beside the new check
