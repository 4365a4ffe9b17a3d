"""An attempt at resolving a merge conflict, at the edge: the merge left in the worktree
with what the agent is told, before its pane opens; its commit, and the check of it, after.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.core import events as ev
from orchestrator.core.ids import short_id
from orchestrator.core.resolution import (
    EXPLANATION_FILE,
    RESOLUTION_DIFF_CHARS,
    bounded,
    conflict_section,
    dropped_hunks,
    has_markers,
    hunk_labels,
    unexplained,
)
from orchestrator.core.state import ExecutionState
from orchestrator.errors import StepFailed
from orchestrator.runtime.edges import Edges
from orchestrator.runtime.ports import ConflictResolutions


def _git(edges: Edges) -> ConflictResolutions:
    if edges.resolutions is None:
        raise StepFailed("resolving a conflict needs git, which this edge does not have")
    return edges.resolutions


async def prepare(edges: Edges, state: ExecutionState, subtask_id: str) -> str:
    """The merge under way in the worktree (again from a clean one, if the last was cut
    short), and the prompt's account of it."""
    git = _git(edges)
    view = state.subtask(subtask_id)
    attempt = view.current_attempt
    assert attempt is not None and attempt.resolution is not None and view.worktree is not None
    started, worktree = attempt.resolution, Path(view.worktree)
    assert view.branch is not None
    await git.start_merge(
        worktree,
        branch=view.branch,
        start_commit=started.start_commit,
        merged_in=started.merged_in,
        leave_out=view.copied,
    )
    base = await git.merge_base(worktree, started.start_commit, started.merged_in)
    sides: dict[str, str] = {}
    labels: dict[str, list[str]] = {}
    for conflict in started.conflicts:
        path = conflict.path
        diff = await git.diff_of(worktree, base, started.merged_in, [path])
        sides[path] = bounded(diff)
        texts = [
            await git.text_at(worktree, rev, path)
            for rev in (base, started.start_commit, started.merged_in)
        ]
        labels[path] = hunk_labels(path, *texts)
    return conflict_section(started, sides, labels)


async def commit(edges: Edges, state: ExecutionState, subtask_id: str) -> ev.AttemptCommitted:
    """The resolution committed as the merge, kept on a ref of its own whatever its fate,
    and checked: markers, unmerged paths, and every side's hunks against the result."""
    git = _git(edges)
    view = state.subtask(subtask_id)
    attempt = view.current_attempt
    assert attempt is not None and attempt.resolution is not None and view.worktree is not None
    started, worktree = attempt.resolution, Path(view.worktree)
    explanation = await git.take_explanation(worktree / EXPLANATION_FILE)
    assert view.branch is not None
    done = await git.commit(
        worktree,
        branch=view.branch,
        merged_in=started.merged_in,
        message=f"kairo: {subtask_id}, attempt {attempt.number}: its conflict with "
        f"{started.merged_in[:12]} resolved",
        trailers={
            "Kairo-Execution": state.execution_id,
            "Kairo-Subtask": subtask_id,
            "Kairo-Attempt": str(attempt.number),
        },
        leave_out=view.copied,
    )
    head = done.head_commit
    ref = f"refs/kairo/resolutions/{short_id(state.execution_id)}/{subtask_id}/{attempt.number}"
    await git.keep(worktree, ref, head)
    paths = [c.path for c in started.conflicts]
    base = await git.merge_base(worktree, started.start_commit, started.merged_in)
    unfinished: set[str] = set()  # unmerged entries were staged as the agent left them
    dropped: list[ev.DroppedHunk] = []
    for path in paths:
        texts = [
            await git.text_at(worktree, rev, path)
            for rev in (base, started.start_commit, started.merged_in, head)
        ]
        if has_markers(texts[3]):
            unfinished.add(path)
        dropped += dropped_hunks(path, *texts)
    diff = await git.diff_of(worktree, started.merged_in, head, paths)
    check = ev.ResolutionCheck(
        merged_in=started.merged_in,
        unfinished=tuple(sorted(unfinished)),
        merge_missing=done.merge_missing,
        dropped=tuple(dropped),
        unexplained=unexplained(dropped, explanation),
        explanation=explanation[:RESOLUTION_DIFF_CHARS],
        diff=diff[:RESOLUTION_DIFF_CHARS],
    )
    changed = head != attempt.start_commit
    stat = await edges.repository.diffstat(attempt.start_commit, head) if changed else None
    return ev.AttemptCommitted(
        subtask_id=subtask_id,
        attempt=attempt.number,
        head_commit=head,
        changed=changed,
        files_changed=len(stat.paths) if stat else 0,
        tree=await edges.repository.tree_of(head),
        paths=stat.paths if stat else (),
        branch_paths=stat.paths if stat else (),
        resolution=check,
    )
