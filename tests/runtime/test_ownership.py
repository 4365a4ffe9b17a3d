"""Whether an execution's owner, a process of this host, still runs kairo-orch."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from orchestrator.runtime.ownership import kairo_process_alive

SLEEPER = "import pathlib, sys, time\n{rename}time.sleep(60)\n"


def _sleeper(directory: Path, *, name: str | None) -> subprocess.Popen[bytes]:
    """A process whose command line names neither `orchestrator` nor `kairo-orch` (a link
    of another name), which names itself `name`, as a forked supervisor does."""
    rename = f"pathlib.Path('/proc/self/comm').write_text({name!r})\n" if name else ""
    script = directory / "ko.py"
    script.write_text(SLEEPER.format(rename=rename))
    process = subprocess.Popen([sys.executable, str(script)])
    comm = Path(f"/proc/{process.pid}/comm")
    deadline = time.monotonic() + 10
    while name and comm.read_text().strip() != name and time.monotonic() < deadline:
        time.sleep(0.01)
    return process


def test_a_process_named_kairo_orch_is_alive_whatever_its_command_line(tmp_path: Path) -> None:
    with _sleeper(tmp_path, name="kairo-orch") as process:
        try:
            assert kairo_process_alive(process.pid)
        finally:
            process.kill()
    assert not kairo_process_alive(process.pid)


def test_a_process_that_is_not_kairo_orch_is_no_owner(tmp_path: Path) -> None:
    # A pid reused by something else after the supervisor died.
    with _sleeper(tmp_path, name=None) as process:
        try:
            assert not kairo_process_alive(process.pid)
        finally:
            process.kill()
