"""Handing an execution to a new supervisor, for `start`, `resume` and `stop` alike."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.app.launcher import Launcher
from orchestrator.app.project import Project
from orchestrator.app.results import Launched
from orchestrator.core.events import StopMode
from orchestrator.core.state import ExecutionState
from orchestrator.errors import EnvironmentProblem
from orchestrator.git.spare_setting import spare_bytes, spares_to_keep
from orchestrator.runtime.ownership import owner_token, take_claim
from orchestrator.runtime.state_reader import advance_state
from orchestrator.runtime.supervisor_process import daemon_arguments, supervisor_log_path

STARTUP_TIMEOUT_S = 20.0
POLL_S = 0.05


def launch(
    project: Project,
    execution_id: str,
    launcher: Launcher,
    *,
    resume: bool = False,
    rerun_interrupted: bool = False,
    verified: bool = False,
    stop: StopMode | None = None,
    supervised: Callable[[], None] | None = None,
) -> Launched:
    """Claim the execution (exit 4 if it is owned) and hand it to `launcher`'s supervisor
    (made by the caller before it opened its store); return once that runs. `supervised`
    is called once it runs (or failed to)."""
    spares_to_keep(os.environ)  # a bad KAIRO_SPARE_WORKTREES is refused here, not in the supervisor
    spare_bytes(os.environ)  # likewise KAIRO_SPARE_DISK
    if resume and not verified:
        project.verify(execution_id)  # a tampered log is refused before anything (exit 3)
    claimed = take_claim(
        project.store,
        execution_id,
        owner=owner_token(),
        status="RECOVERING" if resume else "RUNNING",
    )
    state = project.state(execution_id)
    arguments = daemon_arguments(
        execution_id,
        repo=project.paths,
        store_url=project.store_url,
        handover_version=claimed.row.version,
        resume=resume,
        # The last sign of life of the supervisor before, which the claim wrote over.
        previous_write=claimed.previous_write if resume else None,
        rerun_interrupted=rerun_interrupted,
        stop=stop,
    )
    launcher.hand_over(arguments, log_path=supervisor_log_path(Path(state.created.run_root)))
    try:
        _wait_until_supervised(project, state, launcher)
    finally:
        if supervised is not None:  # what waited on its supervisor may go on
            supervised()
    return Launched(
        execution_id=execution_id,
        plan_name=state.plan.name,
        subtasks=len(state.subtasks),
        integration_branch=state.created.integration_branch,
        resumed=resume,
        seq=state.seq,
        tmux_socket=state.created.tmux_socket,
        tmux_session=state.created.tmux_session,
    )


def _wait_until_supervised(project: Project, state: ExecutionState, launcher: Launcher) -> None:
    # Its supervisor_started event, not the row's owner: a quick execution may be over,
    # its ownership let go, before we look. Each look reads only the new events.
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    failure = None
    while time.monotonic() < deadline:
        state = advance_state(project.store, state)
        if state.supervisor_pid == launcher.pid:
            return
        failure = launcher.failure()
        if failure is not None:
            break
        time.sleep(POLL_S)
    if failure is None:
        # Too slow, not gone: stopped, so that what the user is told holds (the execution
        # is paused, and `resume` goes on), rather than starting behind their back.
        launcher.kill()
        failure = f"it took longer than {STARTUP_TIMEOUT_S:.0f} s and was stopped"
    raise EnvironmentProblem(
        f"the supervisor of {state.execution_id} did not start ({failure}); its log is "
        f"{supervisor_log_path(Path(state.created.run_root))}",
        execution_id=state.execution_id,
    )
