"""`kairo-orch conflicts`: the conflict map of an execution's branches (core/conflict_map.py).

The branches mapped are those that will or may still merge: accepted and waiting, running
(what is committed on the branch, and what its worktree holds uncommitted), and conflicted
(their work is kept, to be merged once resolved). Merged work is the integration branch's:
a branch's conflicts with it are its merge's to report.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.app.project import open_project
from orchestrator.core.conflict_map import ConflictMap
from orchestrator.core.state import ExecutionState
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
        if view.state not in _MAPPED or view.checking_integration:
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


def conflicts(repo: Path, store_url: str | None, execution: str | None) -> ConflictMap:
    """The conflict map of the execution ID names (this repository's newest without)."""
    with open_project(repo, store_url, create=False) as project:
        execution_id = project.resolve_own(execution)
        state = project.state(execution_id)
        root = project.paths.toplevel
    return map_of(root, state)
