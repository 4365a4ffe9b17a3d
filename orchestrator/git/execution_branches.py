"""The branches kairo-orch names after an execution, found by its short id alone: what
an execution left can be found when its log is gone (runtime/leftovers.py). Light: `list`
asks, and it imports no trio."""

from __future__ import annotations

from pathlib import Path

from orchestrator.core.ids import SUBTASK_NAMESPACE, named_short_id
from orchestrator.git.repo import git_sync


def kairo_branches(root: Path) -> list[str]:
    """Every subtask branch, and every branch of the default integration branches' form."""
    result = git_sync(
        "for-each-ref",
        "--format=%(refname)",
        f"refs/heads/{SUBTASK_NAMESPACE}/",
        "refs/heads/kairo/",
        cwd=root,
    )
    return [line.removeprefix("refs/heads/") for line in result.stdout.splitlines()]


def unlogged_short_ids(root: Path, logged: set[str]) -> list[str]:
    """The short ids of executions that left subtask branches here but are not `logged`."""
    found = {
        named_short_id(branch)
        for branch in kairo_branches(root)
        if branch.startswith(f"{SUBTASK_NAMESPACE}/")
    }
    return sorted(short for short in found if short is not None and short not in logged)
