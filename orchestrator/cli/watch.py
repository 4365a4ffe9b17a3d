"""`attach`, and `watch`: the live view that runs in each execution's supervisor window."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import click
from rich.console import Group
from rich.live import Live

from orchestrator.cli import render
from orchestrator.cli.context import common_options, open_workspace
from orchestrator.core.status import status_document
from orchestrator.errors import EnvironmentProblem, UsageError

REFRESH_SECONDS = 0.5


@click.command()
@click.argument("execution", required=False)
@common_options
def attach(execution: str | None, repo: Path, store_url: str | None) -> None:
    """Attach to (or switch to) the execution's tmux session."""
    with open_workspace(repo, store_url) as ws:
        state = ws.state(ws.resolve(execution))
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            f"attach needs a terminal; from a script, use `tmux"
            f"{' -L ' + state.created.tmux_socket if state.created.tmux_socket else ''} "
            f"capture-pane -p -t {state.created.tmux_session}`"
        )
    exec_tmux(state.created.tmux_socket, state.created.tmux_session)


def exec_tmux(socket_name: str | None, session: str) -> None:
    """Replace this process with a tmux client on the session (switching when inside tmux)."""
    tmux = shutil.which("tmux")
    if tmux is None:
        raise EnvironmentProblem("tmux is not installed")
    base = [tmux] + (["-L", socket_name] if socket_name else [])
    inside = os.environ.get("TMUX", "")
    same_server = bool(inside) and (socket_name is None or f"/{socket_name}," in inside)
    if same_server:
        os.execv(tmux, [*base, "switch-client", "-t", f"={session}"])
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}  # nesting on another server
    os.execve(tmux, [*base, "attach-session", "-t", f"={session}"], env)


@click.command(hidden=True)
@click.argument("execution")
@common_options
def watch(execution: str, repo: Path, store_url: str | None) -> None:
    """The supervisor window: every subtask's state, refreshed live."""
    with open_workspace(repo, store_url) as ws:
        execution_id = ws.resolve(execution)
        with Live(auto_refresh=False, console=render.console()) as live:
            while True:
                row = ws.row(execution_id)
                state = ws.state(execution_id)
                document = status_document(
                    state,
                    status=ws.status_of(state, row),
                    version=row.version,
                    head_seq=row.head_seq,
                    head_hash=row.head_hash,
                )
                footer = (
                    "ended: `kairo-orch report` tells what merged; this window stays open"
                    if state.ended
                    else "agents run in the other windows (C-b n / C-b w)"
                )
                live.update(
                    Group(render.status_header(document), render.status_table(document), footer),
                    refresh=True,
                )
                time.sleep(REFRESH_SECONDS)
