"""Finished subtasks' branches merged into the integration branch.

`merge_subtasks` writes the merges without a checkout (git/merge.py) and names, for each
conflict, the merged subtasks that touched the path. Checking them is
integration_checks.py's.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.reasons import Reason, ReasonCode
from orchestrator.core.state import ExecutionState
from orchestrator.errors import KairoError
from orchestrator.git.history import NO_CHANGE, DiffStat
from orchestrator.git.merge import Conflicted, Merged
from orchestrator.git.refs import branch_ref
from orchestrator.runtime.edges import Edges


async def merge_subtasks(
    edges: Edges, state: ExecutionState, command: cmd.MergeSubtask
) -> list[ev.ExecutionEvent]:
    """Each subtask of the step merged in turn, each its own merge commit, up to the first
    that conflicts or fails; the ones after it stay accepted, for the next step. What was
    merged before a failure is recorded with it: the ref holds it already."""
    # The guard holds while the branch moves: no comparison sees it half way.
    async with edges.guard.moving_integration("merge") as moving:
        merged = await _merge_in_turn(edges, state, command, moving.heads)
    return [*moving.events, *merged]


async def _merge_in_turn(
    edges: Edges,
    state: ExecutionState,
    command: cmd.MergeSubtask,
    heads: list[str],
) -> list[ev.ExecutionEvent]:
    events: list[ev.ExecutionEvent] = []
    head = state.integration_head
    merged_now: list[ev.SubtaskMerged] = []
    for sid in command.subtask_ids:
        try:
            event = await _merge_one(edges, state, sid, head, merged_now, heads)
        except KairoError as error:
            if not events:
                raise  # the step's own failure: its first subtask's, as for one alone
            reason = Reason(code=ReasonCode.MERGE_FAILED, detail=error.message)
            return [*events, ev.SubtaskFailed(subtask_id=sid, reason=reason)]
        events.append(event)
        if not isinstance(event, ev.SubtaskMerged):
            break
        head = event.merge_commit
        merged_now.append(event)
    return events


async def _merge_one(
    edges: Edges,
    state: ExecutionState,
    sid: str,
    made_on: str | None,
    merged_now: Sequence[ev.SubtaskMerged],
    heads: list[str],
) -> ev.SubtaskMerged | ev.SubtaskConflicted:
    view = state.subtask(sid)
    assert view.head_commit is not None
    spec = state.spec(sid)
    target = branch_ref(state.created.integration_branch)
    outcome = await edges.repository.merge(
        target_ref=target,
        source_commit=view.head_commit,
        message=(
            f"kairo: merge {sid}{'' if spec.title == sid else ': ' + spec.title}\n\n"
            f"Kairo-Execution: {state.execution_id}\nKairo-Subtask: {sid}\n"
        ),
        made_on=made_on,  # a merge of ours is made on the head the log has
    )
    if isinstance(outcome, Conflicted):
        return ev.SubtaskConflicted(
            subtask_id=sid,
            head_commit=view.head_commit,
            conflicts=tuple(
                ev.Conflict(
                    path=c.path,
                    kind=c.kind,
                    message=c.message,
                    **{"with": _touched_by_merged(state, merged_now, c.path)},
                )
                for c in outcome.conflicts
            ),
        )
    heads.append(outcome.merge_commit)  # where the guard finds the branch until logged
    stat = await _change_of(edges, target, outcome)
    return ev.SubtaskMerged(
        subtask_id=sid,
        merge_commit=outcome.merge_commit,
        previous_commit=outcome.previous_commit,
        head_commit=view.head_commit,
        changed_paths=stat.paths,
        diffstat=stat.text,
        insertions=stat.insertions,
        deletions=stat.deletions,
    )


async def _change_of(edges: Edges, target: str, outcome: Merged) -> DiffStat:
    """What the merge changed on the integration branch, as git made it: the merge commit
    against its first parent. Not the subtask's branch since it started, which, once a
    resolution merged the integration branch into it, holds the other subtasks' work too.

    A merge whose change cannot be read is taken back (a merge found already made is left
    as it was found), so that the log never lacks a merge the branch holds."""
    if outcome.merge_commit == outcome.previous_commit:
        return NO_CHANGE  # the branch held it already: no commit was written
    try:
        return await edges.repository.diffstat(outcome.previous_commit, outcome.merge_commit)
    except KairoError:
        if not outcome.already_merged:
            await edges.repository.update_ref(
                target, new=outcome.previous_commit, old=outcome.merge_commit
            )
        raise


def _touched_by_merged(
    state: ExecutionState, merged_now: Sequence[ev.SubtaskMerged], path: str
) -> tuple[str, ...]:
    """The already merged subtasks whose own changes include `path`, in merge order:
    those of the log, then those merged earlier in this step."""
    merges = [state.subtask(merged_id).merge for merged_id in state.merged]
    return tuple(
        merge.subtask_id
        for merge in (*merges, *merged_now)
        if merge is not None and path in merge.changed_paths
    )
