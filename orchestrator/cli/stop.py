"""`stop`: ask an execution's supervisor to stop, gracefully or at once (app/stopping.py)."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.app import stopping
from orchestrator.app.results import AlreadyEnded
from orchestrator.cli import words
from orchestrator.cli.options import common_options
from orchestrator.cli.outcomes import EXIT_FAILED, wait_exit_code
from orchestrator.core.events import StopMode

STOP_SUCCESS = ("STOPPED", "COMPLETED")  # the ends `stop --wait` exits 0 for


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@click.option(
    "--now", is_flag=True, help="Kill the running agents at once; their partial work is kept."
)
@click.option("--wait", is_flag=True, help="Block until the execution has ended.")
@common_options
def stop(execution: str | None, now: bool, wait: bool, repo: Path, store_url: str | None) -> None:
    """Stop an execution (the newest that has not ended when ID is left out): running
    attempts finish and are judged, accepted work is merged, nothing new starts. It ends
    STOPPED."""
    mode: StopMode = "now" if now else "graceful"
    outcome = stopping.stop(repo, store_url, execution, mode)
    if isinstance(outcome, AlreadyEnded):
        click.echo(words.already_ended(outcome), err=True)
        if wait:  # its outcome, as a wait for it would have given
            raise SystemExit(0 if outcome.status in STOP_SUCCESS else EXIT_FAILED)
        return
    click.echo(words.stop_recorded(outcome), err=True)
    if wait:
        raise SystemExit(
            wait_exit_code(
                repo,
                store_url,
                outcome.execution_id,
                after_seq=outcome.asked_at_seq,
                success=STOP_SUCCESS,
            )
        )
