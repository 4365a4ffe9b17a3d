"""The plan's own short commands the supervisor runs (the verify gates, a worktree's
setup, review steps), with their output kept, and the bounds of a check.

A command runs in a process group of its own, so that when a check must end early (its
timeout, or `kairo-orch stop --now`) its children end with it: a test runner's workers, a
build's compilers. A check that hangs would otherwise hold its subtask, and an integration
check every merge after it, for as long as it liked. A check (its `CheckScope`) is held
whole besides: in a cgroup of its own where the supervisor may make one (runtime/cgroups.py),
else found by the marker in its processes' environment, and whatever it left running when
its shell exited (a server it started, a daemon: the checks run code an agent wrote) is
ended before its result is. Its output goes to an unnamed file, not a pipe: what a check
printed before it was ended is what says where it hung. The secrets of its environment
are cut out of that output, whole, before anything keeps a part of it (an event's tail,
the setup log). Under the plan's sandbox a check runs inside it (check_sandbox.py), the
sandbox held and ended as the shell is, and its output has the secrets kept from it cut
out too.
"""

from __future__ import annotations

import math
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import trio

from orchestrator.core.durations import format_duration
from orchestrator.core.ids import check_cgroup
from orchestrator.core.secrets import Redactor
from orchestrator.runtime.cgroups import end_check_cgroup, make_check_cgroup
from orchestrator.runtime.process_groups import GRACE_SECONDS, groups_marked, stop_group

OUTPUT_TAIL_BYTES = 4096  # how much of a command's output an event keeps: its end
TIMED_OUT = 124  # the exit status timeout(1) gives a command it ended
STOPPED = 143  # 128 + SIGTERM: a command ended by `kairo-orch stop --now`
GRACE_S = GRACE_SECONDS  # between the SIGTERM and the SIGKILL of a group ended early


# A shell moves itself into the check's cgroup, then becomes the check (its sandbox first,
# if it has one): nothing of it runs outside. Joining cannot fail where the supervisor could
# make the cgroup; if it did, the check runs all the same.
_IN_CGROUP = '{ echo 0 >"$0"; } 2>/dev/null; exec "$@"'


# What a sandbox's command line runs under: a shell that stays its parent. Bubblewrap dies
# with its parent (--die-with-parent), and to the kernel that parent is the thread that
# started it: one of trio's worker threads, which ends once idle, taking the check with it.
# Not the last command of its script, so the shell does not become it.
_SANDBOX_PARENT = ["/bin/sh", "-c", '"$@"; exit "$?"', "sandbox"]


#: The plan's commands that run code an agent may have written, held whole as they run.
CHECKS = ("verify", "integration", "setup")


@dataclass(frozen=True)
class CheckScope:
    """What finds a check's processes again, once it ended or its supervisor died: a cgroup
    of its own, by this name (core/ids.check_cgroup), where one can be made, and the
    marker its environment carries (where none can, and what a resume looks for)."""

    cgroup: str
    marker: Mapping[str, str]

    @classmethod
    def of(cls, execution_id: str, check: str, subtask_id: str) -> CheckScope:
        """The scope of one run of `check` (one of CHECKS) in `subtask_id`'s name: one at a
        time runs."""
        marker = {
            "KAIRO_EXECUTION_ID": execution_id,
            "KAIRO_CHECK": check,
            "KAIRO_SUBTASK_ID": subtask_id,
        }
        return cls(check_cgroup(execution_id, check, subtask_id), marker)


@dataclass(frozen=True)
class CheckSandbox:
    """How a check runs inside a sandbox: `wrap` gives the command line that runs its shell
    in it; `withheld` are the variables of the supervisor kept from it, whose secrets its
    output must not show all the same (it may find them elsewhere)."""

    wrap: Callable[[list[str]], list[str]]
    withheld: Mapping[str, str]


