"""What a killed supervisor left running is ended when a resume begins (process_groups.
groups_marked, LocalProcesses.end_leftovers): its checks, before they run again, and what
its attempts whose runners are gone left in their cgroups. Real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from agents.containment import Cgroup, cgroups_named, end_cgroup, own_cgroup
from agents.runner import RUNNER_MAIN
from orchestrator.core.ids import CGROUP_PREFIX, attempt_cgroup, check_cgroup
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


def _in_cgroup(parent: str, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
    """`argv` started in the cgroup `name` below `parent` (made here)."""
    cgroup = Cgroup.make(parent, name)
    join = 'echo 0 > "$0"; exec "$@"'
    return subprocess.Popen(["/bin/sh", "-c", join, f"{cgroup.path}/cgroup.procs", *argv])


async def test_a_resume_ends_the_cgroups_of_its_checks_and_of_attempts_whose_runner_is_gone(
    tmp_path: Path,
) -> None:
    parent = own_cgroup()
    if parent is None or not os.access(f"{parent}/cgroup.procs", os.W_OK):
        pytest.skip("no cgroup v2 this user may write here")
    mine, theirs = f"E{os.getpid():025d}", f"F{os.getpid():025d}"
    spec = tmp_path / "b" / "1" / "runner.json"  # b's runner runs: a stand-in, named so
    runner_like = [sys.executable, "-c", f"import time; time.sleep(60) # {RUNNER_MAIN}", str(spec)]
    started = {
        "check": _in_cgroup(parent, check_cgroup(mine, "verify", "a"), ["sleep", "60"]),
        "gone": _in_cgroup(parent, attempt_cgroup(mine, "a", 1), ["sleep", "60"]),
        "running": _in_cgroup(parent, attempt_cgroup(mine, "b", 1), runner_like),
        "theirs": _in_cgroup(parent, attempt_cgroup(theirs, "a", 1), ["sleep", "60"]),
    }
    try:
        await trio.sleep(0.3)  # in their cgroups, running

        await LocalProcesses().end_leftovers(mine, tmp_path)

        assert started["check"].wait(timeout=10) != 0 and started["gone"].wait(timeout=10) != 0
        assert started["running"].poll() is None and started["theirs"].poll() is None
        # Other runs on this machine may hold cgroups of their own: only this test's.
        present = {Path(p).name for p in cgroups_named(parent, CGROUP_PREFIX)}
        left = present & {Path(process.args[3]).parent.name for process in started.values()}
        assert left == {attempt_cgroup(mine, "b", 1), attempt_cgroup(theirs, "a", 1)}
    finally:
        for process in started.values():
            process.kill()
            process.wait()
        for name in (attempt_cgroup(mine, "b", 1), attempt_cgroup(theirs, "a", 1)):
            end_cgroup(f"{parent}/{name}")
