"""`start`: validate a plan, create its execution, start its supervisor, then return."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.cli.options import common_options
from orchestrator.runtime.supervisor_process import imports_out_of_gc, pending_supervisor


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
    # store, the models of the plan and the events: ~0.15 s), and imports the rest of its
    # own (~0.13 s) while this command validates the plan (supervisor_process.py).
    with imports_out_of_gc():
        import orchestrator.cli.context  # noqa: F401

    with pending_supervisor() as supervisor:
        from orchestrator.cli.new_execution import start_execution

        start_execution(
            plan,
            wait=wait,
            detach=detach,
            fresh=fresh,
            repo=repo,
            store_url=store_url,
            supervisor=supervisor,
        )
