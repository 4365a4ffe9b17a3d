"""Recovery: make the log and the world agree again before the supervisor goes on.

The log says what was decided and what was done; the world (run directories, runner
processes, worktrees) may be further along than the log (a runner finished while no
supervisor listened) or behind it (a process died). For each unfinished attempt:

- the runner left an exit record        -> its result is recorded, nothing reruns
- the runner still runs                 -> re-attached: waited for, never started again
- it never started (no record, no pid)  -> nothing ran; the attempt's pane is opened now
- it started and is gone, no result     -> interrupted: its changes since the safe point
  go to a recovery ref, the worktree is reset to the safe point, and the agent reruns
  only if it is idempotent (or the user said --rerun-interrupted); else it is stopped.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Literal

import structlog
import trio

from agents.live_usage import read_live
from orchestrator.core import events as ev
from orchestrator.core.ids import attempt_cgroup, short_id
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import ACTIVE, SubtaskView
from orchestrator.runtime.attempts import (
    RunFiles,
    exited,
    read_exit_record,
    read_usage,
    records_written_by_others,
    runner_ever_started,
    scrub,
)
from orchestrator.runtime.edges import Edges, attempt_files

log = structlog.get_logger(__name__)


async def reconcile(
    edges: Edges, state: ExecutionState, *, rerun_interrupted: bool
) -> list[ev.ExecutionEvent]:
    events: list[ev.ExecutionEvent] = []
    reruns = [
        ev.SubtaskRerun(subtask_id=view.id)
        for view in state.subtasks.values()
        if rerun_interrupted and view.state == "stopped" and _was_interrupted(view)
    ]
    if reruns and state.ended is not None:
        events.append(ev.ExecutionReopened())
    events += reruns
    for view in state.subtasks.values():
        # A placed subtask's attempt is on its worker's host, which the re-issued
        # commands ask (AwaitAttempt): nothing of it is here to look at.
        if view.state in ACTIVE and view.id not in state.assignments:
            events += await _reconcile_attempt(edges, state, view, rerun_interrupted)
    return events


def _was_interrupted(view: SubtaskView) -> bool:
    attempt = view.current_attempt
    return attempt is not None and attempt.interrupted


async def _reconcile_attempt(
    edges: Edges, state: ExecutionState, view: SubtaskView, rerun_interrupted: bool
) -> list[ev.ExecutionEvent]:
    attempt = view.current_attempt
    if attempt is None or attempt.finished or attempt.exited:
        return []
    files = attempt_files(state, view.id, attempt.number)
    opened: list[ev.ExecutionEvent] = []
    if attempt.pane_id is None and await trio.to_thread.run_sync(runner_ever_started, files):
        opened = [ev.AttemptPaneOpened(subtask_id=view.id, attempt=attempt.number, pane_id="")]
    # A record counts only once its runner is gone (awaiting_exit.py): one of a runner
    # still running is waited for again, as the runner itself is.
    if await edges.processes.runner_state(files) != "gone":
        log.info("reattached", subtask_id=view.id, attempt=attempt.number)
        return opened
    # Looked at once the runner is known gone: a runner that wrote its record and ended
    # meanwhile is no lost one.
    record = await trio.to_thread.run_sync(read_exit_record, files)
    if record is not None and not record.interrupted:
        cgroup = attempt_cgroup(state.execution_id, view.id, attempt.number)
        await edges.processes.end_attempt(files, cgroup)
        # Before the scrub, which may rewrite the log itself.
        written = await trio.to_thread.run_sync(records_written_by_others, files, record)
        await trio.to_thread.run_sync(scrub, files, edges.redactor.known)
        log.info("recovered_result", subtask_id=view.id, attempt=attempt.number)
        event = functools.partial(
            exited, files, view.id, attempt.number, record, written_by_others=written
        )
        return [*opened, await trio.to_thread.run_sync(event)]
    if record is None and not opened and attempt.pane_id is None:
        # Its pane may have been opened just before the crash, its runner not yet started.
        pane = await edges.panes.pane_running(str(files.spec))
        if pane is not None:
            return [ev.AttemptPaneOpened(subtask_id=view.id, attempt=attempt.number, pane_id=pane)]
        return []  # it never started: OpenPane starts it, for the first time
    await trio.to_thread.run_sync(scrub, files, edges.redactor.known)
    return [*opened, await interrupt(edges, state, view.id, rerun_interrupted=rerun_interrupted)]


async def interrupt(
    edges: Edges,
    state: ExecutionState,
    subtask_id: str,
    *,
    rerun_interrupted: bool,
    cause: Literal["supervisor", "pane"] = "supervisor",
) -> ev.AttemptInterrupted:
    """Save what the cut-short attempt left, reset its worktree to the safe point."""
    view = state.subtask(subtask_id)
    attempt = view.current_attempt
    assert attempt is not None and view.worktree is not None
    files = attempt_files(state, subtask_id, attempt.number)
    # Nothing of it may write while its work is saved.
    pgid = await trio.to_thread.run_sync(recorded_group, files)
    if pgid is not None:
        await edges.processes.stop_group(pgid)
    await edges.processes.end_attempt(
        files, attempt_cgroup(state.execution_id, subtask_id, attempt.number)
    )
    worktree = Path(view.worktree)
    ref_name = f"refs/kairo/recovery/{short_id(state.execution_id)}/{subtask_id}/{attempt.number}"
    ref = None
    there = await edges.workspaces.exists(worktree)
    if not there and view.branch is not None:
        # Deleted by hand while nobody supervised it: nothing of the attempt is left to
        # save, and the next attempt needs its files, made again from its branch.
        await edges.workspaces.adopt(subtask_id, view.branch, worktree)
        log.warning("worktree_made_again", subtask_id=subtask_id, path=str(worktree))
    elif there and view.branch is not None:
        ref = await edges.repository.save_worktree_state(
            worktree,
            ref=ref_name,
            safe_commit=attempt.start_commit,
            message=f"kairo: what attempt {attempt.number} of {subtask_id} left when interrupted",
            leave_out=view.copied,
        )
        await edges.repository.reset_worktree(
            worktree, attempt.start_commit, branch=view.branch, leave_out=view.copied
        )
    if ref is None and await edges.repository.ref_exists(ref_name):
        ref = ref_name  # saved by a recovery that a crash cut short before its event
    rerun = rerun_interrupted or state.spec(subtask_id).agent.idempotent
    log.warning("interrupted", subtask_id=subtask_id, attempt=attempt.number, saved_on=ref)
    return ev.AttemptInterrupted(
        subtask_id=subtask_id,
        attempt=attempt.number,
        recovery_ref=ref,
        rerun=rerun,
        tokens=await trio.to_thread.run_sync(_tokens_used, files),
        cause=cause,
    )


def _tokens_used(files: RunFiles) -> int:
    """What an attempt cut short used: its usage line if its filter wrote one, else what
    its stream had shown so far."""
    recorded = read_usage(files).tokens
    live = read_live(str(files.usage))
    return recorded or (live["tokens"] or 0 if live is not None else 0)


def recorded_group(files: RunFiles) -> int | None:
    try:
        pgid = json.loads(files.started.read_text(encoding="utf-8")).get("pgid")
    except (OSError, ValueError):
        return None
    return pgid if isinstance(pgid, int) else None
