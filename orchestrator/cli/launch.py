"""Handing an execution to a new supervisor process, for `start` and `resume` alike."""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import click

from orchestrator.cli.context import Workspace
from orchestrator.core.events import StopMode
from orchestrator.core.ids import short_id
from orchestrator.core.state import ExecutionState
from orchestrator.core.status import effective_status
from orchestrator.errors import EnvironmentProblem, StoreLost
from orchestrator.git.spare_setting import spare_bytes, spares_to_keep
from orchestrator.runtime.ownership import claim, owner_alive, owner_token, supervisor_alive
from orchestrator.runtime.state_reader import advance_state
from orchestrator.runtime.supervisor_process import (
    PendingSupervisor,
    daemon_arguments,
    supervisor_log_path,
)
from orchestrator.tmux.interactive import attach_session

EXIT_FAILED = 1
EXIT_SUPERVISOR_DIED = 6
EXIT_SIGINT = 130
STARTUP_TIMEOUT_S = 20.0
POLL_S = 0.05
OUTAGE_POLL_S = 0.5


def launch(
    ws: Workspace,
    execution_id: str,
    supervisor: PendingSupervisor,
    *,
    wait: bool,
    detach: bool,
    resume: bool = False,
    rerun_interrupted: bool = False,
    verified: bool = False,
    stop: StopMode | None = None,
    supervised: Callable[[], None] | None = None,
) -> None:
    """Claim the execution (exit 4 if it is owned), hand it to `supervisor` (forked by the
    caller before it opened its store), then wait for its end (`wait`), attach to its tmux
    session (a terminal, no `detach`) or return. `supervised` is called once the
    supervisor runs (or failed to)."""
    spares_to_keep(os.environ)  # a bad KAIRO_SPARE_WORKTREES is refused here, not in the supervisor
    spare_bytes(os.environ)  # likewise KAIRO_SPARE_DISK
    if resume and not verified:
        ws.store.verify(execution_id)  # a tampered log is refused before anything (exit 3)
    row = claim(
        ws.store,
        execution_id,
        owner=owner_token(),
        status="RECOVERING" if resume else "RUNNING",
    )
    state = ws.state(execution_id)
    run_root = Path(state.created.run_root)
    arguments = daemon_arguments(
        execution_id,
        repo=ws.paths,
        store_url=ws.store_url,
        handover_version=row.version,
        resume=resume,
        rerun_interrupted=rerun_interrupted,
        stop=stop,
    )
    supervisor.hand_over(arguments, log_path=supervisor_log_path(run_root))
    try:
        _wait_until_supervised(ws, state, supervisor)
    finally:
        if supervised is not None:  # what waited on its supervisor may go on
            supervised()
    if stop is not None:
        return  # `stop` says what happens next
    verb = "resumed" if resume else "started"
    click.echo(
        f"{verb} {state.plan.name} as {execution_id}: {_count(len(state.subtasks), 'subtask')}, "
        f"integration branch {state.created.integration_branch}",
        err=True,
    )
    if not sys.stdout.isatty():  # for a script: `id=$(kairo-orch start plan.yaml --detach)`
        click.echo(execution_id)
    if wait:
        raise SystemExit(wait_until_ended(ws, execution_id, after_seq=state.seq))
    if sys.stdin.isatty() and sys.stdout.isatty() and not detach:
        attach_session(state.created.tmux_socket, state.created.tmux_session)
        return
    click.echo(
        f"watch it: kairo-orch attach {short_id(execution_id)}    "
        f"status: kairo-orch status {short_id(execution_id)}",
        err=True,
    )


def _wait_until_supervised(
    ws: Workspace, state: ExecutionState, supervisor: PendingSupervisor
) -> None:
    # Its supervisor_started event, not the row's owner: a quick execution may be over,
    # its ownership let go, before we look. Each look reads only the new events.
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    failure = None
    while time.monotonic() < deadline:
        state = advance_state(ws.store, state)
        if state.supervisor_pid == supervisor.pid:
            return
        failure = supervisor.failure()
        if failure is not None:
            break
        time.sleep(POLL_S)
    if failure is None:
        # Too slow, not gone: stopped, so that what the user is told holds (the execution
        # is paused, and `resume` goes on), rather than starting behind their back.
        supervisor.kill()
        failure = f"it took longer than {STARTUP_TIMEOUT_S:.0f} s and was stopped"
    raise EnvironmentProblem(
        f"the supervisor of {state.execution_id} did not start ({failure}); its log is "
        f"{supervisor_log_path(Path(state.created.run_root))}",
        execution_id=state.execution_id,
    )


