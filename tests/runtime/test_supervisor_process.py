"""A supervisor forked ahead of its execution: abandoned, handed over, or dead."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from orchestrator.errors import EnvironmentProblem
from orchestrator.runtime.supervisor_process import PendingSupervisor, pending_supervisor
from orchestrator.store.sqlite import SqliteStore


def test_an_abandoned_supervisor_process_exits_by_itself_and_quietly() -> None:
    with pending_supervisor() as supervisor:
        # The command failed (a bad plan, say) before it had an execution.
        supervisor.release()
        assert supervisor.wait() == 0
        assert supervisor.failure() == "it exited with status 0 and said nothing"


def test_a_supervisor_is_a_session_of_its_own() -> None:
    with pending_supervisor() as supervisor:
        # It leaves our session first thing, so that a terminal's hangup or Ctrl-C never
        # reaches it.
        deadline = time.monotonic() + 10
        while os.getsid(supervisor.pid) != supervisor.pid and time.monotonic() < deadline:
            time.sleep(0.001)
        assert os.getsid(supervisor.pid) == supervisor.pid != os.getsid(0)
        assert supervisor.failure() is None
        supervisor.release()
        assert supervisor.wait() == 0


def test_a_handover_moves_the_supervisors_output_to_its_log(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    log = tmp_path / "runs" / "supervisor.log"
    with pending_supervisor() as supervisor:
        # No such execution: the supervisor fails at once, and says so in its log.
        supervisor.hand_over(["01NOSUCHEXECUTION", "--repo", str(repo)], log_path=log)
        assert supervisor.wait() != 0
        # Nothing went to the pipe the command reads before a handover.
        assert supervisor.failure() == "it exited with status 1 and said nothing"
    assert "supervisor_crashed" in log.read_text()


def test_a_handover_to_a_supervisor_process_that_died_is_an_environment_problem(
    tmp_path: Path,
) -> None:
    with pending_supervisor() as supervisor:
        assert supervisor.failure() is None  # still importing, or waiting
        os.kill(supervisor.pid, signal.SIGKILL)
        assert supervisor.wait() == -signal.SIGKILL
        with pytest.raises(EnvironmentProblem, match="could not start: it was killed by signal 9"):
            supervisor.hand_over(["01X", "--repo", str(tmp_path)], log_path=tmp_path / "log")


def test_no_supervisor_is_forked_while_a_store_is_open(tmp_path: Path) -> None:
    # A SQLite connection carried across the fork would share its locks' bookkeeping with
    # the child: the command forks first, then opens its store.
    with (
        SqliteStore(tmp_path / "kairo.db"),
        pytest.raises(AssertionError, match="before the command opens its store"),
    ):
        PendingSupervisor()
    with pending_supervisor() as supervisor:  # closed again: forked as usual
        supervisor.release()
        assert supervisor.wait() == 0


def test_a_supervisor_keeps_none_of_the_commands_other_descriptors() -> None:
    # A pipe the command was given (a make's jobserver, a caller's): its reader sees the
    # end of it once the command closes its end, though the supervisor lives on.
    read_end, write_end = os.pipe()
    try:
        with pending_supervisor() as supervisor:
            os.close(write_end)
            ready, _, _ = select.select([read_end], [], [], 10)
            assert ready and os.read(read_end, 1) == b""
            supervisor.release()
            assert supervisor.wait() == 0
    finally:
        os.close(read_end)
