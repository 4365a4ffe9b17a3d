"""The CLI's synchronous tmux calls, against a private server."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import EnvironmentProblem, StepFailed
from orchestrator.tmux.interactive import attach_session, has_session_sync
from orchestrator.tmux.server import TmuxServer


async def test_has_session_sync(tmux: TmuxServer, tmp_path: Path) -> None:
    assert not has_session_sync(tmux.socket_name, "kairo-t")  # no server yet
    await tmux.new_session("kairo-t", window_name="w", command=["sleep", "60"], cwd=tmp_path)

    assert has_session_sync(tmux.socket_name, "kairo-t")
    assert not has_session_sync(tmux.socket_name, "kairo")


def test_has_session_sync_without_tmux() -> None:
    with pytest.raises(EnvironmentProblem, match="tmux is not installed"):
        has_session_sync("kairo-test-none", "x", tmux_bin="/nonexistent/tmux")


async def test_attach_to_a_missing_session_says_so(tmux: TmuxServer) -> None:
    assert tmux.socket_name is not None
    with pytest.raises(StepFailed, match="no tmux session 'nope'"):
        attach_session(tmux.socket_name, "nope")
