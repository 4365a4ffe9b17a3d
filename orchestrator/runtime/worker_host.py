"""A worker's side of `placement: workers`: take the commands queued for it, carry each
out with this host's own edges (a clone of the remote, its worktrees, its tmux server),
and leave their events in the store for the execution's owner to append.

The state a command is carried out on is the execution's log, folded here, with the
places that are the owner's (its repository, worktree and run roots, tmux server) made
this host's: the clone made from the remote on first use, under the worker's data
directory. A subtask's commit is pushed to the remote before its events are handed back,
so that the owner can fetch it as it appends them.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import structlog
import trio

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.event_base import redact_printed
from orchestrator.core.ids import subtask_branch, worker_tmux_socket
from orchestrator.core.placement import command_from_record
from orchestrator.core.state import ExecutionState
from orchestrator.errors import EnvironmentProblem, KairoError, StepFailed
from orchestrator.git.invocation import git, git_clone
from orchestrator.git.refs import branch_ref
from orchestrator.git.remote import fetch_branch_if_there, fetch_commit, push_branch
from orchestrator.git.repo import Identity, RepoPaths, discover_repo
from orchestrator.git.workspace import LocalWorktreeProvider
from orchestrator.runtime.edge_adapters import GitRepository, LocalProcesses, TmuxPanes
from orchestrator.runtime.edges import Edges
from orchestrator.runtime.effects import execute
from orchestrator.runtime.state_reader import read_state
from orchestrator.store.base import DurableExecutionStore
from orchestrator.store.commands import Queued

log = structlog.get_logger(__name__)

#: How long a worker waits for a NOTIFY before it looks at its queue anyway.
LOOK_EVERY_S = 1.0
#: The window an execution's tmux session opens with on a worker (agents' windows follow).
_FIRST_WINDOW = "worker"


class WorkerStore(Protocol):
    def take_commands(self, worker_id: str) -> list[Queued]: ...

    def finish_command(
        self,
        command_id: int,
        *,
        results: list[tuple[str, dict[str, Any]]],
        error: str | None,
    ) -> None: ...

    def wait_for_commands(self, worker_id: str, timeout_s: float) -> None: ...


def clone_dir(data_dir: Path, remote: str) -> Path:
    """Where a worker keeps its clone of `remote`: a readable name, and a hash that keeps
    two remotes of one name apart."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", remote.rstrip("/").rsplit("/", 1)[-1]) or "remote"
    digest = hashlib.sha256(remote.encode()).hexdigest()[:10]
    return data_dir / "clones" / f"{name}-{digest}"


async def ensure_clone(data_dir: Path, remote: str) -> RepoPaths:
    """The worker's clone of `remote`, made on first use."""
    target = clone_dir(data_dir, remote)
    if not (target / ".git").exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".cloning")
        await git_clone(remote, partial)
        partial.rename(target)
    return await trio.to_thread.run_sync(discover_repo, target)


