"""What running attempts have used so far: their stream filters' live files (agents/
live_usage.py), read for the supervisor's budgets and for `status` and the live view.

Without trio: `status` and the live view import it, and start nothing.
"""

from __future__ import annotations

from pathlib import Path

from agents.live_usage import read_live
from agents.usage import USAGE_FILE
from orchestrator.core.plan import ResolvedPlan
from orchestrator.core.state import ExecutionState

LiveUsage = dict[str, int | None]


def running_usage(state: ExecutionState) -> dict[str, LiveUsage]:
    """Each running attempt's live usage, by subtask, where its filter keeps one."""
    found = {}
    for view in state.subtasks.values():
        attempt = view.current_attempt
        if attempt is None or attempt.pane_id is None or attempt.exited or attempt.finished:
            continue
        live = read_live(str(Path(attempt.run_dir) / USAGE_FILE))
        if live is not None:
            found[view.id] = live
    return found


def watches_tokens(plan: ResolvedPlan) -> bool:
    """Whether a token budget is set, which running attempts' live counts are read for."""
    return plan.execution_limits.token_budget is not None or any(
        spec.limits.token_budget is not None for spec in plan.subtasks
    )


def live_tokens(state: ExecutionState) -> dict[str, int]:
    """Each running attempt's tokens so far, by subtask."""
    return {sid: live["tokens"] or 0 for sid, live in running_usage(state).items()}
