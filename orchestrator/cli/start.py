"""`start`: validate a plan, create its execution, start its supervisor, then return."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator.app.launcher import imports_out_of_gc, pending_supervisor
from orchestrator.cli.options import common_options


@click.command()
@click.argument("plan", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--wait", is_flag=True, help="Block until the execution ends; exit with its outcome.")
@click.option("--detach", is_flag=True, help="Do not attach to the tmux session.")
@click.option("--fresh", is_flag=True, help="Start a new execution even if one was interrupted.")
@common_options
def start(
    plan: Path, wait: bool, detach: bool, fresh: bool, repo: Path, store_url: str | None
) -> None:
    """Validate PLAN, create an execution and start its supervisor."""
    # The supervisor is forked once what it shares with this command is imported (the
    # store, the models of the plan and the events), and imports the rest of its own while
    # this command validates the plan (runtime/supervisor_process.py).
    with imports_out_of_gc():
        import orchestrator.app.project  # noqa: F401

    with pending_supervisor() as supervisor:
        from orchestrator.app import starting
        from orchestrator.app.results import Interrupted
        from orchestrator.cli import words
        from orchestrator.cli.outcomes import after_launch, echo_note

        def ask_to_resume(interrupted: Interrupted) -> bool:
            return click.confirm(words.resume_question(interrupted), default=True)

        launched = starting.start(
            repo,
            store_url,
            plan,
            fresh=fresh,
            launcher=supervisor,
            notify=echo_note,
            ask_to_resume=ask_to_resume if sys.stdin.isatty() and sys.stdout.isatty() else None,
        )
        after_launch(launched, wait=wait, detach=detach, repo=repo, store_url=store_url)
