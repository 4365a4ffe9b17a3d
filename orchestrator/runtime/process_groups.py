"""Stopping an agent's whole process group: SIGTERM, a grace period, then SIGKILL.

Liveness is read from /proc rather than `kill(0)`: on machines whose init does not reap
orphans, exited agents linger as zombies that `kill(0)` still finds.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Mapping
from pathlib import Path

import trio

GRACE_SECONDS = 5.0
POLL_SECONDS = 0.05


def group_alive(pgid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def groups_marked(marker: Mapping[str, str]) -> set[int]:
    """The process groups of live processes whose environment holds every item of
    `marker`: a check a supervisor started and did not live to end."""
    wanted = {f"{key}={value}".encode() for key, value in marker.items()}
    found: set[int] = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            environment = set((proc / "environ").read_bytes().split(b"\0"))
            if not wanted <= environment:
                continue
            fields = (proc / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[0] != "Z":
            found.add(int(fields[2]))
    return found - {os.getpgrp()}


def _signal(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


async def stop_group(pgid: int, *, grace: float = GRACE_SECONDS) -> None:
    """Return once nothing of the group runs any more."""
    if pgid <= 1 or pgid == os.getpgrp():
        return  # never our own group, never init's
    _signal(pgid, signal.SIGTERM)
    with trio.move_on_after(grace):
        # Polled: the group is no child of ours, so nothing would notify us of its end.
        while await trio.to_thread.run_sync(group_alive, pgid):  # noqa: ASYNC110
            await trio.sleep(POLL_SECONDS)
        return
    _signal(pgid, signal.SIGKILL)