@dataclass(frozen=True)
class ShellResult:
    exit_code: int
    output: str  # stdout and stderr, interleaved as they came


async def run_shell(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float | None = None,
    stop: trio.Event | None = None,
    scope: CheckScope | None = None,
    sandbox: CheckSandbox | None = None,
) -> ShellResult:
    """Run `command` with /bin/sh until it exits, `timeout_s` have gone by (exit
    TIMED_OUT) or `stop` is set (exit STOPPED); then its last line says which. With `stop`
    set already, nothing is started. Its output has the secrets of `env` cut out. With
    `scope`, nothing it started runs once this returns. With `sandbox`, the shell
    runs inside it, and the sandbox in the command's process group and cgroup, ended as the
    shell would be."""
    if stop is not None and stop.is_set():
        return ShellResult(STOPPED, "[kairo] not run: kairo-orch stop --now came first\n")
    procs = await trio.to_thread.run_sync(make_check_cgroup, scope.cgroup) if scope else None
    argv = ["/bin/sh", "-c", command]
    if sandbox is not None:
        argv = [*_SANDBOX_PARENT, *await trio.to_thread.run_sync(sandbox.wrap, argv)]
    if procs is not None:
        argv = ["/bin/sh", "-c", _IN_CGROUP, str(procs), *argv]
    stopped = False
    completed: subprocess.CompletedProcess[bytes] | None = None
    group: list[int] = []  # the process group, once known

    async def end_on_stop(bounds: trio.CancelScope) -> None:
        nonlocal stopped
        assert stop is not None
        await stop.wait()
        stopped = True
        bounds.cancel()

    async def end_its_group(process: trio.Process) -> None:
        group.append(process.pid)  # its own session: the group's id is its pid
        await stop_group(process.pid, grace=GRACE_S)

    with tempfile.TemporaryFile() as output:
        try:
            with trio.move_on_after(math.inf if timeout_s is None else timeout_s):
                async with trio.open_nursery() as nursery:
                    if stop is not None:
                        nursery.start_soon(end_on_stop, nursery.cancel_scope)
                    completed = await trio.run_process(
                        argv,
                        cwd=cwd,
                        env={**env, **(scope.marker if scope else {})},
                        stdin=subprocess.DEVNULL,
                        stdout=output,
                        stderr=subprocess.STDOUT,
                        check=False,
                        start_new_session=True,
                        deliver_cancel=end_its_group,
                    )
                    nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                if group:
                    # However it was ended (its bounds, or its caller cancelled): trio gives
                    # up on `end_its_group` once the shell has exited, which it does at the
                    # first SIGTERM, and what the shell started may still run, or ignore it.
                    await stop_group(group[0], grace=GRACE_S)
                if procs is not None:
                    await end_check_cgroup(procs, GRACE_S)
                if scope is not None:  # and what left it, or never joined it, as marked
                    await end_marked(scope.marker)
        withheld = sandbox.withheld if sandbox is not None else {}
        redactor = Redactor.of({**withheld, **env})
        text = redactor.text(await trio.to_thread.run_sync(_read, output))
    if completed is not None:  # it ended on its own, even if a bound came just after
        return ShellResult(exit_code=completed.returncode, output=text)
    if stopped:
        return ShellResult(STOPPED, f"{text}\n[kairo] ended by kairo-orch stop --now\n")
    assert timeout_s is not None
    why = f"\n[kairo] ended after its timeout of {format_duration(timeout_s)}\n"
    return ShellResult(TIMED_OUT, text + why)


async def end_marked(marker: Mapping[str, str]) -> None:
    """End the process groups of every process whose environment holds `marker`, the
    groups of those that left their check's by `setsid` included."""
    for pgid in await trio.to_thread.run_sync(groups_marked, marker):
        await stop_group(pgid, grace=GRACE_S)


def _read(output: IO[bytes]) -> str:
    output.seek(0)
    return output.read().decode("utf-8", errors="replace")
