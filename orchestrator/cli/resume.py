"""`resume`: verify an interrupted execution's log, then hand it to a new supervisor."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from orchestrator.cli.options import common_options
from orchestrator.runtime.supervisor_process import imports_out_of_gc, pending_supervisor

if TYPE_CHECKING:
    from orchestrator.core.state import ExecutionState


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
        from orchestrator.cli.context import open_workspace

    with pending_supervisor() as supervisor:
        from orchestrator.cli.launch import already_ended, launch, wait_until_ended
        from orchestrator.cli.plans import require_agent_environment

        with open_workspace(repo, store_url, create=False) as ws:
            execution_id = ws.resolve_unended(execution, paused=True)
            ws.store.verify(execution_id)  # first: a tampered log is refused (exit 3)
            state = ws.state(execution_id)
            rerunnable = rerun_interrupted and any(
                v.state == "stopped"
                and v.current_attempt is not None
                and v.current_attempt.interrupted
                for v in state.subtasks.values()
            )
            if state.ended is not None and not rerunnable:
                if wait:  # exits with the outcome, which it reports
                    raise SystemExit(wait_until_ended(ws, execution_id))
                click.echo(already_ended(execution_id, state.ended), err=True)
                return
            # What the agents' settings need of this environment, which is not start's.
            require_agent_environment(state.plan)
            note = _plan_changed_note(state, started_at=ws.row(execution_id).created_at)
            if note:
                click.echo(note, err=True)
            launch(
                ws,
                execution_id,
                supervisor,
                wait=wait,
                detach=detach,
                resume=True,
                rerun_interrupted=rerun_interrupted,
                verified=True,
            )


def _plan_changed_note(state: ExecutionState, *, started_at: str) -> str | None:
    """A word when the plan file was modified after the execution started: resume goes on
    with the plan its log holds, which a user who edited the file may not expect."""
    path = Path(state.created.plan_path)
    try:
        modified = path.stat().st_mtime
    except OSError:
        return None
    if modified <= datetime.fromisoformat(started_at).timestamp():
        return None
    return (
        f"note: {path} was modified after this execution started; it goes on with the plan "
        f"as it was then (`kairo-orch start --fresh {path}` starts the new one)"
    )
