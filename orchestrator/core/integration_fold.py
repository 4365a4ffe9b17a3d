"""The fold of the merge queue's checks: merges waiting for `integration_verify`, checks
that settle them or narrow down the culprit, and merges undone (merge_queue.py decides).

The merges since the last passing check are `unverified`, in merge order, each subtask
`integrating`. A passing check of the first N settles those N (merged). A failing one moves
nothing: it says the culprit is among the first N, and a bisection checks shorter runs
until the shortest failing run is one merge long. Then the branch goes back to the last
commit that passed, the culprit fails, and the merges after it are made again, as are the
subtasks that conflicted with the branch while the culprit was on it.
"""

from __future__ import annotations

from dataclasses import replace

from orchestrator.core import events as ev
from orchestrator.core.execution_state import (
    ExecutionState,
    add_merged,
    move_subtask,
)
from orchestrator.core.lifecycle import Move
from orchestrator.core.reasons import Reason, ReasonCode


def conflicted(state: ExecutionState, subtask_id: str) -> ExecutionState:
    """A conflict with a branch that holds merges still to be checked may be with one that
    is undone later: if it is, the subtask merges again (`merges_undone.merge_again`)."""
    if not state.unverified:
        return state
    return replace(state, conflicted_unchecked=(*state.conflicted_unchecked, subtask_id))


def merged_to_check(state: ExecutionState, event: ev.SubtaskMerged) -> ExecutionState:
    state = replace(state, unverified=(*state.unverified, event.subtask_id))
    return move_subtask(state, event.subtask_id, Move.MERGED_TO_CHECK, merge=event)


def checked(state: ExecutionState, event: ev.IntegrationChecked) -> ExecutionState:
    ids = event.subtask_ids
    state = replace(state, checks_run=state.checks_run + 1)
    if not ids or state.unverified[: len(ids)] != ids:
        raise ValueError(
            f"integration_checked names {', '.join(ids)}, which are not the first merges "
            "waiting for a check"
        )
    if event.exit_code == 0:
        failed = state.check_failed
        if failed is not None and failed.subtask_ids[-1] in ids:
            failed = None  # a check that is no function of the tree: its latest word counts
        waiting = state.unverified[len(ids) :]
        # Once every merge a conflict may have been with has passed, the conflict stands.
        conflicted = state.conflicted_unchecked if waiting else ()
        state = replace(
            state, unverified=waiting, check_failed=failed, conflicted_unchecked=conflicted
        )
        for sid in ids:
            state = add_merged(state, sid, Move.CHECKED)
        return state
    if state.stop == "now":
        # `stop --now` ends a check (processes.py): its status is the stop's, no verdict.
        return replace(state, check_stopped=True)
    fails_at = state.fails_at
    if fails_at is None or len(ids) < fails_at:
        state = replace(state, check_failed=event)
    return state


def merging_again(state: ExecutionState, culprit: str | None) -> tuple[str, ...]:
    """`merges_undone.merge_again`: what merges again once the merges waiting for a check
    are undone. Those merges, but the culprit (none under `stop --now`: they stop), then
    the subtasks that conflicted with the branch while they were on it. (Older logs list
    only the latter: `undone` moves each undone merge by the culprit and the stop, whatever
    the list says.)"""
    again = () if state.stop == "now" else tuple(s for s in state.unverified if s != culprit)
    return (*again, *state.conflicted_unchecked)


def undone(state: ExecutionState, event: ev.MergesUndone) -> ExecutionState:
    failed = state.check_failed
    check = state.plan.integration_verify
    state = replace(
        state,
        integration_head=event.restored_commit,
        unverified=(),
        check_failed=None,
        check_stopped=False,
        conflicted_unchecked=(),
    )
    for sid in event.merge_again:
        if sid not in event.subtask_ids:  # an undone merge's own move is below
            state = move_subtask(state, sid, Move.UNDONE_CONFLICT_AGAIN, conflicts=(), reason=None)
    for sid in event.subtask_ids:
        kept = f"the merge was undone, and its work stays on {state.subtask(sid).branch}"
        if sid == event.culprit and failed is not None:
            # Nothing tells a merge that broke the check from a check that fails whatever
            # is merged (a typo, a base whose tests fail) until a check has passed once.
            doubt = (
                ""
                if state.merged
                else f"; no check has passed in this execution yet: if `{check}` fails on "
                "the base commit too, the check is at fault, not this merge"
            )
            reason = Reason(
                code=ReasonCode.INTEGRATION_VERIFY_FAILED,
                detail=f"`{check}` exited with status {failed.exit_code} on the integration "
                f"branch after {sid} merged; {kept}{doubt}",
            )
            state = move_subtask(
                state,
                sid,
                Move.UNDONE_CULPRIT,
                reason=reason,
                merge=None,
                integration_output=failed.output_tail,
            )
        elif state.stop == "now":
            reason = Reason(
                code=ReasonCode.STOPPED,
                detail=f"the execution was stopped before the check of {sid}'s merge "
                f"finished; {kept}",
            )
            state = move_subtask(state, sid, Move.UNDONE_STOPPED, reason=reason, merge=None)
        else:
            state = move_subtask(state, sid, Move.UNDONE_TO_MERGE_AGAIN, merge=None)
    return state


def off_the_queue(state: ExecutionState, subtask_id: str) -> ExecutionState:
    """A subtask waiting for a check that failed otherwise (its step could not run)."""
    if subtask_id not in state.unverified:
        return state
    unverified = tuple(sid for sid in state.unverified if sid != subtask_id)
    if not unverified:
        return replace(
            state, unverified=(), check_failed=None, check_stopped=False, conflicted_unchecked=()
        )
    failed = state.check_failed
    if failed is not None and failed.subtask_ids[-1] not in unverified:
        failed = None
    return replace(state, unverified=unverified, check_failed=failed)


def verified_alone(state: ExecutionState, event: ev.IntegrationVerified) -> ExecutionState:
    """A log written before merges were checked in batches: each merge checked alone, and
    undone by the same event when its check failed."""
    sid = event.subtask_id
    state = replace(
        state,
        unverified=tuple(s for s in state.unverified if s != sid),
        checks_run=state.checks_run + 1,
    )
    if event.exit_code == 0:
        return add_merged(state, sid, Move.CHECK_PASSED)
    check = state.plan.integration_verify
    undone_text = f"the merge was undone, and its work stays on {state.subtask(sid).branch}"
    if state.stop == "now":
        # `stop --now` ends the check (processes.py) or keeps it from starting: its status
        # is the stop's, no verdict on the merge, which goes back all the same.
        move = Move.CHECK_STOPPED
        reason = Reason(
            code=ReasonCode.STOPPED,
            detail=f"the execution was stopped before the check of {sid}'s merge finished; "
            f"{undone_text}",
        )
    else:
        move = Move.CHECK_FAILED
        reason = Reason(
            code=ReasonCode.INTEGRATION_VERIFY_FAILED,
            detail=f"`{check}` exited with status {event.exit_code} on the integration branch "
            f"after {sid} merged; {undone_text}",
        )
    state = replace(state, integration_head=event.restored_commit)
    return move_subtask(
        state, sid, move, reason=reason, merge=None, integration_output=event.output_tail
    )
