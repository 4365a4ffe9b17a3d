"""`resume`: verify an interrupted execution's log, then hand it to a new supervisor."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.app.launcher import imports_out_of_gc, pending_supervisor
from orchestrator.cli.options import common_options


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@click.option("--wait", is_flag=True, help="Block until the execution ends; exit with its outcome.")
@click.option("--detach", is_flag=True, help="Do not attach to the tmux session.")
@click.option(
    "--rerun-interrupted",
    is_flag=True,
    help="Run again the attempts of non-idempotent agents that an interruption cut short.",
)
@common_options
def resume(
    execution: str | None,
    wait: bool,
    detach: bool,
    rerun_interrupted: bool,
    repo: Path,
    store_url: str | None,
) -> None:
    """Recover an interrupted execution (when ID is left out, the newest that is paused,
    else the newest) and go on."""
    # As in `start`: the supervisor is forked once the imports it shares with this command
    # are done, and the rest of each side's imports run side by side.
    with imports_out_of_gc():
        import orchestrator.app.project  # noqa: F401

    with pending_supervisor() as supervisor:
        from orchestrator.app import resuming
        from orchestrator.app.results import AlreadyEnded
        from orchestrator.cli import words
        from orchestrator.cli.outcomes import after_launch, echo_note, wait_exit_code

        outcome = resuming.resume(
            repo,
            store_url,
            execution,
            launcher=supervisor,
            rerun_interrupted=rerun_interrupted,
            notify=echo_note,
        )
    if isinstance(outcome, AlreadyEnded):
        if wait:  # exits with the outcome, which it reports
            raise SystemExit(wait_exit_code(repo, store_url, outcome.execution_id))
        click.echo(words.already_ended(outcome), err=True)
        return
    after_launch(outcome, wait=wait, detach=detach, repo=repo, store_url=store_url)
