"""TmuxServer against a real tmux server on a private socket."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from orchestrator.errors import EnvironmentProblem, StepFailed
from orchestrator.tmux.interactive import tmux_version
from orchestrator.tmux.layout import PaneRef
from orchestrator.tmux.server import TmuxServer
from tests.tmux.conftest import eventually, private_tmux_server, process_gone, tmux_out

IDLE = ["sleep", "600"]


async def _session(tmux: TmuxServer, tmp_path: Path, name: str = "kairo-t") -> str:
    return await tmux.new_session(name, window_name="supervisor", command=IDLE, cwd=tmp_path)


async def _windows(tmux: TmuxServer, session: str) -> list[tuple[str, int]]:
    text = await tmux_out(tmux, "list-windows", "-t", f"={session}", "-F", "#W #{window_panes}")
    return [(name, int(panes)) for name, panes in (line.split() for line in text.splitlines())]


async def test_new_session_is_detached_with_its_options(tmux: TmuxServer, tmp_path: Path) -> None:
    pane_id = await _session(tmux, tmp_path)

    assert pane_id.startswith("%")
    assert await tmux.has_session("kairo-t")
    assert not await tmux.has_session("kairo")  # exact names, not prefixes
    window = await tmux_out(
        tmux,
        "display-message",
        "-p",
        "-t",
        "=kairo-t:",
        "#{session_attached} #{window_name} #{window_width}x#{window_height}"
        " #{remain-on-exit} #{pane-border-status} #{history-limit} #{destroy-unattached}",
    )
    *shown, destroy_unattached = window.split()
    assert shown == ["0", "supervisor", "250x60", "on", "top", "50000"]
    assert destroy_unattached in ("0", "off")  # a flag before tmux 3.4, a choice since


async def test_a_session_whose_command_exits_survives_without_a_client(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    await tmux.new_session("kairo-t", window_name="w", command=["true"], cwd=tmp_path)

    async def pane_dead() -> bool:
        return (await tmux.list_panes("kairo-t"))[0].dead

    await eventually(pane_dead)
    assert await tmux.has_session("kairo-t")


async def test_new_session_passes_environment(tmux: TmuxServer, tmp_path: Path) -> None:
    out = tmp_path / "env.txt"
    command = ["sh", "-c", f'echo "$KAIRO_X" > {out}']
    await tmux.new_session(
        "kairo-t", window_name="w", command=command, cwd=tmp_path, environment={"KAIRO_X": "a;"}
    )
    await eventually(lambda: out.exists() and out.read_text() == "a;\n")


SECRETS = {
    "DEPLOY_TOKEN": "deploy-9f8e7d6c5b4a",
    "DATABASE_URL": "postgres://u:PASSWORD1234@db/shop",
    "BUILD_LABEL": "ghp_aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4",
}


async def test_a_server_we_start_keeps_no_secret_of_ours_for_its_panes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    async with private_tmux_server(monkeypatch) as tmux:
        await _session(tmux, tmp_path)
        global_environment = await tmux_out(tmux, "show-environment", "-g")
        session_environment = await tmux_out(tmux, "show-environment", "-t", "=kairo-t:")
        updated = await tmux_out(
            tmux, "show-options", "-v", "-t", "=kairo-t:", "update-environment"
        )
        # What an agent's pane needs of it is there: its programs, its socket.
        assert f"PATH={os.environ['PATH']}\n" in global_environment
        assert f"TMUX_TMPDIR={os.environ['TMUX_TMPDIR']}\n" in global_environment
    for value in SECRETS.values():
        assert value not in global_environment + session_environment
    assert updated.strip() == ""  # a client that attaches brings no SSH_AUTH_SOCK either

    # The attack is real: a server started with that environment as it is keeps it all.
    async with private_tmux_server(monkeypatch) as plain:
        assert plain.socket_name is not None
        await trio.run_process(["tmux", "-L", plain.socket_name, "-f", "/dev/null", "new", "-d"])
        shown = await tmux_out(plain, "show-environment", "-g")
    assert all(value in shown for value in SECRETS.values())


async def test_six_agent_panes_pack_four_and_two_with_titles(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    await _session(tmux, tmp_path)
    cwd = tmp_path

    refs = [
        await tmux.open_agent_pane("kairo-t", title=f"task-{i} · running", command=IDLE, cwd=cwd)
        for i in range(6)
    ]

    assert await _windows(tmux, "kairo-t") == [("supervisor", 1), ("agents-1", 4), ("agents-2", 2)]
    assert len({r.window_id for r in refs[:4]}) == 1
    assert refs[4].window_id == refs[5].window_id != refs[0].window_id
    panes = {p.pane_id: p for p in await tmux.list_panes("kairo-t")}
    assert [panes[r.pane_id].title for r in refs] == [f"task-{i} · running" for i in range(6)]
    assert all(not panes[r.pane_id].dead and panes[r.pane_id].pid > 0 for r in refs)
    border = await tmux_out(tmux, "display-message", "-p", "-t", refs[5].pane_id, "#{pane_title}")
    assert border.strip() == "task-5 · running"
    # tiled: the four panes of a full window share its area about equally
    sizes = await tmux_out(
        tmux, "list-panes", "-t", refs[0].window_id, "-F", "#{pane_width}x#{pane_height}"
    )
    widths, heights = zip(*(map(int, size.split("x")) for size in sizes.split()), strict=True)
    assert max(widths) - min(widths) <= 2 and max(heights) - min(heights) <= 2


async def _open_at_once(
    tmux: TmuxServer,
    cwd: Path,
    count: int,
    command: Callable[[int], list[str]] = lambda _: IDLE,
    **placing: Any,
) -> dict[int, PaneRef]:
    """`count` agent panes asked for from as many tasks at once, by number (titles t0...)."""
    refs: dict[int, PaneRef] = {}

    async def open_one(i: int) -> None:
        refs[i] = await tmux.open_agent_pane(
            "kairo-t", title=f"t{i}", command=command(i), cwd=cwd, **placing
        )

    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(open_one, i)
    return refs


async def test_open_agent_pane_from_many_tasks_at_once(tmux: TmuxServer, tmp_path: Path) -> None:
    await _session(tmux, tmp_path)
    refs = list((await _open_at_once(tmux, tmp_path, 10)).values())

    assert len({r.pane_id for r in refs}) == 10
    assert await _windows(tmux, "kairo-t") == [
        ("supervisor", 1),
        ("agents-1", 4),
        ("agents-2", 4),
        ("agents-3", 2),
    ]


def _counting_tmux(tmp_path: Path) -> tuple[str, Path]:
    """A tmux that logs each invocation (its first command) before it runs the real one."""
    log = tmp_path / "tmux-calls"
    wrapper = tmp_path / "tmux"
    real = shutil.which("tmux")
    wrapper.write_text(f'#!/bin/sh\necho "$3 $4 $5" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper), log


async def test_panes_asked_for_at_once_open_in_one_tmux_call(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    await _session(tmux, tmp_path)
    tmux_bin, calls = _counting_tmux(tmp_path)
    counted = TmuxServer(tmux.socket_name, tmux_bin=tmux_bin)
    refs = await _open_at_once(counted, tmp_path, 10, command=lambda i: [*IDLE, str(i)])

    # where the windows are, then every pane in one call
    assert calls.read_text().splitlines() == ["list-panes -s -t", "new-window -d -t"]
    assert await _windows(tmux, "kairo-t") == [
        ("supervisor", 1),
        ("agents-1", 4),
        ("agents-2", 4),
        ("agents-3", 2),
    ]
    panes = {p.pane_id: p for p in await tmux.list_panes("kairo-t")}
    assert [panes[refs[i].pane_id].title for i in range(10)] == [f"t{i}" for i in range(10)]
    commands = await tmux_out(
        tmux, "list-panes", "-s", "-t", "=kairo-t", "-F", "#{pane_id} #{pane_start_command}"
    )
    started = dict(line.split(" ", 1) for line in commands.splitlines())
    assert [started[refs[i].pane_id].split()[-1] for i in range(10)] == [str(i) for i in range(10)]
    # the packing after the call is right: the next pane goes into agents-3
    ref = await counted.open_agent_pane("kairo-t", title="t10", command=IDLE, cwd=tmp_path)
    last = max(refs.values(), key=lambda r: int(r.pane_id.removeprefix("%")))
    assert ref.window_id == last.window_id


async def test_the_server_that_made_the_session_opens_its_first_panes_without_asking(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    tmux_bin, calls = _counting_tmux(tmp_path)
    counted = TmuxServer(tmux.socket_name, tmux_bin=tmux_bin)
    await _session(counted, tmp_path)
    await _open_at_once(counted, tmp_path, 5)

    assert calls.read_text().splitlines() == ["new-session -d -s", "new-window -d -t"]
    assert await _windows(tmux, "kairo-t") == [("supervisor", 1), ("agents-1", 4), ("agents-2", 1)]


async def test_panes_a_chained_call_could_not_open_are_opened_one_by_one(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    # A window of 10x4 has room for two panes: the chain stops at its second split.
    await tmux.new_session(
        "kairo-t", window_name="supervisor", command=IDLE, cwd=tmp_path, width=10, height=4
    )
    refs = list((await _open_at_once(tmux, tmp_path, 6)).values())

    assert len({r.pane_id for r in refs}) == 6
    panes = await tmux.list_panes("kairo-t")
    assert len(panes) == 7 and not any(p.dead for p in panes)
    windows = await _windows(tmux, "kairo-t")
    assert sum(n for name, n in windows if name.startswith("agents-")) == 6


async def test_a_new_server_object_keeps_filling_the_last_window(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    await _session(tmux, tmp_path)
    for _ in range(5):
        await tmux.open_agent_pane("kairo-t", title="a", command=IDLE, cwd=tmp_path)
    resumed = TmuxServer(tmux.socket_name)  # a supervisor restarted after a crash

    await resumed.open_agent_pane("kairo-t", title="b", command=IDLE, cwd=tmp_path)

    assert await _windows(tmux, "kairo-t") == [("supervisor", 1), ("agents-1", 4), ("agents-2", 2)]


async def test_a_window_closed_behind_our_back_gets_replaced(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    await _session(tmux, tmp_path)
    first = await tmux.open_agent_pane("kairo-t", title="a", command=IDLE, cwd=tmp_path)
    await tmux_out(tmux, "kill-window", "-t", first.window_id)

    second = await tmux.open_agent_pane("kairo-t", title="b", command=IDLE, cwd=tmp_path)

    assert second.window_id != first.window_id
    # its number is free again: the new window takes it
    assert await _windows(tmux, "kairo-t") == [("supervisor", 1), ("agents-1", 1)]


def _agent(i: int) -> list[str]:
    """An idle agent pane's command, which names it (`ours`) as a runner's names its spec."""
    return ["/bin/sh", "-c", "exec sleep 600", f"agent-{i}."]


def _ours(refs: list[PaneRef], *numbers: int) -> dict[str, str]:
    """Panes `_open_in_turn` opened, by number, each with what its command names."""
    return {refs[i].pane_id: f"agent-{i}." for i in numbers}


async def _open_in_turn(tmux: TmuxServer, cwd: Path, count: int, **placing: Any) -> list[PaneRef]:
    """`count` agent panes opened one after another (titles t0..., commands `_agent`)."""
    return [
        await tmux.open_agent_pane("kairo-t", title=f"t{i}", command=_agent(i), cwd=cwd, **placing)
        for i in range(count)
    ]


async def test_closed_panes_go_and_their_emptied_window_with_them(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    await _session(tmux, tmp_path)
    refs = await _open_in_turn(tmux, tmp_path, 6)

    await tmux.close_panes("kairo-t", _ours(refs, 1, 4, 5))

    assert await _windows(tmux, "kairo-t") == [("supervisor", 1), ("agents-1", 3)]
    left = {p.pane_id for p in await tmux.list_panes("kairo-t")}
    assert left >= {refs[i].pane_id for i in (0, 2, 3)} and len(left) == 4
    # the hole in agents-1 is filled first, then agents-2 comes back
    again = await _open_in_turn(tmux, tmp_path, 2)
    assert again[0].window_id == refs[0].window_id
    assert await _windows(tmux, "kairo-t") == [("supervisor", 1), ("agents-1", 4), ("agents-2", 1)]


async def test_closing_a_pane_already_gone_closes_the_others(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    await _session(tmux, tmp_path)
    refs = await _open_in_turn(tmux, tmp_path, 3)
    await tmux_out(tmux, "kill-pane", "-t", refs[0].pane_id)  # by hand

    await tmux.close_panes("kairo-t", _ours(refs, 0, 1))

    assert [p.pane_id for p in await tmux.list_panes("kairo-t")][1:] == [refs[2].pane_id]
    # nor is a closed pane retitled (a tmux call that would fail)
    await tmux.set_pane_title(refs[1].pane_id, "agent-1.", "t1 · merged")


async def test_a_pane_whose_command_names_another_is_not_closed(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    # A tmux server started again numbers its panes anew: the id an ended attempt's pane
    # had may now be a running agent's. A new server object reads the commands from tmux.
    await _session(tmux, tmp_path)
    refs = await _open_in_turn(tmux, tmp_path, 2)
    resumed = TmuxServer(tmux.socket_name)

    await resumed.close_panes("kairo-t", {refs[0].pane_id: "agent-7.", **_ours(refs, 1)})

    assert [p.pane_id for p in await tmux.list_panes("kairo-t")][1:] == [refs[0].pane_id]


async def test_a_pane_whose_id_a_new_server_gave_another_is_not_retitled(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    # The log names an ended attempt's pane by the id a tmux server gave it; once that
    # server was killed and started again, the id may be a running agent's pane.
    await _session(tmux, tmp_path)
    (before,) = await _open_in_turn(tmux, tmp_path, 1)
    await tmux.kill_server()
    await _session(tmux, tmp_path)
    now = await tmux.open_agent_pane("kairo-t", title="t7", command=_agent(7), cwd=tmp_path)
    assert now.pane_id == before.pane_id  # numbered anew

    async def title() -> str:
        return (
            await tmux_out(tmux, "show-options", "-p", "-v", "-t", now.pane_id, "@kairo_title")
        ).strip()

    for server in (tmux, TmuxServer(tmux.socket_name)):  # this one, and a resumed one's
        await server.set_pane_title(before.pane_id, "agent-0.", "t0 · merged")
        assert await title() == "t7"
    await TmuxServer(tmux.socket_name).set_pane_title(now.pane_id, "agent-7.", "t7 · merged")
    assert await title() == "t7 · merged"


async def test_at_the_window_bound_an_ended_pane_makes_room(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    await _session(tmux, tmp_path)
    # two agents at once, two panes a window: one window for them and one more
    refs = await _open_in_turn(tmux, tmp_path, 4, panes_per_window=2, max_parallel=2)
    assert await _windows(tmux, "kairo-t") == [("supervisor", 1), ("agents-1", 2), ("agents-2", 2)]

    ended = _ours(refs, 2, 0)  # oldest ended first
    recycled = await _open_at_once(
        tmux, tmp_path, 2, panes_per_window=2, max_parallel=2, recyclable=ended
    )

    left = {p.pane_id for p in await tmux.list_panes("kairo-t")}
    assert refs[0].pane_id not in left and refs[2].pane_id not in left
    assert {r.pane_id for r in recycled.values()} < left
    assert await _windows(tmux, "kairo-t") == [("supervisor", 1), ("agents-1", 2), ("agents-2", 2)]
    # without a pane to close, the bound gives way: a running agent's pane is never closed
    await tmux.open_agent_pane(
        "kairo-t", title="x", command=IDLE, cwd=tmp_path, panes_per_window=2, max_parallel=2
    )
    assert len(await _windows(tmux, "kairo-t")) == 4


@pytest.mark.parametrize(
    "args",
    [
        ["a;", ";", "b\\;", "it's", "$HOME", "#{pane_id}", "two words", "", "--", "-x"],
        ["x; rm -rf /tmp/nothing"],
    ],
)
async def test_pane_commands_reach_the_program_verbatim(
    tmux: TmuxServer, tmp_path: Path, args: list[str]
) -> None:
    await _session(tmux, tmp_path)
    out = tmp_path / "argv.json"
    script = (  # write, then rename: the test must not read a half-written file
        f"import json, os, sys; open({str(out)!r} + '.tmp', 'w').write(json.dumps(sys.argv[1:]));"
        f" os.replace({str(out)!r} + '.tmp', {str(out)!r})"
    )
    weird_cwd = tmp_path / "a #dir; x"
    weird_cwd.mkdir()

    await tmux.open_agent_pane(
        "kairo-t", title="x; #{y}", command=[sys.executable, "-c", script, *args], cwd=weird_cwd
    )

    await eventually(out.exists)
    assert json.loads(out.read_text()) == args
    titles = [p.title for p in await tmux.list_panes("kairo-t")]
    assert titles[-1] == "x; #{y}"


async def test_a_one_word_command_is_executed_not_given_to_a_shell(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    script = tmp_path / "it's a script"
    marker = tmp_path / "ran"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    script.chmod(0o755)

    await tmux.new_session("kairo-t", window_name="w", command=[str(script)], cwd=tmp_path)

    await eventually(marker.exists)


async def test_set_pane_title_and_a_pane_that_is_gone(tmux: TmuxServer, tmp_path: Path) -> None:
    pane_id = await _session(tmux, tmp_path)
    await tmux.set_pane_title(pane_id, "sleep", "merged\tok\n")
    assert [p.title for p in await tmux.list_panes("kairo-t")] == [r"merged\tok"]

    await tmux.open_agent_pane("kairo-t", title="keep", command=IDLE, cwd=tmp_path)
    await tmux_out(tmux, "kill-pane", "-t", pane_id)
    await tmux.set_pane_title(pane_id, "sleep", "too late")  # cosmetic: no error


async def test_a_pane_is_not_retitled_with_the_title_it_has(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    await _session(tmux, tmp_path)
    ref = await tmux.open_agent_pane("kairo-t", title="a · running", command=IDLE, cwd=tmp_path)

    async def shown() -> str:
        return (
            await tmux_out(tmux, "show-options", "-p", "-v", "-t", ref.pane_id, "@kairo_title")
        ).strip()

    # Changed behind its back, so that a tmux call for the same title would show.
    await tmux_out(tmux, "set-option", "-p", "-t", ref.pane_id, "@kairo_title", "moved")
    await tmux.set_pane_title(ref.pane_id, "sleep", "a · running")  # the title it was opened with
    assert await shown() == "moved"
    await tmux.set_pane_title(ref.pane_id, "sleep", "a · verifying")
    assert await shown() == "a · verifying"
    await tmux.set_pane_title(ref.pane_id, "sleep", "a · running")
    assert await shown() == "a · running"


async def test_kill_session_is_idempotent(tmux: TmuxServer, tmp_path: Path) -> None:
    await _session(tmux, tmp_path, "kairo-a")
    await _session(tmux, tmp_path, "kairo-b")

    await tmux.kill_session("kairo-a")
    await tmux.kill_session("kairo-a")

    assert not await tmux.has_session("kairo-a")
    assert await tmux.has_session("kairo-b")


async def test_errors_say_what_failed(tmux: TmuxServer, tmp_path: Path) -> None:
    await _session(tmux, tmp_path)
    with pytest.raises(StepFailed, match=r"tmux new-session failed on socket .*duplicate session"):
        await _session(tmux, tmp_path)
    with pytest.raises(StepFailed, match=r"tmux list-panes failed .*nope"):
        await tmux.list_panes("nope")
    with pytest.raises(ValueError, match=r"contains '\.' or ':'"):
        await _session(tmux, tmp_path, "kairo-a.b")


async def test_kill_server_returns_once_the_server_is_gone(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    await _session(tmux, tmp_path)
    pid = int(await tmux_out(tmux, "display-message", "-p", "#{pid}"))

    await tmux.kill_server()

    assert process_gone(pid)
    assert not await tmux.has_session("kairo-t")
    await tmux.kill_server()  # no server: nothing to do


async def test_wait_for_is_woken_by_signal(tmux: TmuxServer, tmp_path: Path) -> None:
    await _session(tmux, tmp_path)
    woken = trio.Event()

    async def waiter() -> None:
        await tmux.wait_for("ch")
        woken.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(0.1)
        assert not woken.is_set()
        await tmux.signal("ch")
        with trio.fail_after(2):
            await woken.wait()


async def test_a_signal_before_the_wait_is_remembered_once(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    await _session(tmux, tmp_path)
    await tmux.signal("ch")

    with trio.fail_after(2):
        await tmux.wait_for("ch")
    with trio.move_on_after(0.1) as second:
        await tmux.wait_for("ch")
    assert second.cancelled_caught


async def test_two_signals_before_a_wait_cancel_out(tmux: TmuxServer, tmp_path: Path) -> None:
    """tmux behaviour the supervisor must live with: with nobody waiting, a second signal
    clears the first. Runners sharing one channel can therefore lose a wake-up."""
    await _session(tmux, tmp_path)
    await tmux.signal("ch")
    await tmux.signal("ch")

    with trio.move_on_after(0.1) as wait:
        await tmux.wait_for("ch")
    assert wait.cancelled_caught


async def test_a_cancelled_wait_does_not_swallow_the_next_signal(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    await _session(tmux, tmp_path)
    with trio.move_on_after(0.1):
        await tmux.wait_for("ch")

    await tmux.signal("ch")
    with trio.fail_after(2):
        await tmux.wait_for("ch")


async def test_cancelling_a_wait_is_prompt(tmux: TmuxServer, tmp_path: Path) -> None:
    await _session(tmux, tmp_path)
    start = trio.current_time()
    with trio.move_on_after(0.1):
        await tmux.wait_for("ch")
    assert trio.current_time() - start < 0.5


async def test_a_wait_ends_when_the_server_goes_away(tmux: TmuxServer, tmp_path: Path) -> None:
    await _session(tmux, tmp_path)
    with trio.fail_after(2):  # a wake-up is a hint: the caller looks at the world again
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tmux.wait_for, "ch")
            await trio.sleep(0.05)
            await tmux.kill_server()


async def test_wait_for_without_a_server_fails(tmux: TmuxServer) -> None:
    with pytest.raises(StepFailed, match=r"no server running|error connecting"):
        await tmux.wait_for("ch")


def test_tmux_version() -> None:
    assert tmux_version() >= (3, 2)


def test_tmux_version_refuses_a_missing_or_old_tmux(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="tmux is not installed"):
        tmux_version(str(tmp_path / "tmux"))
    old = tmp_path / "old-tmux"
    old.write_text("#!/bin/sh\necho 'tmux 2.9a'\n")
    old.chmod(0o755)
    with pytest.raises(EnvironmentProblem, match=r"tmux 2\.9a is too old"):
        tmux_version(str(old))


async def test_a_missing_tmux_is_an_environment_problem() -> None:
    server = TmuxServer("kairo-test-none", tmux_bin="/nonexistent/tmux")
    with pytest.raises(EnvironmentProblem, match="tmux is not installed"):
        await server.has_session("x")
