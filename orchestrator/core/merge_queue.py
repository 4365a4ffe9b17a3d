"""The merge queue as `decide` sees it: which accepted subtasks merge next, in which steps,
and which merged subtasks' worktrees go back."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from orchestrator.core.agenda import Agenda, Group
from orchestrator.core.commands import MergeSubtask, ReleaseWorkspace
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import TERMINAL, SubtaskView

#: Accepted subtasks merged in one step at most, each its own merge commit. A step's merges
#: are recorded together as it ends, so a longer step holds more of them unrecorded
#: (docs/benchmarks.md, "A thousand subtasks").
MERGE_BATCH = 4


def merge_steps(
    state: ExecutionState, agenda: Agenda, active: Sequence[SubtaskView]
) -> Iterator[MergeSubtask]:
    """One merge step at a time, in plan order or in order of completion, of up to
    MERGE_BATCH subtasks; none while the last merge's integration check runs, since the
    next merge would build on it, and one subtask a step when every merge is checked."""
    if any(view.checking_integration for view in active):
        return
    batch = 1 if state.plan.integration_verify is not None else MERGE_BATCH
    if state.plan.merge_order == "completion":
        ready = [state.subtask(sid) for sid in agenda.members[Group.SUCCEEDED]]
        ready.sort(key=lambda v: v.succeeded_at_seq or 0)
        queue = [view.id for view in ready[:batch]]
    else:
        queue = list(_plan_order_queue(state, agenda, batch))
    if queue:
        yield MergeSubtask(subtask_id=queue[0], then=tuple(queue[1:]))


def _plan_order_queue(state: ExecutionState, agenda: Agenda, batch: int) -> Iterator[str]:
    """From the merge queue's head: the accepted subtasks, past those that ended without
    one, up to the first still to finish (an earlier subtask holds the queue)."""
    for sid in agenda.merge_sequence[agenda.merge_head :]:
        if batch <= 0:
            return
        view = state.subtask(sid)
        if view.state == "succeeded":
            batch -= 1
            yield sid
        elif view.state not in TERMINAL:
            return


def releases(agenda: Agenda) -> Iterator[ReleaseWorkspace]:
    for sid in agenda.group(Group.TO_RELEASE):
        yield ReleaseWorkspace(subtask_id=sid)
