"""Processes an agent leaves running end with its attempt (issue 35, item 5).

A shell agent leaves three kinds of process behind it: `setsid sleep 1000 &` (a session of
its own, holding the agent's output pipe), a double-forked daemon (its parent gone, its
output closed) and a `setsid` loop that ignores SIGTERM. Each carries a marker in its
environment, by which the test finds it: alive while the agent runs, gone once the attempt
ended, `stop --now` returned, or `clean` removed a crashed execution. Both ways of ending
them are tried: a cgroup v2 of the attempt's own, and (forced with the tests' switch) the
runner as the subreaper of everything the agent started. Each in both sandboxes: under
the default settings (bubblewrap) they live in the agent's process namespace, which ends
with its runner too.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.containment import own_cgroup
from orchestrator.core.ids import CGROUP_PREFIX
from tests.attack.sandboxes import Mode
from tests.e2e.conftest import Kairo
from tests.e2e.test_recovery import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.reproduces("35.5")]

LEFT_BEHIND = {
    # setsid: a session and group of its own; its stdout is the agent's pipe.
    "setsid": "setsid sleep 1000 &",
    # Forked twice, the middle one gone at once: a child of init (or of a subreaper).
    "daemon": "(setsid sh -c 'exec sleep 1001' </dev/null >/dev/null 2>&1 &) &",
    # Ignores SIGTERM: only SIGKILL ends it.
    "ignores_term": (
        "setsid sh -c 'trap \"\" TERM; while :; do sleep 0.2; done' </dev/null >/dev/null 2>&1 &"
    ),
}


#: Where the test lets a held agent go: its run folder, which it sees in either sandbox.
RELEASE = '"$(dirname "$KAIRO_PROMPT_FILE")/release"'


def released(kairo: Kairo) -> None:
    (Path(kairo.json("status")["run_root"]) / "a" / "1" / "release").touch()


def agent_script(mark: str, held: bool) -> str:
    """Leaves the three behind, changes a file, then waits to be `released` (or, not `held`,
    for ever)."""
    hold = f"while [ ! -e {RELEASE} ]; do sleep 0.05; done" if held else "sleep 1002"
    return "\n".join(
        [f"export ESCAPE_MARK={mark}", *LEFT_BEHIND.values(), "echo work > work.txt", hold]
    )


def marked(mark: str) -> dict[str, list[int]]:
    """The live processes whose environment carries `mark`, by what they are."""
    wanted = f"ESCAPE_MARK={mark}".encode()
    found: dict[str, list[int]] = {}
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if wanted not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            if (proc / "stat").read_text().rpartition(")")[2].split()[0] == "Z":
                continue
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            found.setdefault(_kind(command), []).append(int(proc.name))
    return found


def _kind(command: str) -> str:
    if "sleep 1000" in command:
        return "setsid"
    if "sleep 1001" in command:
        return "daemon"
    if "trap" in command or "sleep 0.2" in command:
        return "ignores_term"
    return "agent"


def all_three_alive(mark: str) -> bool:
    return set(LEFT_BEHIND) <= set(marked(mark))


@pytest.fixture(params=["cgroup", "subreaper"])
def containment(request: pytest.FixtureRequest, mark: str, kairo: Kairo) -> str:
    """Which way the attempt's processes are held: the machine's cgroup v2 where it has
    one we may write, or the runner as their subreaper (forced by the tests' switch)."""
    if request.param == "subreaper":
        kairo.env["KAIRO_TEST_NO_CGROUP"] = "1"
    return str(request.param)


@pytest.fixture
def mark() -> Iterator[str]:
    """What the agent's processes carry in their environment; whatever carries it is
    killed once the test is over, passed or not (after its supervisor: ask for it before
    `kairo`, so that no new attempt starts more)."""
    token = uuid.uuid4().hex
    yield token
    for pids in marked(token).values():
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def start(kairo: Kairo, mark: str, mode: Mode, *, held: bool, name: str = "escape") -> None:
    script = "".join(f"    {line}\n" for line in agent_script(mark, held).splitlines())
    plan = kairo.write_plan(
        f"version: 1\nname: {name}\n{mode.plan}\nagent:\n  kind: shell\n  run: |\n{script}"
        "subtasks:\n  - id: a\n",
        f"{name}.yaml",
    )
    done = kairo.run("start", str(plan), "--detach")
    assert done.returncode == 0, done.stderr
    wait_for(lambda: all_three_alive(mark), seconds=30)


def cgroups_here() -> bool:
    """Whether this user may make a cgroup below its own (as the runner, in the tmux server
    this test starts, does)."""
    own = own_cgroup()
    return own is not None and os.access(own, os.W_OK) and os.access(f"{own}/cgroup.procs", os.W_OK)


def the_attempts_cgroup(kairo: Kairo, containment: str) -> str | None:
    """What the runner said holds the attempt's processes; asserts it is the one asked for."""
    if containment == "cgroup" and not cgroups_here():
        pytest.skip("no cgroup v2 this user may write here: the subreaper variant covers it")
    status = kairo.json("status")
    started = (Path(status["run_root"]) / "a" / "1" / "started.json").read_text()
    cgroup: str | None = json.loads(started).get("cgroup")
    if containment == "subreaper":
        assert cgroup is None
    else:
        assert cgroup is not None and Path(cgroup).name.startswith(CGROUP_PREFIX)
    return cgroup


def test_what_the_agent_left_running_ends_with_its_attempt(
    mark: str, kairo: Kairo, containment: str, mode: Mode
) -> None:
    start(kairo, mark, mode, held=True)
    cgroup = the_attempts_cgroup(kairo, containment)
    assert all_three_alive(mark)  # the attack is real: they run beside the agent

    released(kairo)
    wait_for(lambda: kairo.json("status")["status"] != "RUNNING", seconds=60)

    assert kairo.json("status")["status"] == "COMPLETED"
    assert marked(mark) == {}
    assert cgroup is None or not Path(cgroup).exists()


def test_what_the_agent_left_running_ends_at_stop_now(
    mark: str, kairo: Kairo, containment: str, mode: Mode
) -> None:
    start(kairo, mark, mode, held=False)
    cgroup = the_attempts_cgroup(kairo, containment)
    assert all_three_alive(mark)

    done = kairo.run("stop", "--now", "--wait")

    assert done.returncode == 0, done.stderr
    assert marked(mark) == {}
    assert cgroup is None or not Path(cgroup).exists()


def test_what_the_agent_left_running_ends_at_clean_of_a_crashed_execution(
    mark: str, kairo: Kairo, containment: str, mode: Mode
) -> None:
    start(kairo, mark, mode, held=False)
    cgroup = the_attempts_cgroup(kairo, containment)
    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGKILL)
    wait_for(lambda: kairo.json("status")["status"] == "PAUSED")
    assert all_three_alive(mark)  # a supervisor's death ends nothing of its agents

    done = kairo.run("clean", "--force")

    assert done.returncode == 0, done.stderr
    # The runner ends what it holds as its pane goes: within its grace for SIGTERM.
    wait_for(lambda: marked(mark) == {}, seconds=10)
    assert cgroup is None or not Path(cgroup).exists()


