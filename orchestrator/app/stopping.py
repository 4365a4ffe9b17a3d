"""`stop`: ask an execution's supervisor to stop, gracefully or at once.

A running supervisor of this host is asked by a signal (SIGTERM for graceful, SIGUSR1 for
`--now`; runtime/stopping.py), which it records as an event before anything else. One on
another host is asked through the store when its plan is placed on workers (PostgreSQL,
store/stop_requests.py), and records the request the same way; any other is refused.

A paused execution has no supervisor to ask: one is started to stop it,
so that what recovery finds (agents still running, half-done steps) is settled the same
way, and the execution ends STOPPED rather than staying PAUSED.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from orchestrator.app.launcher import pending_supervisor
from orchestrator.app.launching import launch
from orchestrator.app.project import Project, open_project
from orchestrator.app.results import AlreadyEnded, StopRecorded
from orchestrator.core.events import StopMode
from orchestrator.core.ids import short_id
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import ACTIVE
from orchestrator.errors import EnvironmentProblem
from orchestrator.runtime.ownership import local_owner_pid, owner_alive, owner_token
from orchestrator.runtime.stopping import GRACEFUL_SIGNALS, NOW_SIGNAL
from orchestrator.store.base import ExecutionRow
from orchestrator.store.stop_requests import StopRequest, StopRequests

REQUEST_TIMEOUT_S = 20.0
POLL_S = 0.05


def stop(
    repo: Path, store_url: str | None, execution: str | None, mode: StopMode
) -> StopRecorded | AlreadyEnded:
    """Stop `execution` (left out: the newest that has not ended)."""
    with open_project(repo, store_url, create=False) as project:
        # A placed execution's supervisor may be asked from any clone (_ask_through_store).
        execution_id = project.resolve_unended(execution, placed_anywhere=True)
        before = project.state(execution_id)
        if before.ended is not None:
            return AlreadyEnded(execution_id, before.ended)
        if _ask_supervisor(project, execution_id, mode):
            return _recorded(project, before, mode)
    # No supervisor (PAUSED), or it died just now: start one that stops it, forked before
    # the store is opened again (supervisor_process.py).
    with pending_supervisor() as launcher, open_project(repo, store_url) as project:
        launch(project, execution_id, launcher, resume=True, stop=mode)
        return _recorded(project, before, mode)


def _recorded(project: Project, before: ExecutionState, mode: StopMode) -> StopRecorded:
    running = sum(
        view.state in ACTIVE
        and view.current_attempt is not None
        and not view.current_attempt.exited
        for view in before.subtasks.values()
    )
    now = project.state(before.execution_id)
    return StopRecorded(before.execution_id, mode, running, now.ended, before.seq)


def _ask_supervisor(project: Project, execution_id: str, mode: StopMode) -> bool:
    """Ask the live supervisor (a signal, or a request in the store) and wait until it has
    recorded the request; False when there is no supervisor to ask."""
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    signalled = False
    while time.monotonic() < deadline:
        row = project.row(execution_id)
        state = project.state(execution_id)
        if state.ended is not None or _asked(state.stop, mode):
            return True  # a graceful stop asked twice is not made a `--now` by a 2nd SIGTERM
        if not owner_alive(row):
            return False
        pid = local_owner_pid(row)
        if pid is None:
            signalled = signalled or _ask_through_store(project, state, row, mode)
            time.sleep(POLL_S)
            continue
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


def _ask_through_store(
    project: Project, state: ExecutionState, row: ExecutionRow, mode: StopMode
) -> bool:
    """Leave a request for a supervisor of another host (placed executions only), once it
    holds the claim (not the `start` handing it over); whether it was left."""
    store, owner = project.store, row.owner or ""
    if state.plan.placement != "workers" or not isinstance(store, StopRequests):
        raise EnvironmentProblem(
            f"execution {state.execution_id} is supervised on another host ({owner}); "
            "run `kairo-orch stop` there",
            execution_id=state.execution_id,
        )
    if not owner.endswith(f":{state.supervisor_pid}"):
        return False
    store.request_stop(state.execution_id, owner, StopRequest(mode, socket.gethostname()))
    return True


def _asked(stop: StopMode | None, mode: StopMode) -> bool:
    return stop == "now" or (stop is not None and mode == "graceful")
