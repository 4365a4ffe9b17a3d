"""`kairo-orch conflicts`: the conflict map of an execution's branches (core/conflict_map.py,
runtime/conflict_maps.py)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.app.project import open_project
from orchestrator.core.conflict_map import ConflictMap
from orchestrator.runtime.conflict_maps import map_of


def conflicts(repo: Path, store_url: str | None, execution: str | None) -> ConflictMap:
    """The conflict map of the execution ID names (this repository's newest without)."""
    with open_project(repo, store_url, create=False) as project:
        execution_id = project.resolve_own(execution)
        state = project.state(execution_id)
        root = project.paths.toplevel
    return map_of(root, state)
