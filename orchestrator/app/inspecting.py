"""The read-only use cases: status, list, events, verify, report. Light: no trio."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from orchestrator.app.project import NoExecutionYet, open_project, repository_at
from orchestrator.app.results import ExecutionListed, LeftHere, SparesKept, Verified
from orchestrator.core.conflict_map import to_document
from orchestrator.core.ids import short_id_named
from orchestrator.core.report import build_report
from orchestrator.core.report_html import html_page
from orchestrator.core.timeline import unix_time
from orchestrator.errors import UsageError
from orchestrator.git.execution_branches import unlogged_short_ids
from orchestrator.git.spare_pools import spares_kept
from orchestrator.git.spare_setting import spare_bytes
from orchestrator.runtime.conflict_maps import map_if_any
from orchestrator.runtime.state_reader import read_logged
from orchestrator.store.base import StoredEvent, UnknownExecution


def status(repo: Path, store_url: str | None, execution: str | None) -> dict[str, Any]:
    """`status --json`'s document (cli.md)."""
    try:
        with open_project(repo, store_url, create=False) as project:
            execution_id = project.resolve(execution)
            row = project.row(execution_id)
            return project.document(project.state(execution_id), row)
    except (NoExecutionYet, UnknownExecution) as unknown:
        raise _with_leftovers(unknown, repo, execution, store_url) from None


def _with_leftovers(
    unknown: UsageError, repo: Path, execution: str | None, store_url: str | None
) -> UsageError:
    """`unknown`, saying what an execution of that ID left here, if it left anything: its
    store was deleted, say."""
    short = short_id_named(execution or "")
    if short is None:
        return unknown
    if short not in unlogged_short_ids(repository_at(repo), set(), store_url):
        return unknown
    return UsageError(
        f"this store has no log of execution {short}, but it left subtask branches here (its "
        f"store was deleted?); `kairo-orch clean {short}` removes what it left"
    )


def list_executions(repo: Path, store_url: str | None) -> tuple[ExecutionListed, ...]:
    """This repository's executions, newest first."""
    listed = []
    # A repository that never had one has no store yet either: none is made to say so.
    with contextlib.suppress(NoExecutionYet), open_project(repo, store_url, create=False) as p:
        for row in p.executions():
            state = p.state(row.execution_id)
            listed.append(
                ExecutionListed(
                    execution_id=row.execution_id,
                    plan=row.plan_name,
                    status=p.status_of(state, row),
                    created_at=row.created_at,
                    subtasks=len(state.subtasks),
                    merged=len(state.merged),
                )
            )
    return tuple(listed)


def left_here(repo: Path, store_url: str | None, logged: set[str]) -> LeftHere:
    """What the repository holds beside the logs of the executions `logged` names (their
    short ids): what others left, and the spare worktrees kept for reuse."""
    paths = repository_at(repo)
    count, size = spares_kept(paths.toplevel, paths.git_common_dir)
    return LeftHere(
        tuple(unlogged_short_ids(paths, logged, store_url)),
        SparesKept(count, size, spare_bytes(os.environ)) if count else None,
    )


def events(repo: Path, store_url: str | None, execution: str | None) -> list[StoredEvent]:
    with open_project(repo, store_url, create=False) as project:
        return project.store.read_events(project.resolve(execution))


def verify(repo: Path, store_url: str | None, execution: str | None) -> Verified:
    """The log's hash chain and head checked, and against what its supervisors wrote (a
    tampered log: exit 3)."""
    with open_project(repo, store_url, create=False) as project:
        execution_id = project.resolve(execution)
        seq, head_hash = project.verify(execution_id)
    return Verified(execution_id, seq, head_hash)


def report(repo: Path, store_url: str | None, execution: str | None) -> dict[str, Any]:
    """`report --json`'s document."""
    with open_project(repo, store_url, create=False) as project:
        execution_id = project.resolve(execution)
        state = project.state(execution_id)
        document = build_report(state, project.status_of(state, project.row(execution_id)))
        root = project.paths.toplevel
    found = map_if_any(root, state)
    if found is not None:
        document["conflict_map"] = to_document(found)
    return document


def report_html(repo: Path, store_url: str | None, execution: str | None) -> str:
    """`report --html`'s page: of a running execution, a snapshot of now."""
    with open_project(repo, store_url, create=False) as project:
        execution_id = project.resolve(execution)
        row = project.row(execution_id)
        state, logged = read_logged(project.store, execution_id)
        document = project.document(state, row)
        root = project.paths.toplevel
    found = map_if_any(root, state)
    return html_page(
        state,
        logged,
        document,
        now=time.time(),
        conflict_map=found,
        last_heartbeat=unix_time(row.updated_at),
    )