def wait_until_ended(
    ws: Workspace,
    execution_id: str,
    *,
    after_seq: int = -1,
    success: tuple[str, ...] = ("COMPLETED",),
) -> int:
    """The outcome's exit code (0 for an end in `success`), once an end later than
    `after_seq` is in the log (a reopened execution's old end does not count)."""
    state = ws.state(execution_id)
    try:
        return _wait(ws, state, after_seq, success)
    except KeyboardInterrupt:
        # Only the waiting ends: the supervisor is a session of its own.
        short = short_id(execution_id)
        click.echo(
            f"kairo-orch: stopped waiting; execution {execution_id} goes on "
            f"(`kairo-orch status {short}` shows it, `kairo-orch stop {short}` stops it)",
            err=True,
        )
        return EXIT_SIGINT


def _wait(ws: Workspace, state: ExecutionState, after_seq: int, success: tuple[str, ...]) -> int:
    execution_id = state.execution_id
    outage = StoreOutage()
    while True:
        try:
            state = advance_state(ws.store, state)
            row = ws.row(execution_id)
        except EnvironmentProblem as problem:
            outage.wait(problem, state)
            continue
        outage.over()
        if state.ended is not None and (state.ended_seq or 0) > after_seq:
            merged = len(state.merged)
            click.echo(
                f"{execution_id} ended {state.ended}: {merged} of "
                f"{_count(len(state.subtasks), 'subtask')} merged{_review_failures(state)}; "
                f"`kairo-orch report {short_id(execution_id)}` says what happened",
                err=True,
            )
            return 0 if state.ended in success else EXIT_FAILED
        if not owner_alive(row) and state.ended is None:
            # The supervisor lets go of the row right after it appends the end: read again.
            state = advance_state(ws.store, state)
        if not owner_alive(row) and state.ended is None:
            status = effective_status(state, supervisor_alive=False)
            click.echo(
                f"kairo-orch: the supervisor of {execution_id} died before the execution "
                f"ended; it is {status}, and `kairo-orch resume {short_id(execution_id)}` goes "
                f"on. Its log: {supervisor_log_path(Path(state.created.run_root))}",
                err=True,
            )
            return EXIT_SUPERVISOR_DIED
        time.sleep(POLL_S * 2)


class StoreOutage:
    """A store that stopped answering a command that waits: waited out, said once, for as
    long as the supervisor on this host lives (it rides it out as well, within its lease)."""

    def __init__(self) -> None:
        self._said = False

    def wait(self, problem: EnvironmentProblem, state: ExecutionState) -> None:
        pid = state.supervisor_pid
        local = state.supervisor_host == socket.gethostname()
        if isinstance(problem, StoreLost):
            short = short_id(state.execution_id)
            raise StoreLost(
                f"{problem.message}; the log of execution {state.execution_id} is gone with "
                f"it, and its supervisor stops at its next write: `kairo-orch clean {short}` "
                "removes what it left",
                execution_id=state.execution_id,
            ) from problem
        if not (local and pid and supervisor_alive(pid, state.execution_id)):
            raise problem
        if not self._said:
            click.echo(f"kairo-orch: {problem.message}; waiting for it to answer again", err=True)
            self._said = True
        time.sleep(OUTAGE_POLL_S)

    def over(self) -> None:
        if self._said:
            click.echo("kairo-orch: the store answers again", err=True)
            self._said = False


def _review_failures(state: ExecutionState) -> str:
    """The review steps that failed, which change no exit code but are easy to miss."""
    failed = [
        f"{'the pull request command' if step == 'pull_request' else 'the push'} failed "
        f"(exit {finished.exit_code})"
        for step, finished in state.review.items()
        if finished is not None and finished.exit_code not in (0, None)  # None: not run
    ]
    return f", but {' and '.join(failed)}" if failed else ""


def already_ended(execution_id: str, ended: str) -> str:
    return (
        f"execution {execution_id} already ended {ended}; "
        f"`kairo-orch report {short_id(execution_id)}` says what happened"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
