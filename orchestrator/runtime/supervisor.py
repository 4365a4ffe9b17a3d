"""The supervisor loop: fold, decide, carry out at the edge, append, repeat.

Each command runs as a task of one nursery; its events are appended as it ends, and every
append wakes the loop to decide again. A command already under way is not started twice
(`Command.key`). A command that fails for a reason a user can act on (a `KairoError`)
fails its subtask with that reason; anything else is a bug and stops the supervisor, whose
log then says where.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import structlog
import trio

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.constraints import ResourceConstraint
from orchestrator.core.decide import decide
from orchestrator.core.ids import live_view_channel, wake_channel_prefix
from orchestrator.core.reasons import Reason, ReasonCode
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import SubtaskView
from orchestrator.errors import KairoError
from orchestrator.runtime.closing_panes import close_ended_panes, pane_grace, runner_spec
from orchestrator.runtime.edges import Edges
from orchestrator.runtime.effects import execute
from orchestrator.runtime.journal import Journal
from orchestrator.runtime.overlap_watch import look_every, watch_overlaps
from orchestrator.runtime.placement import Placement
from orchestrator.runtime.plugins import load_constraints
from orchestrator.runtime.ports import Panes
from orchestrator.runtime.recovery import reconcile
from orchestrator.runtime.running_usage import live_tokens, watches_tokens
from orchestrator.runtime.stopping import STOP_SIGNALS, stop_on_signals
from orchestrator.runtime.turns import Turns

log = structlog.get_logger(__name__)

TICK_SECONDS = 0.5

# What a failed step of each command means for its subtask: the reason's code.
_FAILURE_CODE: dict[type[cmd.Command], ReasonCode] = {
    cmd.PrepareWorkspace: ReasonCode.SETUP_FAILED,
    cmd.OpenPane: ReasonCode.AGENT_FAILED,
    cmd.AwaitAttempt: ReasonCode.AGENT_FAILED,
    cmd.KillAttempt: ReasonCode.AGENT_FAILED,
    cmd.CommitAttempt: ReasonCode.AGENT_FAILED,
    cmd.RunVerify: ReasonCode.VERIFY_FAILED,
    cmd.MergeSubtask: ReasonCode.MERGE_FAILED,
    cmd.CheckIntegration: ReasonCode.INTEGRATION_VERIFY_FAILED,
    cmd.UndoMerges: ReasonCode.INTEGRATION_VERIFY_FAILED,
}


async def supervise(
    journal: Journal,
    edges: Edges,
    *,
    resumed: bool = False,
    rerun_interrupted: bool = False,
    stop: ev.StopMode | None = None,
    placement: Placement | None = None,
    previous_heartbeat: float | None = None,
) -> ExecutionState:
    """Run the execution to its end; return the final state.

    A resumed supervisor first reconciles the log with the world (recovery.py), so that
    nothing it decides rests on a step the log does not know the outcome of. With `stop`,
    it stops the execution as soon as it has (`kairo-orch stop` of a paused execution).
    `previous_heartbeat`: unix time of the last sign of life of the supervisor before (its
    last write of the execution's row), which its start records.
    """
    # From the first moment: a stop signal that comes during recovery waits in the queue.
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        started = ev.SupervisorStarted(
            pid=os.getpid(),
            host=socket.gethostname(),
            resumed=resumed,
            at=time.time(),
            previous_heartbeat_at=previous_heartbeat if resumed else None,
        )
        constraints = load_constraints()
        await journal.append([started])
        unwatched: set[str] = set()  # subtasks whose agents ran while no supervisor did
        if resumed:
            # The `wait-for` clients a killed supervisor left, one per agent it awaited.
            await _release_stale_waiters(edges.panes, journal.execution_id)
            # And the checks it started (run again, they would run beside them), and what
            # its attempts whose runners are gone left running.
            run_root = Path(journal.state.created.run_root)
            await edges.processes.end_leftovers(journal.execution_id, run_root)
            reconciled = await reconcile(edges, journal.state, rerun_interrupted=rerun_interrupted)
            unwatched = {e.subtask_id for e in reconciled if isinstance(e, ev.AttemptExited)}
            await journal.append(reconciled)
            await journal.set_status("RUNNING")
        # Before any agent runs: the record of what the user owns (or, resumed, a look at
        # it against the record taken when the execution started).
        await edges.guard.begin(journal, unwatched)
        if stop is not None:
            source = "kairo-orch stop --now" if stop == "now" else "kairo-orch stop"
            await journal.append([ev.StopRequested(mode=stop, source=source, at=time.time())])
        return await _loop(journal, edges, signals, constraints, placement)


async def _release_stale_waiters(panes: Panes, execution_id: str) -> None:
    try:
        woken = await panes.release_waiters(wake_channel_prefix(execution_id))
    except KairoError as error:  # no tmux server: no client waits on it either
        log.debug("waiters_not_released", error=error.message)
        return
    if woken:
        log.info("stale_waiters_released", channels=woken)


async def _loop(
    journal: Journal,
    edges: Edges,
    signals: AsyncIterator[int],
    constraints: Sequence[ResourceConstraint],
    placement: Placement | None,
) -> ExecutionState:
    in_flight: set[tuple[str, str, int]] = set()
    turns = Turns()
    live_view = LiveViewGate(edges.panes, journal.execution_id)
    watching = watches_tokens(journal.state.plan)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(journal.keep_lease, "RUNNING")
        nursery.start_soon(stop_on_signals, journal, signals)
        nursery.start_soon(close_ended_panes, journal, edges.panes, pane_grace(edges.environment))
        every = look_every(edges.environment)
        if edges.looks is not None and every is not None:
            nursery.start_soon(watch_overlaps, journal, edges.looks, every)
        if placement is not None:
            nursery.start_soon(placement.watch_workers, journal)
            nursery.start_soon(placement.watch_stop_requests, journal)
        while True:
            if journal.state.stop == "now":
                edges.stop_now.set()
            live = await trio.to_thread.run_sync(live_tokens, journal.state) if watching else {}
            decision = decide(journal.state, time.time(), constraints, live, journal.agenda)
            if _ends(decision.events):
                # A last look at what the user owns: nothing ends COMPLETED on a change.
                breach = await edges.guard.compare("end")
                if breach is not None:
                    await journal.append([breach])
                    continue
            if decision.events:
                await journal.append(decision.events)
                for subtask_id in _named(decision.events):
                    nursery.start_soon(retitle, edges.panes, journal.state, subtask_id)
                continue
            if journal.state.ended is not None:
                break
            changed = journal.changed
            for command in decision.commands:
                if command.key not in in_flight:
                    in_flight.add(command.key)
                    nursery.start_soon(
                        _carry_out, journal, edges, command, in_flight, turns, placement
                    )
            live_view.look(in_flight, nursery)
            # A tick as well as every append: limits on the wall clock need looking at.
            with trio.move_on_after(TICK_SECONDS):
                await changed.wait()
        nursery.cancel_scope.cancel()
    return journal.state


class LiveViewGate:
    """Lets the live view start (daemon.watch_command) once the first agents have been
    started: once commands that start agents were under way, and none is any more."""

    _STARTING = frozenset({cmd.PrepareWorkspace.__name__, cmd.OpenPane.__name__})

    def __init__(self, panes: Panes, execution_id: str) -> None:
        self._panes = panes
        self._channel = live_view_channel(execution_id)
        self._starting_seen = False
        self._open = False

    def look(self, in_flight: set[tuple[str, str, int]], nursery: trio.Nursery) -> None:
        if self._open:
            return
        starting = any(name in self._STARTING for name, _, _ in in_flight)
        self._starting_seen |= starting
        if self._starting_seen and not starting:
            self._open = True
            nursery.start_soon(self._signal)

    async def _signal(self) -> None:
        try:
            await self._panes.signal(self._channel)
        except KairoError as error:  # it starts on its own a few seconds later
            log.debug("live_view_signal_failed", error=error.message)


async def _carry_out(
    journal: Journal,
    edges: Edges,
    command: cmd.Command,
    in_flight: set[tuple[str, str, int]],
    turns: Turns,
    placement: Placement | None = None,
) -> None:
    with structlog.contextvars.bound_contextvars(
        subtask_id=command.subtask_id or None, attempt=command.attempt or None
    ):
        try:
            rank = journal.agenda.merge_position.get(command.subtask_id, 0)
            if placement is not None and placement.places(command):
                events = await placement.carry_out(journal, command)
            else:
                async with turns.turn(command, rank):
                    before = journal.state
                    events = await execute(edges, before, command)
                    if placement is not None:
                        await placement.published(before, command)
        except KairoError as error:
            if not command.subtask_id:
                raise
            log.warning(
                "step_failed",
                command=type(command).__name__,
                error=error.message,
                **error.context(),
            )
            events = _failure_events(journal.state, command, error)
        # The key is released only once the events are in the state, so that the loop
        # never sees the old state without the key and starts the command again.
        await journal.append(events)
        in_flight.discard(command.key)
        # Every subtask the events name: a merge step's, not its first alone.
        for subtask_id in _named(events) or [command.subtask_id]:
            await retitle(edges.panes, journal.state, subtask_id)


def _ends(events: Sequence[ev.ExecutionEvent]) -> bool:
    return any(isinstance(event, ev.ExecutionEnded) for event in events)


def _named(events: Sequence[ev.ExecutionEvent]) -> list[str]:
    """The subtasks `events` name, once each, in their order."""
    return list(dict.fromkeys(sid for event in events for sid in ev.subtasks_named(event)))


def _failure_events(
    state: ExecutionState, command: cmd.Command, error: KairoError
) -> list[ev.ExecutionEvent]:
    if isinstance(command, cmd.ReleaseWorkspace):
        # The work is merged; a worktree that would not go is left for `clean`, not a failure.
        return [ev.WorkspaceReleased(subtask_id=command.subtask_id)]
    code = _FAILURE_CODE.get(type(command), ReasonCode.AGENT_FAILED)
    reason = Reason(code=code, detail=error.message)
    if isinstance(command, cmd.CheckIntegration | cmd.UndoMerges):
        # Every merge waiting for the check: each is built on the ones before it.
        return [ev.SubtaskFailed(subtask_id=sid, reason=reason) for sid in state.unverified]
    return [ev.SubtaskFailed(subtask_id=command.subtask_id, reason=reason)]


async def retitle(panes: Panes, state: ExecutionState, subtask_id: str) -> None:
    """Keep each agent pane's title saying what became of it; cosmetic, never fatal. A
    title it already has costs nothing (TmuxServer remembers them). What is logged of a
    pane names its own subtask and attempt, not those of the step that retitles it (a
    merge step's first subtask retitles every subtask it merged)."""
    if not subtask_id or subtask_id in state.assignments:  # its panes are its worker's
        return
    view = state.subtask(subtask_id)
    titles = pane_titles(subtask_id, view)
    for attempt in view.attempts:
        if attempt.pane_id not in titles:
            continue
        with structlog.contextvars.bound_contextvars(subtask_id=subtask_id, attempt=attempt.number):
            try:
                spec = runner_spec(attempt.run_dir)
                await panes.set_pane_title(attempt.pane_id, spec, titles[attempt.pane_id])
            except KairoError as error:
                log.debug("retitle_failed", pane_id=attempt.pane_id, error=error.message)


def pane_titles(subtask_id: str, view: SubtaskView) -> dict[str, str]:
    """Each attempt's pane: the last says the subtask's state; an earlier one, which a
    retry left behind in its window, says how its attempt ended."""
    titles: dict[str, str] = {}
    last = len(view.attempts) - 1
    for i, attempt in enumerate(view.attempts):
        if not attempt.pane_id:
            continue
        numbered = f" · attempt {attempt.number}" if len(view.attempts) > 1 else ""
        if i == last:
            titles[attempt.pane_id] = f"{subtask_id} · {view.state}{numbered}"
        elif attempt.interrupted:
            titles[attempt.pane_id] = f"{subtask_id}{numbered} · interrupted"
        else:
            # The code, never the sentence read back: an OTHER reason has no word to show.
            code = attempt.reason.code if attempt.reason is not None else ReasonCode.OTHER
            word = "ended" if code is ReasonCode.OTHER else code.value
            titles[attempt.pane_id] = f"{subtask_id}{numbered} · sent back ({word})"
    return titles
