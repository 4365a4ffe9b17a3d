"""The branches kairo-orch names after an execution, found by its short id alone: what
an execution left can be found when its log is gone (runtime/leftovers.py). Light: `list`
asks, and it imports no trio."""

from __future__ import annotations

from pathlib import Path

from orchestrator.core.ids import SUBTASK_NAMESPACE, named_short_id
from orchestrator.git.invocation import git_sync
from orchestrator.git.repo import RepoPaths
from orchestrator.kairo_dir import started_with_another_store


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


def unlogged_short_ids(paths: RepoPaths, logged: set[str], store_url: str | None) -> list[str]:
    """The short ids of executions that left subtask branches here but are not `logged`
    in the store `store_url` names, nor said by their run folder to run with another."""
    found = {
        named_short_id(branch)
        for branch in kairo_branches(paths.toplevel)
        if branch.startswith(f"{SUBTASK_NAMESPACE}/")
    }
    return sorted(
        short
        for short in found
        if short is not None
        and short not in logged
        and not started_with_another_store(paths.git_common_dir, short, store_url)
    )
