"""Which of an execution's branches its conflict map compares, and the map itself
(git/conflict_map.py): for `kairo-orch conflicts`, the report, and the HTML report an
execution writes as it ends.

The branches mapped are those that will or may still merge: accepted and waiting, running
(what is committed on the branch, and what its worktree holds uncommitted), and conflicted
(their work is kept, to be merged once resolved). Merged work is the integration branch's:
a branch's conflicts with it are its merge's to report.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.core.conflict_map import ConflictMap
from orchestrator.core.state import ExecutionState
from orchestrator.errors import KairoError
from orchestrator.git.conflict_map import BranchToMap

# States whose branch is mapped; those with an agent or its check at work include their
# worktree's uncommitted changes.
_MAPPED = ("running", "verifying", "succeeded", "conflicted")
_AT_WORK = ("running", "verifying")


def branches_to_map(state: ExecutionState) -> list[BranchToMap]:
    """The branches of `state`'s subtasks to map, in the plan's order."""
    found = []
    for spec in state.plan.subtasks:
        view = state.subtask(spec.id)
        if view.state not in _MAPPED:
            continue
        if view.start_commit is None or view.head_commit is None:
            continue  # its worktree is still being made
        at_work = view.state in _AT_WORK and view.worktree is not None
        found.append(
            BranchToMap(
                subtask_id=view.id,
                state=view.state,
                start_commit=view.start_commit,
                head=view.head_commit,
                worktree=Path(view.worktree) if at_work and view.worktree else None,
                leave_out=view.copied,
            )
        )
    return found


def map_of(repo_root: Path, state: ExecutionState) -> ConflictMap:
    """The conflict map of `state`'s branches, in the repository at `repo_root`."""
    import trio  # here: `report` imports this module, and maps only where there is a pair

    from orchestrator.git.conflict_map import conflict_map

    branches = branches_to_map(state)
    return trio.run(conflict_map, repo_root, branches)


def map_if_any(repo_root: Path, state: ExecutionState) -> ConflictMap | None:
    """The map where there is a pair of branches to map and git can map them: another
    repository's execution (a shared store) has its commits elsewhere, and the report says
    what its log says (`kairo-orch conflicts` there maps it)."""
    if len(branches_to_map(state)) < 2:
        return None
    try:
        return map_of(repo_root, state)
    except KairoError:
        return None
