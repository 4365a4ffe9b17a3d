"""The live view waits for the supervisor's first agents (daemon.gated, LiveViewGate)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from orchestrator.core.ids import live_view_channel
from orchestrator.runtime.daemon import gated
from orchestrator.runtime.supervisor import LiveViewGate
from orchestrator.tmux.server import TmuxServer
from tests.tmux.conftest import eventually, private_tmux_server

CHANNEL = "kairo-live-test"


async def _gated_marker(tmux: TmuxServer, directory: Path, wait_s: float) -> Path:
    """A session whose pane touches a file once CHANNEL is signalled or `wait_s` went by."""
    marker = directory / "ran"
    command = gated(["touch", str(marker)], CHANNEL, wait_s)
    await tmux.new_session("kairo-t", window_name="supervisor", command=command, cwd=directory)
    return marker


async def test_the_gated_command_runs_once_its_channel_is_signalled(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with private_tmux_server(monkeypatch) as tmux:
        marker = await _gated_marker(tmux, tmp_path, wait_s=30)
        await trio.sleep(0.3)
        assert not marker.exists()

        await tmux.signal(CHANNEL)

        await eventually(marker.exists, seconds=2)


async def test_the_gated_command_runs_anyway_after_its_wait(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with private_tmux_server(monkeypatch) as tmux:
        marker = await _gated_marker(tmux, tmp_path, wait_s=0.5)
        await eventually(marker.exists, seconds=3)


async def test_the_gate_opens_once_the_first_agents_are_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    starting = {("PrepareWorkspace", "a", 0), ("AwaitAttempt", "b", 1)}
    running = {("AwaitAttempt", "a", 1), ("AwaitAttempt", "b", 1)}
    async with private_tmux_server(monkeypatch) as tmux:
        await tmux.new_session("kairo-t", window_name="s", command=["sleep", "60"], cwd="/")
        gate = LiveViewGate(tmux, "01EXECUTION")
        channel = live_view_channel("01EXECUTION")
        async with trio.open_nursery() as nursery:
            gate.look(set(), nursery)  # nothing that starts agents yet
            gate.look(starting, nursery)
            with trio.move_on_after(0.3) as waited:
                await tmux.wait_for(channel)
            assert waited.cancelled_caught  # not while agents are being started

            gate.look(running, nursery)

            with trio.fail_after(2):
                await tmux.wait_for(channel)
