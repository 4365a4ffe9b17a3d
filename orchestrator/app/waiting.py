"""Waiting for an execution's end (`--wait`): what it ended as, or that its supervisor died."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from orchestrator.app.notes import Notify, StoreAnswersAgain, StoreNotAnswering
from orchestrator.app.project import Project, open_project
from orchestrator.app.results import Ended, FailedReviewStep, SupervisorDied
from orchestrator.core.ids import short_id
from orchestrator.core.state import ExecutionState
from orchestrator.core.status import effective_status
from orchestrator.errors import EnvironmentProblem, LogRewritten, StoreLost
from orchestrator.runtime.ownership import owner_alive, supervisor_alive
from orchestrator.runtime.state_reader import advance_state
from orchestrator.runtime.supervisor_process import supervisor_log_path

POLL_S = 0.1
OUTAGE_POLL_S = 0.5


def wait_for_end(
    repo: Path, store_url: str | None, execution_id: str, notify: Notify, *, after_seq: int = -1
) -> Ended | SupervisorDied:
    """Once an end later than `after_seq` is in the log (a reopened execution's old end
    does not count), or its supervisor died first. A store that stops answering is waited
    out, for as long as the supervisor on this host lives (it rides it out too)."""
    with open_project(repo, store_url, create=False) as project:
        return _wait(project, execution_id, notify, after_seq)


def _wait(
    project: Project, execution_id: str, notify: Notify, after_seq: int
) -> Ended | SupervisorDied:
    state = project.state(execution_id)
    outage = _Outage(notify)
    while True:
        try:
            state = advance_state(project.store, state)
            row = project.row(execution_id)
        except EnvironmentProblem as problem:
            outage.wait(problem, state)
            continue
        outage.over()
        if state.ended is not None and (state.ended_seq or 0) > after_seq:
            _refuse_a_rewritten_log(project, state)  # an end written by another, say
            return _ended(state)
        if not owner_alive(row) and state.ended is None:
            # The supervisor lets go of the row right after it appends the end: read again.
            state = advance_state(project.store, state)
        if not owner_alive(row) and state.ended is None:
            _refuse_a_rewritten_log(project, state)
            return SupervisorDied(
                execution_id,
                effective_status(state, supervisor_alive=False),
                supervisor_log_path(Path(state.created.run_root)),
            )
        time.sleep(POLL_S)


def _refuse_a_rewritten_log(project: Project, state: ExecutionState) -> None:
    """What the log says is not how the execution went if it is not the log its supervisor
    wrote: exit 3 instead. A supervisor that found it so stopped (journal.py)."""
    found = project.rewritten(state.execution_id)
    if found is None:
        return
    run_folder = project.paths.runs / state.execution_id  # not the log's word for it
    raise LogRewritten(
        f"{found.message}. `kairo-orch status {short_id(state.execution_id)}` shows it "
        f"TAMPERED; its supervisor's log: {supervisor_log_path(run_folder)}",
        execution_id=state.execution_id,
        bad_seq=found.bad_seq,
        what=found.what,
    )


def _ended(state: ExecutionState) -> Ended:
    assert state.ended is not None
    return Ended(
        execution_id=state.execution_id,
        status=state.ended,
        merged=len(state.merged),
        subtasks=len(state.subtasks),
        failed_review_steps=tuple(
            FailedReviewStep(step, finished.exit_code)
            for step, finished in state.review.items()
            if finished is not None and finished.exit_code not in (0, None)  # None: not run
        ),
    )


class _Outage:
    """A store that stopped answering: said once, and once it answers again."""

    def __init__(self, notify: Notify) -> None:
        self._notify = notify
        self._said = False

    def wait(self, problem: EnvironmentProblem, state: ExecutionState) -> None:
        pid = state.supervisor_pid
        local = state.supervisor_host == socket.gethostname()
        if isinstance(problem, StoreLost):
            raise StoreLost(
                f"{problem.message}; the log of execution {state.execution_id} is gone with "
                "it, and its supervisor stops at its next write: `kairo-orch clean "
                f"{short_id(state.execution_id)}` removes what it left",
                execution_id=state.execution_id,
            ) from problem
        if not (local and pid and supervisor_alive(pid, state.execution_id)):
            raise problem
        if not self._said:
            self._notify(StoreNotAnswering(problem.message))
            self._said = True
        time.sleep(OUTAGE_POLL_S)

    def over(self) -> None:
        if self._said:
            self._notify(StoreAnswersAgain())
            self._said = False
