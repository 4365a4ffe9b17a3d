"""Watching an execution: its tmux session (`attach`), and its state as it changes (the
live view of `watch`). Light: no trio."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.app.project import open_project
from orchestrator.core.ids import worker_tmux_socket
from orchestrator.runtime.ownership import local_owner_pid
from orchestrator.runtime.state_reader import advance_state
from orchestrator.tmux.interactive import attach_session

REFRESH_SECONDS = 0.5


@dataclass(frozen=True)
class Session:
    """An execution's tmux session, on the tmux server `socket` names (None: the user's)."""

    socket: str | None
    name: str


def session_of(repo: Path, store_url: str | None, execution: str | None) -> Session:
    """The execution's session on this host: its owner's (the live view, and the agents'
    panes), or, on a worker host of a `placement: workers` execution owned elsewhere, the
    worker's (the panes of the subtasks it runs)."""
    with open_project(repo, store_url, create=False) as project:
        execution_id = project.resolve_own(execution, placed_anywhere=True)
        state = project.state(execution_id)
        owned_here = local_owner_pid(project.row(execution_id)) is not None
    here = socket.gethostname()
    if not owned_here and any(a.host == here for a in state.assignments.values()):
        return Session(worker_tmux_socket(here), state.created.tmux_session)
    return Session(state.created.tmux_socket, state.created.tmux_session)


def attach_to(session: Session) -> None:
    """Attach this terminal to `session` (or switch to it, from inside tmux)."""
    attach_session(session.socket, session.name)


@dataclass(frozen=True)
class Look:
    document: dict[str, Any]  # as `status --json`
    ended: bool


def follow(
    repo: Path,
    store_url: str | None,
    execution: str,
    pause: Callable[[float], None] = time.sleep,
) -> Iterator[Look]:
    """The execution's status every REFRESH_SECONDS (`pause` may end a wait early: a key
    pressed), reading only what was appended since the last look, until (and including)
    the look that finds it ended."""
    with open_project(repo, store_url, create=False) as project:
        execution_id = project.resolve(execution)
        state = project.state(execution_id)
        while True:
            row = project.row(execution_id)
            state = advance_state(project.store, state)
            yield Look(project.document(state, row), ended=state.ended is not None)
            if state.ended:
                return
            pause(REFRESH_SECONDS)