def kill_supervisor_and_runner(kairo: Kairo) -> None:
    """The supervisor killed with -9, and the attempt's runner too: nothing but the
    attempt's cgroup holds what its agent started."""
    status = kairo.json("status")
    runner = json.loads((Path(status["run_root"]) / "a" / "1" / "started.json").read_text())
    os.kill(status["supervisor_pid"], signal.SIGKILL)
    os.kill(runner["pid"], signal.SIGKILL)
    wait_for(lambda: kairo.json("status")["status"] == "PAUSED")


def test_a_crashed_executions_cgroup_is_found_and_ended_at_clean(
    mark: str, kairo: Kairo, mode: Mode
) -> None:
    start(kairo, mark, mode, held=False)
    cgroup = the_attempts_cgroup(kairo, "cgroup")
    kill_supervisor_and_runner(kairo)
    if mode.sandboxed:  # bubblewrap dies with the runner, and its process namespace with it
        wait_for(lambda: marked(mark) == {}, seconds=10)
        return
    assert all_three_alive(mark)  # and so do the agent's, in its cgroup

    done = kairo.run("clean", "--force")

    assert done.returncode == 0, done.stderr
    assert f"ended what still ran in cgroup {cgroup}, and removed it" in done.stdout
    assert marked(mark) == {}
    assert cgroup is not None and not Path(cgroup).exists()


def test_resume_ends_what_an_attempt_whose_runner_is_gone_left(
    mark: str, kairo: Kairo, mode: Mode
) -> None:
    start(kairo, mark, mode, held=False)
    cgroup = the_attempts_cgroup(kairo, "cgroup")
    kill_supervisor_and_runner(kairo)
    if mode.sandboxed:
        wait_for(lambda: marked(mark) == {}, seconds=10)
        return
    assert all_three_alive(mark)

    done = kairo.run("resume", "--wait")

    assert done.returncode == 1, done.stderr  # the attempt was interrupted: nothing merged
    assert kairo.json("status")["subtasks"][0]["state"] == "stopped"
    assert marked(mark) == {}
    assert cgroup is not None and not Path(cgroup).exists()
