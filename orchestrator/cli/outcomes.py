"""What a command does with an execution a supervisor took over: say so, then wait for its
end (`--wait`), attach to its tmux session (a terminal, no `--detach`) or return; and the
exit codes of an end (cli.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator.app.notes import Note
from orchestrator.app.results import Ended, Launched
from orchestrator.app.waiting import wait_for_end
from orchestrator.app.watching import Session, attach_to
from orchestrator.cli import words
from orchestrator.core.inert_text import inert

EXIT_FAILED = 1
EXIT_SUPERVISOR_DIED = 6
EXIT_SIGINT = 130


def echo_note(note: Note) -> None:
    click.echo(inert(words.note(note), lines=True), err=True)


def after_launch(
    launched: Launched, *, wait: bool, detach: bool, repo: Path, store_url: str | None
) -> None:
    click.echo(inert(words.launched(launched)), err=True)  # a branch name of the plan's
    if not sys.stdout.isatty():  # for a script: `id=$(kairo-orch start plan.yaml --detach)`
        click.echo(launched.execution_id)
    if wait:
        raise SystemExit(
            wait_exit_code(repo, store_url, launched.execution_id, after_seq=launched.seq)
        )
    if sys.stdin.isatty() and sys.stdout.isatty() and not detach:
        attach_to(Session(launched.tmux_socket, launched.tmux_session))
        return
    click.echo(words.how_to_watch(launched.execution_id), err=True)


def wait_exit_code(
    repo: Path,
    store_url: str | None,
    execution_id: str,
    *,
    after_seq: int = -1,
    success: tuple[str, ...] = ("COMPLETED",),
) -> int:
    """Wait for the end; say it; exit 0 for an end in `success`."""
    try:
        end = wait_for_end(repo, store_url, execution_id, echo_note, after_seq=after_seq)
    except KeyboardInterrupt:  # only the waiting ends: the supervisor is a session of its own
        click.echo(words.stopped_waiting(execution_id), err=True)
        return EXIT_SIGINT
    if isinstance(end, Ended):
        click.echo(words.ended(end), err=True)
        return 0 if end.status in success else EXIT_FAILED
    click.echo(words.supervisor_died(end), err=True)
    return EXIT_SUPERVISOR_DIED
