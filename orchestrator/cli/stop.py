"""`stop`: ask an execution's supervisor to stop, gracefully or at once.

A running supervisor is a process of this host, so the request is a signal (SIGTERM for
graceful, SIGUSR1 for `--now`; runtime/stopping.py), which it records as an event before
anything else. A paused execution has no supervisor to ask: one is started to stop it,
so that what recovery finds (agents still running, half-done steps) is settled the same
way, and the execution ends STOPPED rather than staying PAUSED.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from orchestrator.cli.context import Workspace, open_workspace
from orchestrator.cli.launch import EXIT_FAILED, already_ended, launch, wait_until_ended
from orchestrator.cli.options import common_options
from orchestrator.core.events import StopMode
from orchestrator.core.ids import short_id
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import ACTIVE
from orchestrator.errors import EnvironmentProblem
from orchestrator.runtime.ownership import local_owner_pid, owner_alive, owner_token
from orchestrator.runtime.stopping import GRACEFUL_SIGNALS, NOW_SIGNAL
from orchestrator.runtime.supervisor_process import pending_supervisor

REQUEST_TIMEOUT_S = 20.0
STOP_SUCCESS = ("STOPPED", "COMPLETED")  # the ends `stop --wait` exits 0 for
POLL_S = 0.05


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
    with open_workspace(repo, store_url, create=False) as ws:
        execution_id = ws.resolve_unended(execution)
        state = ws.state(execution_id)
        if state.ended is not None:
            click.echo(already_ended(execution_id, state.ended), err=True)
            if wait:  # its outcome, as a wait for it would have given
                raise SystemExit(0 if state.ended in STOP_SUCCESS else EXIT_FAILED)
            return
        if _ask_supervisor(ws, execution_id, mode):
            _then(ws, execution_id, mode, wait=wait, before=state)
            return
    # No supervisor (PAUSED), or it died just now: start one that stops it, forked before
    # the store is opened again (supervisor_process.py).
    with pending_supervisor() as supervisor, open_workspace(repo, store_url) as ws:
        launch(ws, execution_id, supervisor, wait=False, detach=True, resume=True, stop=mode)
        _then(ws, execution_id, mode, wait=wait, before=state)


def _then(
    ws: Workspace, execution_id: str, mode: StopMode, *, wait: bool, before: ExecutionState
) -> None:
    """Say what happens now that the stop is recorded; with `wait`, wait for the end.

    The agents it stops are counted in `before`, the state the request was made in: by the
    time it is recorded, a `--now` may already have seen some of them exit.
    """
    click.echo(_what_happens(ws.state(execution_id), mode, _running(before)), err=True)
    if wait:
        raise SystemExit(
            wait_until_ended(ws, execution_id, after_seq=before.seq, success=STOP_SUCCESS)
        )


def _ask_supervisor(ws: Workspace, execution_id: str, mode: StopMode) -> bool:
    """Signal the live supervisor and wait until it has recorded the request; False when
    there is no supervisor to ask."""
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    signalled = False
    while time.monotonic() < deadline:
        row = ws.row(execution_id)
        state = ws.state(execution_id)
        if state.ended is not None or _recorded(state.stop, mode):
            return True  # a graceful stop asked twice is not made a `--now` by a 2nd SIGTERM
        if not owner_alive(row):
            return False
        pid = local_owner_pid(row)
        if pid is None:
            raise EnvironmentProblem(
                f"execution {execution_id} is supervised on another host ({row.owner}); "
                "run `kairo-orch stop` there",
                execution_id=execution_id,
            )
        # Only the supervisor itself, never the `start` that is handing the claim over.
        if not signalled and row.owner == owner_token(state.supervisor_pid):
            os.kill(pid, NOW_SIGNAL if mode == "now" else GRACEFUL_SIGNALS[0])
            signalled = True
        time.sleep(POLL_S)
    raise EnvironmentProblem(
        f"the supervisor of {execution_id} did not answer the stop request within "
        f"{REQUEST_TIMEOUT_S:.0f} s; `kairo-orch status {short_id(execution_id)}` shows it",
        execution_id=execution_id,
    )


def _recorded(stop: StopMode | None, mode: StopMode) -> bool:
    return stop == "now" or (stop is not None and mode == "graceful")


def _running(state: ExecutionState) -> int:
    return sum(
        view.state in ACTIVE
        and view.current_attempt is not None
        and not view.current_attempt.exited
        for view in state.subtasks.values()
    )


def _what_happens(state: ExecutionState, mode: StopMode, running: int) -> str:
    short = short_id(state.execution_id)
    if state.ended is not None and mode == "now" and running:
        return (
            f"stopped {state.execution_id} at once: {running} running agent(s) killed, what "
            f"they changed, if anything, kept on refs/kairo/stopped/{short}/; it ended "
            f"{state.ended}"
        )
    if state.ended is not None:
        return f"execution {state.execution_id} ended {state.ended}"
    if mode == "now":
        return (
            f"stopping {state.execution_id} now: {running} running agent(s) are being killed, "
            f"what they changed, if anything, kept on refs/kairo/stopped/{short}/; nothing new "
            "starts"
        )
    return (
        f"stopping {state.execution_id}: {running} running attempt(s) finish and are judged, "
        f"accepted work is merged, nothing new starts; `kairo-orch status {short}` follows "
        f"it, and `kairo-orch stop --now {short}` stops it at once"
    )
