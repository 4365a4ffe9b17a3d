"""What the guard looks at of the execution's own (its branches, its worktrees), and
whom it suspects of a change: pure functions of the folded state (core/guard.py has the
rest of the guard).

Local mode cannot tell which agent changed something, nor an agent from the user: the
suspects are every subtask whose agent or check may have run since the last comparison.
Comparisons run after every attempt and every check ends, so with one agent at work the
suspect is the culprit; with several, all that were running are failed, which is the
price of a change nobody may make.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

from orchestrator.core.continuation import needs_verify
from orchestrator.core.resolution import awaiting_resolution
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import SubtaskView


def code_may_run(state: ExecutionState, view: SubtaskView) -> bool:
    """Whether the subtask's agent, or its `verify`, may be running now: from the decision
    to start an attempt until its exit, and while its check is to come."""
    attempt = view.current_attempt
    if attempt is None or attempt.finished:
        return False
    if not attempt.exited:
        return True
    return attempt.committed and needs_verify(state.spec(view.id), attempt)


def suspects(state: ExecutionState, triggers: Collection[str] = ()) -> tuple[str, ...]:
    """Those a change found now is blamed on, in plan order: the subtasks whose ending
    agent or check asked for the comparison (`triggers`), and every one whose agent or
    check may be running. Only those with an attempt still to judge: it is what fails."""
    found = []
    for view in state.subtasks.values():
        attempt = view.current_attempt
        if attempt is None or attempt.finished:
            continue
        if view.id in triggers or code_may_run(state, view):
            found.append(view.id)
    return tuple(found)


@dataclass(frozen=True)
class MovedBranch:
    subtask_id: str | None  # None: the integration branch
    ref: str
    logged: str  # where the log says it is
    found: str | None  # where it is (None: deleted)


def moved_branches(state: ExecutionState, refs: Mapping[str, str]) -> list[MovedBranch]:
    """The execution's branches not where its log says (`refs`: every ref, as found): the
    integration branch, and each subtask's, but while an attempt of its may still commit
    on it. One dictionary look a subtask where all is well: at a thousand subtasks, at
    every comparison."""
    moved = []
    head = state.integration_head
    if head is not None:
        ref = f"refs/heads/{state.created.integration_branch}"
        if refs.get(ref) != head:
            moved.append(MovedBranch(None, ref, head, refs.get(ref)))
    for view in state.subtasks.values():
        if view.branch is None or view.head_commit is None:
            continue
        ref = "refs/heads/" + view.branch
        found = refs.get(ref)
        if found == view.head_commit:
            continue
        attempt = view.current_attempt
        if attempt is not None and not attempt.finished and not attempt.committed:
            continue  # its agent, or the step that commits for it, moves it
        moved.append(MovedBranch(view.id, ref, view.head_commit, found))
    return moved


def linked_worktrees(state: ExecutionState) -> Iterator[tuple[str, str]]:
    """(subtask, worktree) of every worktree of the execution whose link to the git
    directory must hold: all but those merged, which are being put aside."""
    for view in state.subtasks.values():
        if view.worktree is not None and view.state != "merged":
            yield view.id, view.worktree


def watched_worktrees(state: ExecutionState) -> Iterator[tuple[str, int, str]]:
    """(subtask, attempt, worktree) of the worktrees whose files must not change: from an
    attempt's commit until its subtask merges or another attempt starts there, while no
    agent or check of theirs runs. What is in them then goes into no commit of theirs but
    the next attempt's or a resolution's, as their own work."""
    for view in state.subtasks.values():
        attempt = view.current_attempt
        if view.worktree is None or attempt is None or not attempt.committed:
            continue
        if view.state == "conflicted" and not awaiting_resolution(state, view):
            continue  # it ended: what the user finds in it is theirs to look at
        waiting = view.state in ("running", "verifying", "succeeded", "integrating", "conflicted")
        if waiting and not code_may_run(state, view):
            yield view.id, attempt.number, view.worktree


def link_problem(
    worktree: str,
    points_at: str | None,
    points_back: str | None,
    common: str | None,
    common_dir: str,
) -> str | None:
    """What is wrong with a worktree's link to the git directory, as git made it: its
    `.git` file names an administrative directory of the repository (`points_at`), whose
    `gitdir` names that `.git` file (`points_back`) and whose `commondir` is the
    repository's (`common`), every path resolved. An agent that rewrites them points the
    next `git status` there at a git directory of its own, and its config."""
    if points_at is None:
        return f"{worktree}/.git is no longer a file that names a git directory"
    if points_at.rpartition("/")[0] != f"{common_dir.rstrip('/')}/worktrees":
        return f"{worktree}/.git names {points_at}, not a worktree of the repository"
    if points_back != f"{worktree.rstrip('/')}/.git":
        return f"{points_at}/gitdir no longer names {worktree}/.git"
    if common != common_dir.rstrip("/"):
        return f"{points_at}/commondir no longer names the repository's git directory"
    return None
