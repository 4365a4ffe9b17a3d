"""`attach`, and `watch`: the live view that runs in each execution's supervisor window."""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import sys
import termios
import time
import tty
from collections.abc import Callable, Iterator
from pathlib import Path

import click
from rich.console import Group
from rich.live import Live

from orchestrator.app.live_pages import Page, Pager, overlap_line
from orchestrator.app.watching import Look, attach_to, follow, session_of
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
    pager = Pager()
    with _keys(pager) as pause:
        _show(follow(repo, store_url, execution, pause), pager)
    # The last frame stays on screen while the window is open, which may be for days: this
    # interpreter (tens of MB) gives way to a shell that only sleeps. A resume that reopens the
    # execution starts a new view in its place (runtime/daemon.py).
    sys.stdout.flush()
    os.execv("/bin/sh", ["/bin/sh", "-c", "while :; do sleep 86400; done"])


#: Lines of the live view besides the rows of its table: the header's two, the page line,
#: the output line, the table's header, the footer, and one to spare.
_OTHER_LINES = 7


def _show(looks: Iterator[Look], pager: Pager) -> None:
    first = next(looks)  # an unknown ID is refused before the screen is taken
    shown: tuple[object, ...] | None = None
    with Live(auto_refresh=False, console=render.console()) as live:
        for look in itertools.chain([first], looks):
            overlaps = overlap_line(look.document)
            rows = live.console.size.height - _OTHER_LINES - (overlaps is not None)
            page = pager.cut(look.document, rows)
            # Drawing is most of a look's cost: only for a change of what the page shows,
            # or a resize (a client of another size attached), which leaves the old frame
            # wrapped. A thousand subtasks are drawn a page at a time.
            seen = (page, look.document["status"], look.ended, live.console.size, overlaps)
            if seen != shown:
                live.update(_frame(look, page, overlaps), refresh=True)
                shown = seen


def _frame(look: Look, page: Page, overlaps: str | None) -> Group:
    document = look.document
    paging = (
        f"  page {page.number}/{page.pages} (n or space: next, p: previous)"
        if page.pages > 1
        else ""
    )
    footer = (
        "ended: `kairo-orch report` tells what merged; this window stays open"
        if look.ended
        else "agents run in the other windows (C-b n / C-b w)"
    )
    return Group(
        render.status_header(document),
        f"{page.counts}{paging}",
        "agent output, kept once a pane is closed: "
        f"{render.as_markup(document['run_root'])}/<subtask>/<attempt>/output.log",
        render.status_table(page.subtasks, run_root=document["run_root"]),
        *([f"[yellow]{render.as_markup(overlaps)}[/]"] if overlaps else []),
        footer,
    )


_TURNS = {"n": 1, " ": 1, "p": -1, "b": -1}


@contextlib.contextmanager
def _keys(pager: Pager) -> Iterator[Callable[[float], None]]:
    """A pause between looks that turns `pager`'s pages as keys come (n or space, p or b)
    and ends at once when one does; a plain sleep where stdin is no terminal."""
    if not sys.stdin.isatty():
        yield time.sleep
        return
    fd = sys.stdin.fileno()
    before = termios.tcgetattr(fd)
    tty.setcbreak(fd)  # keys as they are typed, not echoed; Ctrl-C still interrupts

    def pause(seconds: float) -> None:
        ready, _, _ = select.select([fd], [], [], seconds)
        if ready:
            for key in os.read(fd, 64).decode(errors="replace"):
                pager.turn(_TURNS.get(key, 0))

    try:
        yield pause
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, before)
