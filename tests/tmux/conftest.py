"""A private tmux server per test (`-L kairo-test-<uuid>`), killed and waited for on teardown.

No test ever talks to the user's default server, and no user configuration is loaded.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
import trio

from orchestrator.tmux.server import TmuxServer

POLL_SECONDS = 0.01


@asynccontextmanager
async def private_tmux_server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[TmuxServer]:
    # A private TMUX_TMPDIR as well as a private socket name: even a tmux call that forgot
    # -L cannot reach the user's server, and the socket file tmux leaves behind goes away.
    # (Short and under /tmp: a socket path must fit in 108 bytes.)
    directory = tempfile.mkdtemp(prefix="kairo-tmux-", dir="/tmp")
    monkeypatch.setenv("TMUX_TMPDIR", directory)
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("TMUX_PANE", raising=False)
    server = TmuxServer(f"kairo-test-{uuid.uuid4().hex[:12]}", config_file="/dev/null")
    try:
        yield server
    finally:
        try:
            with trio.CancelScope(shield=True):  # a failed or cancelled test still cleans up
                await server.kill_server()
        finally:
            shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
async def tmux(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[TmuxServer]:
    async with private_tmux_server(monkeypatch) as server:
        yield server


def split_chain(argv: list[str]) -> list[list[str]]:
    """The commands of a chained tmux argv (layout.chain), one list each."""
    commands: list[list[str]] = [[]]
    for arg in argv:
        if arg == ";":
            commands.append([])
        else:
            commands[-1].append(arg)
    return commands


async def tmux_out(server: TmuxServer, *args: str) -> str:
    """Raw tmux on the test's server, for looking at what the code under test did."""
    assert server.socket_name is not None  # never the default server
    argv = ["tmux", "-L", server.socket_name, *args]
    done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"tmux {' '.join(args)} failed: {done.stderr.decode()}")
    return done.stdout.decode()


async def eventually(
    check: Callable[[], Awaitable[bool]] | Callable[[], bool], *, seconds: float = 5.0
) -> None:
    """Poll `check` every few ms until it holds; fail after `seconds`."""
    with trio.move_on_after(seconds):
        while True:
            result = check()
            if not isinstance(result, bool):
                result = await result
            if result:
                return
            await trio.sleep(POLL_SECONDS)
    raise AssertionError(f"{getattr(check, '__name__', check)} did not hold within {seconds} s")


def process_gone(pid: int) -> bool:
    """Exited, or a zombie (this machine's init does not reap orphans)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except FileNotFoundError:
        return True
