"""`resume`: verify an interrupted execution's log, then hand it to a new supervisor."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from orchestrator.app.launcher import Launcher
from orchestrator.app.launching import launch
from orchestrator.app.notes import Notify, PlanChangedSinceStart
from orchestrator.app.plans import require_agent_environment
from orchestrator.app.project import Project, open_project
from orchestrator.app.results import AlreadyEnded, Launched
from orchestrator.core.state import ExecutionState


def resume(
    repo: Path,
    store_url: str | None,
    execution: str | None,
    *,
    launcher: Launcher,
    rerun_interrupted: bool,
    notify: Notify,
) -> Launched | AlreadyEnded:
    """Go on with `execution` (left out: the newest that is paused, else the newest)."""
    with open_project(repo, store_url, create=False) as project:
        return _resume(project, execution, launcher, rerun_interrupted, notify)


def _resume(
    project: Project,
    execution: str | None,
    launcher: Launcher,
    rerun_interrupted: bool,
    notify: Notify,
) -> Launched | AlreadyEnded:
    # A placed execution may be taken over from another host's clone of its remote.
    execution_id = project.resolve_unended(execution, paused=True, placed_anywhere=True)
    project.verify(execution_id)  # first: a tampered log is refused (exit 3)
    state = project.state(execution_id)
    rerunnable = rerun_interrupted and any(
        v.state == "stopped" and v.current_attempt is not None and v.current_attempt.interrupted
        for v in state.subtasks.values()
    )
    if state.ended is not None and not rerunnable:
        return AlreadyEnded(execution_id, state.ended)
    # What the agents' settings need of this environment, which is not start's.
    require_agent_environment(state.plan)
    if _plan_changed(state, started_at=project.row(execution_id).created_at):
        notify(PlanChangedSinceStart(state.created.plan_path))
    return launch(
        project,
        execution_id,
        launcher,
        resume=True,
        rerun_interrupted=rerun_interrupted,
        verified=True,
    )


def _plan_changed(state: ExecutionState, *, started_at: str) -> bool:
    """Whether the plan file was modified after the execution started."""
    try:
        modified = Path(state.created.plan_path).stat().st_mtime
    except OSError:
        return False
    return modified > datetime.fromisoformat(started_at).timestamp()
