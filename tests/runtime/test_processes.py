"""The plan's commands as the supervisor runs them: their output, and a check's bounds."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
import trio

from orchestrator.runtime import processes
from orchestrator.runtime.cgroups import make_check_cgroup
from orchestrator.runtime.processes import STOPPED, TIMED_OUT, run_shell

# Says something, leaves a child of its own behind in its group, and waits.
HANGS = "echo so far so good; sleep 30 & echo $! > child.pid; sleep 30"
# The same, with a child that ignores SIGTERM.
_IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(30)"
)
STUBBORN = f"{sys.executable} -c '{_IGNORES_SIGTERM}' & echo $! > child.pid; sleep 30"


async def test_a_command_gives_its_status_and_all_it_printed(tmp_path: Path) -> None:
    result = await run_shell(
        "echo out; echo err >&2; echo $KAIRO_X; exit 3", cwd=tmp_path, env={"KAIRO_X": "x"}
    )
    assert (result.exit_code, result.output) == (3, "out\nerr\nx\n")


async def test_a_check_s_output_has_the_secrets_of_its_environment_cut_out(
    tmp_path: Path,
) -> None:
    env = {"DATABASE_URL": "postgres://u:PASSWORD1234@db/shop", "PATH": os.environ["PATH"]}
    # Printed whole, then in pieces the shell puts together: a check's output is all one.
    script = 'echo "$DATABASE_URL"; printf "%s" "postgres://u:"; echo "PASSWORD1234@db/shop ok"'

    result = await run_shell(script, cwd=tmp_path, env=env)

    assert result.output == "[redacted: DATABASE_URL]\n[redacted: DATABASE_URL] ok\n"


async def test_a_command_over_its_timeout_ends_with_its_children_and_says_so(
    tmp_path: Path,
) -> None:
    began = time.monotonic()
    result = await run_shell(HANGS, cwd=tmp_path, env=dict(os.environ), timeout_s=0.5)
    assert time.monotonic() - began < 5
    assert result.exit_code == TIMED_OUT
    assert result.output == "so far so good\n\n[kairo] ended after its timeout of 0.5s\n"
    assert ends(int((tmp_path / "child.pid").read_text()))


async def test_what_a_command_started_ends_with_it_even_if_it_ignores_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(processes, "GRACE_S", 0.3)
    result = await run_shell(STUBBORN, cwd=tmp_path, env=dict(os.environ), timeout_s=0.5)
    assert result.exit_code == TIMED_OUT
    assert ends(int((tmp_path / "child.pid").read_text()))


async def test_what_a_command_started_ends_with_it_when_its_caller_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(processes, "GRACE_S", 0.3)
    with trio.move_on_after(0.7):
        await run_shell(STUBBORN, cwd=tmp_path, env=dict(os.environ), timeout_s=60)
    assert ends(int((tmp_path / "child.pid").read_text()))


async def test_a_stop_ends_a_command_under_way(tmp_path: Path) -> None:
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_set_after, stop, 0.3)
        result = await run_shell(HANGS, cwd=tmp_path, env=dict(os.environ), stop=stop)
    assert result.exit_code == STOPPED
    assert result.output.endswith("\n[kairo] ended by kairo-orch stop --now\n")


async def test_a_command_asked_for_after_a_stop_is_not_started(tmp_path: Path) -> None:
    stop = trio.Event()
    stop.set()
    result = await run_shell("touch ran", cwd=tmp_path, env=dict(os.environ), stop=stop)
    assert result.exit_code == STOPPED and "stop --now came first" in result.output
    assert not (tmp_path / "ran").exists()


async def test_a_command_that_ends_in_time_is_not_touched(tmp_path: Path) -> None:
    result = await run_shell("exit 0", cwd=tmp_path, env={}, timeout_s=30, stop=trio.Event())
    assert (result.exit_code, result.output) == (0, "")


def runs(pid: int) -> bool:
    """Whether `pid` is a process that runs (a zombie left to an init that does not reap
    orphans runs nothing)."""
    try:
        return bool(Path(f"/proc/{pid}/cmdline").read_bytes())
    except OSError:
        return False


def ends(pid: int, seconds: float = 5) -> bool:
    """Whether `pid` stops running within a few seconds: a SIGKILL takes effect when the
    process is next scheduled, not when kill() returns."""
    deadline = time.monotonic() + seconds
    while runs(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not runs(pid)


async def _set_after(event: trio.Event, seconds: float) -> None:
    await trio.sleep(seconds)
    event.set()


# A check that leaves behind what a process group does not hold: a `setsid` child and a
# daemon forked twice that ignores SIGTERM, each writing its pid down.
LEAVES_BEHIND = (
    "setsid sleep 60 & echo $! > setsid.pid; "
    '(setsid sh -c \'trap "" TERM; echo $$ > daemon.tmp; mv daemon.tmp daemon.pid; '
    "while :; do sleep 0.1; done' </dev/null >/dev/null 2>&1 &); "
    "while [ ! -e daemon.pid ]; do sleep 0.02; done; echo checked"
)


@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup", "marker"])
async def test_nothing_a_check_started_outlives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cgroup: bool
) -> None:
    monkeypatch.setattr(processes, "GRACE_S", 0.3)
    if not cgroup:
        monkeypatch.setenv("KAIRO_TEST_NO_CGROUP", "1")
    scope = processes.CheckScope.of(f"E-{os.getpid()}", "verify", "a")
    procs = make_check_cgroup(scope.cgroup) if cgroup else None
    if cgroup and procs is None:
        pytest.skip("no cgroup v2 this user may write here: the marker variant covers it")

    result = await run_shell(LEAVES_BEHIND, cwd=tmp_path, env=dict(os.environ), scope=scope)

    assert (result.exit_code, result.output) == (0, "checked\n")
    assert ends(int((tmp_path / "setsid.pid").read_text()))
    assert ends(int((tmp_path / "daemon.pid").read_text()))
    assert procs is None or not procs.parent.exists()


async def test_without_a_scope_what_a_check_left_runs_on(tmp_path: Path) -> None:
    # What the test above prevents: a process group does not hold them.
    result = await run_shell(LEAVES_BEHIND, cwd=tmp_path, env=dict(os.environ))
    try:
        assert result.exit_code == 0
        assert not ends(int((tmp_path / "daemon.pid").read_text()), seconds=0.5)
    finally:
        for name in ("setsid.pid", "daemon.pid"):
            os.kill(int((tmp_path / name).read_text()), 9)
