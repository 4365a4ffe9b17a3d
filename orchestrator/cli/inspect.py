"""Read-only commands: status, list, events, verify, report."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import click

from orchestrator.cli import render
from orchestrator.cli.context import NoExecutionYet, open_workspace, repository_at
from orchestrator.cli.options import common_options
from orchestrator.core.ids import short_id, short_id_named
from orchestrator.core.report import build_report, to_markdown
from orchestrator.errors import UsageError
from orchestrator.git.execution_branches import unlogged_short_ids
from orchestrator.git.spare_pools import spares_kept
from orchestrator.git.spare_setting import spare_bytes
from orchestrator.store.base import UnknownExecution


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (cli.md).")
@common_options
def status(execution: str | None, as_json: bool, repo: Path, store_url: str | None) -> None:
    """One execution: its state and every subtask's."""
    try:
        with open_workspace(repo, store_url, create=False) as ws:
            execution_id = ws.resolve(execution)
            row = ws.row(execution_id)
            document = ws.document(ws.state(execution_id), row)
    except (NoExecutionYet, UnknownExecution) as unknown:
        raise _with_leftovers(unknown, repo, execution, store_url) from None
    if as_json:
        click.echo(json.dumps(document, indent=2))
    else:
        render.status(document)


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


@click.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="A JSON array, newest first.")
@common_options
def list_(as_json: bool, repo: Path, store_url: str | None) -> None:
    """Every execution of this repository, newest first."""
    items = []
    # A repository that never had one has no store yet either: none is made to say so.
    with contextlib.suppress(NoExecutionYet), open_workspace(repo, store_url, create=False) as ws:
        for row in ws.executions():
            state = ws.state(row.execution_id)
            items.append(
                {
                    "execution_id": row.execution_id,
                    "plan": row.plan_name,
                    "status": ws.status_of(state, row),
                    "created_at": row.created_at,
                    "subtasks": len(state.subtasks),
                    "merged": len(state.merged),
                }
            )
    if as_json:
        click.echo(json.dumps(items, indent=2))
        return
    render.executions(items)
    paths = repository_at(repo)
    logged = {short_id(str(item["execution_id"])) for item in items}
    for short in unlogged_short_ids(paths, logged, store_url):
        click.echo(
            f"execution {short} left subtask branches here but is in no log of this store "
            f"(its store was deleted, or it is another store's); `kairo-orch clean {short}` "
            "removes what it left"
        )
    count, size = spares_kept(paths.toplevel, paths.git_common_dir)
    if count:  # what the disk holds for the next run, and how to have it back
        click.echo(
            f"{count} spare worktree{'' if count == 1 else 's'} kept for reuse, "
            f"{size / 1024**2:,.0f} MiB (at most {spare_bytes(os.environ) / 1024**3:g} GiB a "
            "root: KAIRO_SPARE_DISK); `kairo-orch clean --spares` removes them"
        )


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@common_options
def events(execution: str | None, as_json: bool, repo: Path, store_url: str | None) -> None:
    """The event log, oldest first."""
    with open_workspace(repo, store_url, create=False) as ws:
        stored = ws.store.read_events(ws.resolve(execution))
    for event in stored:
        if as_json:
            record = {
                "seq": event.seq,
                "event_id": event.event_id,
                "event_type": event.event_type,
                "schema_version": event.schema_version,
                "created_at": event.created_at,
                "payload": event.payload,
                "event_hash": event.event_hash,
            }
            click.echo(json.dumps(record, separators=(",", ":")))
        else:
            click.echo(
                render.event_line(event.seq, event.created_at, event.event_type, event.payload)
            )


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@common_options
def verify(execution: str | None, repo: Path, store_url: str | None) -> None:
    """Verify the event log's hash chain and head."""
    with open_workspace(repo, store_url, create=False) as ws:
        execution_id = ws.resolve(execution)
        seq, head_hash = ws.store.verify(execution_id)
    click.echo(f"{execution_id}: the log verifies; head seq {seq}, hash {head_hash}")


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON object.")
@click.option("--markdown", "as_markdown", is_flag=True, help="The report as Markdown (a PR body).")
@common_options
def report(
    execution: str | None, as_json: bool, as_markdown: bool, repo: Path, store_url: str | None
) -> None:
    """The merge report: what merged, what conflicted and with what, what failed and why."""
    with open_workspace(repo, store_url, create=False) as ws:
        execution_id = ws.resolve(execution)
        state = ws.state(execution_id)
        document = build_report(state, ws.status_of(state, ws.row(execution_id)))
    if as_json:
        click.echo(json.dumps(document, indent=2))
    elif as_markdown or not sys.stdout.isatty():  # off a terminal: the Markdown itself
        click.echo(to_markdown(document))
    else:
        render.report(document)