class WorkerHost:
    def __init__(
        self,
        store: WorkerStore,
        log_store: DurableExecutionStore,  # the same store, as the log's reader
        worker_id: str,
        *,
        host: str,
        remote: str,
        data_dir: Path,
        clone: RepoPaths,
    ) -> None:
        self._store = store
        self._log_store = log_store
        self._worker_id = worker_id
        self._remote = remote
        self._data_dir = data_dir
        self._clone = clone
        # One tmux server per worker (its socket name says whose).
        self._tmux_socket = worker_tmux_socket(host)
        self._edges: dict[str, Edges] = {}
        self._making_edges = trio.Lock()  # commands that come together make them once

    async def serve(self, stopped: Callable[[], bool]) -> None:
        """Take and carry out commands until `stopped()`; those under way are cancelled
        then (their owner sees no outcome and, in time, the lease lapse)."""
        async with trio.open_nursery() as nursery:
            while not stopped():
                try:
                    taken = await trio.to_thread.run_sync(
                        self._store.take_commands, self._worker_id
                    )
                    for queued in taken:
                        nursery.start_soon(self._carry_out, queued)
                    await trio.to_thread.run_sync(
                        self._store.wait_for_commands,
                        self._worker_id,
                        LOOK_EVERY_S,
                        abandon_on_cancel=True,
                    )
                except EnvironmentProblem as problem:  # the store is waited out
                    log.warning("commands_not_taken", error=problem.message)
                    await trio.sleep(LOOK_EVERY_S)
            nursery.cancel_scope.cancel()
        await self._end_tmux_server_unless_agents_run()

    async def _end_tmux_server_unless_agents_run(self) -> None:
        """A stopped worker's tmux server holds only the placeholder windows its sessions
        opened with, unless an agent of its still runs there: that one is left to finish
        (a later worker adopts what it leaves), the rest is ended rather than kept for
        ever."""
        panes = TmuxPanes(self._tmux_socket)
        try:
            windows = await panes.live_pane_windows()
            agents = [window for window in windows if window != _FIRST_WINDOW]
            if agents:
                log.warning("tmux_server_left", socket=self._tmux_socket, agent_panes=len(agents))
                return
            await panes.kill_server()
        except KairoError as failed:  # the worker stops all the same
            log.warning("tmux_server_not_ended", socket=self._tmux_socket, error=failed.message)

    async def _carry_out(self, queued: Queued) -> None:
        command = command_from_record(queued.command)
        with structlog.contextvars.bound_contextvars(
            execution_id=queued.execution_id, subtask_id=queued.subtask_id
        ):
            results: list[tuple[str, dict[str, Any]]] = []
            error: str | None = None
            try:
                events = await self._execute(queued, command)
                results = [ev.to_record(event) for event in events]
            except KairoError as failed:
                error = failed.message
            except Exception as failed:  # a bug: its owner fails the subtask, the worker goes on
                log.exception("command_crashed", command=type(command).__name__)
                error = f"the worker failed: {failed!r}"
            log.info("command_done", command=type(command).__name__, error=error)
            await trio.to_thread.run_sync(
                lambda: self._store.finish_command(queued.command_id, results=results, error=error)
            )

    async def _execute(self, queued: Queued, command: cmd.Command) -> list[ev.ExecutionEvent]:
        state = await self._current_state(queued, command)
        edges = await self._edges_for(state)
        sid = command.subtask_id
        worktree = state.subtask(sid).worktree
        if isinstance(command, cmd.PrepareWorkspace):
            branch = state.created.integration_branch
            await fetch_commit(self._clone.toplevel, self._remote, branch, command.start_commit)
        elif worktree is not None and not await trio.Path(worktree).exists():
            if isinstance(command, cmd.ReleaseWorkspace):
                return [ev.WorkspaceReleased(subtask_id=sid)]  # never made on this host
            if not isinstance(command, cmd.KillAttempt):
                await self._take_over_worktree(state, edges, sid, Path(worktree))
        # Cut out here the secrets of this host's environment: the owner knows its own.
        done = await execute(edges, state, command)
        events = [redact_printed(event, edges.redactor.text) for event in done]
        if isinstance(command, cmd.CommitAttempt):
            await self._current_state(queued, command)  # not pushed for a stale assignment
            branch = subtask_branch(state.plan.name, state.execution_id, sid)
            await push_branch(self._clone.toplevel, self._remote, branch)
        return events

    async def _current_state(self, queued: Queued, command: cmd.Command) -> ExecutionState:
        """The execution's state here, if `queued` is of the subtask's current assignment
        (to this worker): else StepFailed, and nothing is carried out (or pushed)."""
        state = await trio.to_thread.run_sync(self._read_state, queued.execution_id)
        assignment = state.assignments.get(command.subtask_id)
        if (
            assignment is None
            or assignment.epoch != queued.epoch
            or assignment.worker_id != self._worker_id
        ):
            raise StepFailed(f"{command.subtask_id} was assigned anew: not carried out")
        return self._here(state, command.subtask_id)

    async def _take_over_worktree(
        self, state: ExecutionState, edges: Edges, sid: str, worktree: Path
    ) -> None:
        """The worktree of a subtask another worker had: its branch as that worker last
        pushed it (its last commit), else made at the attempt's start."""
        view = state.subtask(sid)
        assert view.branch is not None
        clone = self._clone.toplevel
        if await fetch_branch_if_there(clone, self._remote, view.branch) is None:
            attempt = view.current_attempt
            start = attempt.start_commit if attempt is not None else view.start_commit
            assert start is not None
            integration = state.created.integration_branch
            await fetch_commit(clone, self._remote, integration, start)
            await git("update-ref", branch_ref(view.branch), start, cwd=clone)
        if await edges.workspaces.adopt(sid, view.branch, worktree) is None:
            raise StepFailed(f"cannot make the worktree of {sid} again on this host")
        log.warning("worktree_taken_over", path=str(worktree))

    def _read_state(self, execution_id: str) -> ExecutionState:
        return read_state(self._log_store, execution_id)

    def _here(self, state: ExecutionState, sid: str) -> ExecutionState:
        """The state with the owner's places made this host's, and the subtask's worktree
        (made here, or by a worker it had before) this host's place for it."""
        execution = self._data_dir / "executions" / state.execution_id
        view = state.subtask(sid)
        if view.worktree is not None:
            local = replace(view, worktree=str(execution / "worktrees" / sid))
            state = replace(state, subtasks={**state.subtasks, sid: local})
        created = state.created.model_copy(
            update={
                "repo_root": str(self._clone.toplevel),
                "git_common_dir": str(self._clone.git_common_dir),
                "worktree_root": str(execution / "worktrees"),
                "run_root": str(execution / "runs"),
                "tmux_socket": self._tmux_socket,
            }
        )
        return replace(state, created=created)

    async def _edges_for(self, state: ExecutionState) -> Edges:
        async with self._making_edges:
            known = self._edges.get(state.execution_id)
            if known is None:
                known = self._edges[state.execution_id] = await self._new_edges(state)
            return known

    async def _new_edges(self, state: ExecutionState) -> Edges:
        clone = self._clone
        identity = await Identity.for_repo(clone.toplevel)
        panes = TmuxPanes(self._tmux_socket)
        session = state.created.tmux_session

        async def open_session() -> None:
            if not await panes.has_session(session):
                await panes.new_session(
                    session,
                    window_name=_FIRST_WINDOW,
                    title=f"kairo-orch worker: {state.execution_id}",
                    command=["/bin/sh", "-c", "exec tail -f /dev/null"],
                    cwd=clone.toplevel,
                )

        await open_session()
        return Edges(
            repo_root=clone.toplevel,
            workspaces=LocalWorktreeProvider(clone),
            repository=GitRepository(clone.toplevel, clone.git_common_dir, identity),
            panes=panes,
            processes=LocalProcesses(),
            environment=dict(os.environ),
            open_session=open_session,
        )
