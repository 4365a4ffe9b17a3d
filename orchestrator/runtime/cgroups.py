"""The cgroups of attempts and checks, as the supervisor sees them: ended where a runner
could not end its own, found again after a crash, and made for the checks it runs.

An attempt's cgroup is made and joined by its runner, below the runner's own cgroup (the
tmux server's), and named after the attempt (core/ids.py); the runner ends it when its
agent is done (agents/containment.py). The supervisor ends it too, whatever the runner
did: after a `stop --now`, when an attempt's runner is found gone, and (a supervisor
killed meanwhile) at `resume` and `clean`, which find every cgroup of the execution by its
name. A check's cgroup is the supervisor's to make, below its own. Where none can be had
(no cgroup v2, no write access to it, or a test's `KAIRO_TEST_NO_CGROUP=1`), an attempt's
processes are held by its runner as their subreaper, and a check's found by the marker in
their environment (runtime/processes.py).
"""

from __future__ import annotations

import functools
import json
import os
import signal
from collections.abc import Mapping
from pathlib import Path

import trio

from agents.containment import Cgroup, cgroup2_root, cgroups_named, end_cgroup, own_cgroup
from orchestrator.core.ids import CGROUP_PREFIX, cgroup_attempt, cgroup_of_execution
from orchestrator.runtime.process_groups import POLL_SECONDS

#: For tests only: "1" makes no cgroup (as for a user who may write none), so that the
#: subreaper and the markers, which stand in for one, are tested on a machine that has one.
NO_CGROUP_FOR_TESTS = "KAIRO_TEST_NO_CGROUP"


def cgroups_wanted(environment: Mapping[str, str]) -> bool:
    return environment.get(NO_CGROUP_FOR_TESTS) != "1"


def _mount() -> Path | None:
    try:
        found = cgroup2_root(Path("/proc/self/mountinfo").read_text(errors="surrogateescape"))
    except OSError:
        return None
    return Path(found[0]) if found is not None else None


def recorded_cgroup(started: Path, name: str) -> Path | None:
    """The attempt's cgroup, as its runner's start record gives it, if that is one: below
    the cgroup2 mount and named `name`. The record is in a folder every agent can write,
    so what it names is taken only where it is the attempt's own cgroup."""
    try:
        path = json.loads(started.read_text(encoding="utf-8")).get("cgroup")
    except (OSError, ValueError, AttributeError):
        return None
    mount = _mount()
    if not isinstance(path, str) or mount is None or os.path.normpath(path) != path:
        return None
    found = Path(path)
    return found if found.name == name and mount in found.parents else None


def end_attempt_cgroup(started: Path, name: str) -> None:
    """End every process in the attempt's cgroup and remove it, if it has one."""
    path = recorded_cgroup(started, name)
    if path is not None:
        end_cgroup(str(path))


def _cgroups_of(execution: str) -> list[Path]:
    mount = _mount()
    if mount is None:
        return []
    found = [Path(path) for path in cgroups_named(str(mount), CGROUP_PREFIX)]
    return [path for path in found if cgroup_of_execution(path.name, execution)]


def attempt_cgroups_of(execution: str) -> list[tuple[str, int]]:
    """The attempts (subtask, number) of the execution `execution` (its id, or its short
    id) that have a cgroup."""
    return [a for path in _cgroups_of(execution) if (a := cgroup_attempt(path.name)) is not None]


def end_cgroups_of(
    execution: str, *, spare: frozenset[tuple[str, int]] = frozenset()
) -> list[Path]:
    """End and remove every cgroup of the execution `execution` (its id, or its short id),
    but those of the attempts in `spare` (subtask, number): whose runners still run. The
    cgroups ended."""
    ended = [path for path in _cgroups_of(execution) if cgroup_attempt(path.name) not in spare]
    for path in ended:
        end_cgroup(str(path))
    return ended


@functools.cache
def _check_parent() -> Path | None:
    """The supervisor's own cgroup, where it may make its checks' cgroups and move their
    processes (this user writes its `cgroup.procs`), else None."""
    own = own_cgroup()
    if own is None:
        return None
    writable = os.access(own, os.W_OK) and os.access(Path(own, "cgroup.procs"), os.W_OK)
    return Path(own) if writable else None


def make_check_cgroup(name: str) -> Path | None:
    """A cgroup for one check's processes, below the supervisor's: its `cgroup.procs`,
    which the check's shell writes itself into before it runs the command; None where
    none can be had."""
    parent = _check_parent()
    if parent is None or not cgroups_wanted(os.environ):
        return None
    try:
        made = Cgroup.make(str(parent), name)
    except OSError:
        return None
    return Path(made.path, "cgroup.procs")


async def end_check_cgroup(procs: Path, grace: float) -> None:
    """SIGTERM to what the check left, SIGKILL to what is left of it after `grace`, and its
    cgroup removed."""
    cgroup = Cgroup(str(procs.parent))
    if await trio.to_thread.run_sync(cgroup.populated):
        await trio.to_thread.run_sync(cgroup.signal, signal.SIGTERM)
        with trio.move_on_after(grace):
            # Polled: nothing tells us when a process outside our children ends.
            while await trio.to_thread.run_sync(cgroup.populated):  # noqa: ASYNC110
                await trio.sleep(POLL_SECONDS)
    await trio.to_thread.run_sync(cgroup.end)
