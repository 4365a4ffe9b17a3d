"""`attach`, and `watch`: the live view that runs in each execution's supervisor window."""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import click
from rich.console import Group
from rich.live import Live

from orchestrator.app.watching import attach_to, follow, session_of
from orchestrator.cli import render
from orchestrator.cli.options import common_options
from orchestrator.errors import UsageError


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@common_options
def attach(execution: str | None, repo: Path, store_url: str | None) -> None:
    """Attach to (or switch to) the execution's tmux session."""
    session = session_of(repo, store_url, execution)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            f"attach needs a terminal; from a script, use `tmux"
            f"{' -L ' + session.socket if session.socket else ''} "
            f"capture-pane -p -t {session.name}`"
        )
    attach_to(session)


@click.command(hidden=True)
@click.argument("execution", metavar="ID")
@click.option(
    "--store-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the store URL from this file (empty: the default store), not --store.",
)
@common_options
def watch(execution: str, store_file: Path | None, repo: Path, store_url: str | None) -> None:
    """The supervisor window: every subtask's state, refreshed live."""
    if store_file is not None:  # the supervisor's live view (daemon.write_live_view_store)
        store_url = store_file.read_text(encoding="utf-8").strip() or None
    looks = follow(repo, store_url, execution)
    first = next(looks)  # an unknown ID is refused before the screen is taken
    shown: tuple[object, ...] | None = None
    with Live(auto_refresh=False, console=render.console()) as live:
        for look in itertools.chain([first], looks):
            # Drawing is most of a look's cost: only for a change, or a resize (a client
            # of another size attached), which leaves the old frame wrapped.
            seen = (look.document, live.console.size)
            if seen != shown:
                footer = (
                    "ended: `kairo-orch report` tells what merged; this window stays open"
                    if look.ended
                    else "agents run in the other windows (C-b n / C-b w)"
                )
                live.update(
                    Group(
                        render.status_header(look.document),
                        render.status_table(look.document["subtasks"]),
                        footer,
                    ),
                    refresh=True,
                )
                shown = seen
    # The last frame stays on screen while the window is open, which may be for days: this
    # interpreter (tens of MB) gives way to a shell that only sleeps. A resume that reopens the
    # execution starts a new view in its place (runtime/daemon.py).
    sys.stdout.flush()
    os.execv("/bin/sh", ["/bin/sh", "-c", "while :; do sleep 86400; done"])
