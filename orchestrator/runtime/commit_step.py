"""An attempt's work committed on its branch (a safe point), or, for an attempt a stop or a
limit cut short, set aside on a recovery ref and the worktree reset to its safe point."""

from __future__ import annotations

from pathlib import Path

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.ids import short_id
from orchestrator.core.state import ExecutionState
from orchestrator.runtime import resolution
from orchestrator.runtime.edges import Edges


async def commit_attempt(
    edges: Edges, state: ExecutionState, command: cmd.CommitAttempt
) -> list[ev.ExecutionEvent]:
    sid, number = command.subtask_id, command.attempt
    view = state.subtask(sid)
    attempt = view.current_attempt
    assert view.worktree is not None and attempt is not None
    if attempt.stopped_by is not None:
        return [await _set_aside(edges, state, sid, number)]
    if attempt.resolution is not None:  # the merge it resolved, committed and checked
        committed = await resolution.commit(edges, state, sid)
        await edges.guard.settled(sid, number, Path(view.worktree))
        return [committed]
    # The agent's own account of its work, where it gave one, as the commit's body.
    said = f"\n\n{attempt.summary.strip()}" if attempt.summary.strip() else ""
    outcome = await edges.repository.commit_all(
        Path(view.worktree),
        message=f"kairo: {sid}, attempt {number}\n\n{state.spec(sid).title}{said}",
        trailers={
            "Kairo-Execution": state.execution_id,
            "Kairo-Subtask": sid,
            "Kairo-Attempt": str(number),
        },
        start_commit=attempt.start_commit,
        expected_branch=view.branch,
        leave_out=view.copied,
    )
    await edges.guard.settled(sid, number, Path(view.worktree))
    # What the branch changed since the subtask started, for feedback on the files the task
    # names: the first attempt's own change, or one git process for a later attempt's.
    branch_paths = outcome.paths
    if attempt.start_commit != view.start_commit and view.start_commit is not None:
        branch_paths = (
            await edges.repository.diffstat(view.start_commit, outcome.head_commit)
        ).paths
    return [
        ev.AttemptCommitted(
            subtask_id=sid,
            attempt=number,
            head_commit=outcome.head_commit,
            changed=outcome.changed,
            files_changed=outcome.files_changed,
            tree=await edges.repository.tree_of(outcome.head_commit),
            in_submodules=outcome.in_submodules,
            paths=outcome.paths,
            branch_paths=branch_paths,
        )
    ]


async def _set_aside(
    edges: Edges, state: ExecutionState, sid: str, number: int
) -> ev.AttemptCommitted:
    """A stopped attempt's partial work goes on a recovery ref, not on its branch."""
    view = state.subtask(sid)
    attempt = view.current_attempt
    assert view.worktree is not None and attempt is not None
    worktree = Path(view.worktree)
    ref = await edges.repository.save_worktree_state(
        worktree,
        ref=f"refs/kairo/stopped/{short_id(state.execution_id)}/{sid}/{number}",
        safe_commit=attempt.start_commit,
        message=f"kairo: what attempt {number} of {sid} left when it was stopped",
        leave_out=view.copied,
    )
    assert view.branch is not None
    await edges.repository.reset_worktree(
        worktree, attempt.start_commit, branch=view.branch, leave_out=view.copied
    )
    return ev.AttemptCommitted(
        subtask_id=sid,
        attempt=number,
        head_commit=attempt.start_commit,
        changed=False,
        tree=await edges.repository.tree_of(attempt.start_commit),
        recovery_ref=ref,
    )
