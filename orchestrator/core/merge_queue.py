"""The merge queue as `decide` sees it: which accepted subtasks merge next, in which steps,
how their merges are checked, and which merged subtasks' worktrees go back."""

from __future__ import annotations

from collections.abc import Iterator

from orchestrator.core.agenda import Agenda, Group
from orchestrator.core.commands import CheckIntegration, MergeSubtask, ReleaseWorkspace, UndoMerges
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import TERMINAL

#: Accepted subtasks merged in one step at most, each its own merge commit. A step's merges
#: are recorded together as it ends, so a longer step holds more of them unrecorded
#: (docs/benchmarks.md, "A thousand subtasks").
MERGE_BATCH = 4


def merge_steps(state: ExecutionState, agenda: Agenda) -> Iterator[MergeSubtask]:
    """One merge step at a time, in plan order or in order of completion, of up to
    MERGE_BATCH subtasks, or `integration_batch` when merges are checked; none while
    merges wait for their check, since the next merge would build on them."""
    if state.unverified:
        return
    checked = state.plan.integration_verify is not None
    batch = state.plan.integration_batch if checked else MERGE_BATCH
    if state.plan.merge_order == "completion":
        ready = [state.subtask(sid) for sid in agenda.members[Group.SUCCEEDED]]
        ready.sort(key=lambda v: v.succeeded_at_seq or 0)
        queue = [view.id for view in ready[:batch]]
    else:
        queue = list(_plan_order_queue(state, agenda, batch))
    if queue:
        yield MergeSubtask(subtask_id=queue[0], then=tuple(queue[1:]))


def integration_checks(state: ExecutionState) -> Iterator[CheckIntegration | UndoMerges]:
    """The check of the merges waiting for one: all of them first; after a failure, the
    first half of the shortest run seen failing, until the culprit is the first merge
    waiting (a pass settles the run checked and shortens the failing one). Then the
    branch goes back, and after a check a stop cut short likewise."""
    waiting = state.unverified
    if not waiting:
        return
    fails_at = state.fails_at
    if fails_at == 1 or state.check_stopped:
        yield UndoMerges(subtask_id=waiting[0])
        return
    run = waiting[: fails_at // 2 if fails_at else len(waiting)]
    yield CheckIntegration(subtask_id=run[-1], subtask_ids=run)


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
