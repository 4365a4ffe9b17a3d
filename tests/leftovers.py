"""What a test run leaves running. Each process the run starts carries a mark in its
environment, `LC_KAIRO_TEST_RUN=<this run's own value>`: an `LC_` variable, which a tmux
client passes on to the server it starts (orchestrator/tmux/layout.py) and the lab's hosts
keep, unlike `KAIRO_*`. Processes that were running before the run, or belong to another
run at the same time, carry none or another value, so are never taken for this run's.

A process started with an environment made from nothing (`env={"PATH": ...}`) has no
mark, and is not seen."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

MARK = "LC_KAIRO_TEST_RUN"


def mark_this_run() -> str:
    """Mark every process started from now on; the mark's value, this run's own."""
    value = f"{os.getpid()}-{secrets.token_hex(4)}"
    os.environ[MARK] = value
    return value


@dataclass(frozen=True)
class Leftover:
    pid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid}: {self.command}"


def marked_processes(value: str) -> list[Leftover]:
    """The live processes (not zombies) but this one that carry the mark `value`."""
    needle = f"{MARK}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0] == b"Z":
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        found.append(Leftover(int(entry.name), command.decode(errors="replace").strip()))
    return sorted(found, key=lambda leftover: leftover.pid)


def leftovers(value: str, *, grace_s: float = 5.0) -> list[Leftover]:
    """The marked processes still running after `grace_s`: what is on its way out (a tmux
    server answers kill-server before it exits) is given that long."""
    deadline = time.monotonic() + grace_s
    while True:
        found = marked_processes(value)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)


def end(found: list[Leftover]) -> None:
    """Kill what a run left, so that it leaks no further than the report of it."""
    for leftover in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(leftover.pid, signal.SIGKILL)
