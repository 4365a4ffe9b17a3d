"""A check a killed supervisor left running is ended before the check runs again
(process_groups.groups_marked, LocalProcesses.end_leftovers): real processes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import trio

from orchestrator.runtime.edge_adapters import LocalProcesses
from orchestrator.runtime.process_groups import group_alive


def _check(execution_id: str) -> subprocess.Popen[bytes]:
    """A check's shell and its child, in a session of their own, as run_shell starts them."""
    env = {**os.environ, "KAIRO_EXECUTION_ID": execution_id, "KAIRO_CHECK": "integration"}
    return subprocess.Popen(["/bin/sh", "-c", "sleep 60 & wait"], env=env, start_new_session=True)


async def test_the_checks_of_this_execution_are_ended_and_no_other(tmp_path: Path) -> None:
    mine, theirs = _check("E-MINE"), _check("E-THEIRS")
    try:
        await trio.sleep(0.2)  # the shells have started their children
        await LocalProcesses().end_leftovers("E-MINE", tmp_path)
        assert mine.wait(timeout=10) != 0  # ended by a signal
        assert theirs.poll() is None  # another execution's check runs on
        # and the child the shell started went with it (a zombie at most, where init does
        # not reap orphans): nothing of the group runs
        assert not group_alive(mine.pid)
    finally:
        for process in (mine, theirs):
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait()
