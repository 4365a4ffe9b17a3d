"""A supervisor process started ahead of its execution: abandoned, handed over, or dead."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from orchestrator.errors import EnvironmentProblem
from orchestrator.runtime.supervisor_process import pending_supervisor

WAIT_S = 60  # its imports take ~0.3 s on a quiet machine; CI may be anything but quiet


def test_an_abandoned_supervisor_process_exits_by_itself_and_quietly() -> None:
    with pending_supervisor() as supervisor:
        # The command failed (a bad plan, say) before it had an execution.
        assert supervisor.process.stdin is not None and supervisor.process.stdout is not None
        supervisor.process.stdin.close()
        assert supervisor.process.wait(timeout=WAIT_S) == 0
        assert supervisor.process.stdout.read() == b""
        assert supervisor.failure() == "it exited with status 0 and said nothing"


def test_a_handover_moves_the_supervisors_output_to_its_log(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    log = tmp_path / "runs" / "supervisor.log"
    with pending_supervisor() as supervisor:
        # No such execution: the supervisor fails at once, and says so in its log.
        supervisor.hand_over(["01NOSUCHEXECUTION", "--repo", str(repo)], log_path=log)
        assert supervisor.process.wait(timeout=WAIT_S) != 0
        assert supervisor.process.stdout is not None
        assert supervisor.process.stdout.read() == b""  # nothing went to the pipe
    assert "supervisor_crashed" in log.read_text()


def test_a_handover_to_a_supervisor_process_that_died_is_an_environment_problem(
    tmp_path: Path,
) -> None:
    with pending_supervisor() as supervisor:
        assert supervisor.failure() is None  # still importing, or waiting
        supervisor.process.send_signal(signal.SIGKILL)
        supervisor.process.wait(timeout=WAIT_S)
        with pytest.raises(EnvironmentProblem, match="could not start: it was killed by signal 9"):
            supervisor.hand_over(["01X", "--repo", str(tmp_path)], log_path=tmp_path / "log")
