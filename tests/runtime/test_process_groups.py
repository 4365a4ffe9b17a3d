"""Stopping an agent's process group for real: a child and its grandchild both go."""

from __future__ import annotations

import subprocess

import trio

from orchestrator.runtime.process_groups import group_alive, stop_group


def spawn_group(script: str) -> subprocess.Popen[bytes]:
    """A shell as the leader of a process group of its own, like an agent under its runner."""
    return subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True)


async def test_stop_group_ends_a_child_and_its_grandchild() -> None:
    process = spawn_group("sleep 60 & sleep 60; wait")
    try:
        assert await trio.to_thread.run_sync(group_alive, process.pid)
        await stop_group(process.pid, grace=2.0)
        assert not await trio.to_thread.run_sync(group_alive, process.pid)
    finally:
        process.kill()
        process.wait()


async def test_a_group_that_ignores_sigterm_is_killed_after_the_grace_period() -> None:
    process = spawn_group("trap '' TERM; sleep 60 & wait")
    try:
        with trio.fail_after(5):
            await stop_group(process.pid, grace=0.3)
        await trio.sleep(0.2)
        assert not await trio.to_thread.run_sync(group_alive, process.pid)
    finally:
        process.kill()
        process.wait()
