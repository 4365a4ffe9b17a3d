"""Closing the panes of ended attempts, so that a plan of a thousand subtasks leaves a tmux
session of a few windows, not a thousand panes.

A pane is closed once its attempt's agent has ended (the log has its exit, or recovery
found it gone) and its subtask has moved on past it (judged: merged, sent back, failed...),
after a grace period in which a user watching sees how it ended. Its output stays in the
attempt's run directory (`output.log`, which the runner writes as it goes), named by
`report` and the live view. Closing is cosmetic: a failure is logged, never fatal, and
nothing else (the worktree, the run's files, recovery) depends on the pane. The tmux layer
also closes an ended pane at once where a new pane needs its room (tmux/packing.py), so
the windows stay bounded by `max_parallel` even when attempts end faster than the grace.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Set
from pathlib import Path

import structlog
import trio

from orchestrator.core.state import ExecutionState
from orchestrator.core.views import ACTIVE, AttemptView, SubtaskView
from orchestrator.errors import KairoError
from orchestrator.runtime.attempts import RunFiles
from orchestrator.runtime.journal import Journal
from orchestrator.runtime.ports import Panes

log = structlog.get_logger(__name__)

#: How long the pane of an ended attempt stays open: long enough to see how it ended.
PANE_GRACE_S = 30.0
#: Seconds, instead of PANE_GRACE_S (docs/operations.md); 0 closes them at once.
GRACE_VARIABLE = "KAIRO_PANE_GRACE"
#: How often ended panes are looked for, at most.
LOOK_EVERY_S = 1.0
_LOOK_AT_LEAST_S = 0.05


def pane_grace(environment: Mapping[str, str]) -> float:
    """The grace period KAIRO_PANE_GRACE asks for; a value that is no number of seconds
    is warned of and the default kept (a cosmetic setting stops no run)."""
    text = environment.get(GRACE_VARIABLE, "").strip()
    if not text:
        return PANE_GRACE_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        log.warning("pane_grace_ignored", value=text, default=PANE_GRACE_S)
        return PANE_GRACE_S
    return seconds


def ended_panes(state: ExecutionState, closed: Set[str] = frozenset()) -> dict[str, str]:
    """The panes that may be closed, but for those `closed` already, each with its runner's
    spec (which the pane's command names): their attempts ended and their subtasks moved
    on. Those whose attempts started first come first (likely to have ended first)."""
    found = [
        (attempt.started_at or 0.0, attempt.pane_id, attempt.run_dir)
        for view in state.subtasks.values()
        for attempt in view.attempts
        if attempt.pane_id and attempt.pane_id not in closed and moved_on(view, attempt)
    ]
    return {pane_id: runner_spec(run_dir) for _, pane_id, run_dir in sorted(found)}


@functools.lru_cache(maxsize=4096)
def runner_spec(run_dir: str) -> str:
    """An attempt's runner spec, as its pane's command names it: asked for every ended
    attempt each time a pane opens, which a plan of a thousand makes many."""
    return str(RunFiles(Path(run_dir)).spec)


def moved_on(view: SubtaskView, attempt: AttemptView) -> bool:
    """Whether `attempt` of `view` is over for good: its agent is known to have ended (a
    pane whose agent may still run is never closed), and its subtask is past it (not still
    verifying or judging it)."""
    if not (attempt.exited or attempt.interrupted):
        return False
    return attempt.number != view.attempts[-1].number or view.state not in ACTIVE


async def close_ended_panes(journal: Journal, panes: Panes, grace_s: float) -> None:
    """Until cancelled: close each ended pane `grace_s` after it was first seen ended (by
    this supervisor: a resumed one gives the panes it finds a grace of their own)."""
    session = journal.state.created.tmux_session
    every = max(_LOOK_AT_LEAST_S, min(LOOK_EVERY_S, grace_s))
    seen: dict[str, float] = {}
    closed: set[str] = set()
    while True:
        now = trio.current_time()
        ended = ended_panes(journal.state, closed)
        # A pane's subtask may go back to work on it (merged, then checked): its grace
        # begins again when it is over again.
        seen = {pane_id: seen.get(pane_id, now) for pane_id in ended}
        due = {pane_id: ended[pane_id] for pane_id, at in seen.items() if now - at >= grace_s}
        if due:
            try:
                await panes.close_panes(session, due)
            except KairoError as error:  # its tmux server gone, say: nothing to tidy
                log.info("panes_not_closed", pane_ids=list(due), error=error.message)
            closed.update(due)
            for pane_id in due:
                del seen[pane_id]
        await trio.sleep(every)
