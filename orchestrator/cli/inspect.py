"""Read-only commands: status, list, events, verify, report (app/inspecting.py)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click

from orchestrator.app import inspecting
from orchestrator.cli import render
from orchestrator.cli.options import common_options
from orchestrator.core.report import to_markdown


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (cli.md).")
@common_options
def status(execution: str | None, as_json: bool, repo: Path, store_url: str | None) -> None:
    """One execution: its state and every subtask's."""
    document = inspecting.status(repo, store_url, execution)
    if as_json:
        click.echo(json.dumps(document, indent=2))
    else:
        render.status(document)


@click.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="A JSON array, newest first.")
@common_options
def list_(as_json: bool, repo: Path, store_url: str | None) -> None:
    """Every execution of this repository, newest first."""
    listing = inspecting.list_executions(repo, store_url, with_leftovers=not as_json)
    items = [dataclasses.asdict(item) for item in listing.executions]
    if as_json:
        click.echo(json.dumps(items, indent=2))
        return
    render.executions(items)
    for short in listing.unlogged:
        click.echo(
            f"execution {short} left subtask branches here but is in no log of this store "
            f"(its store was deleted, or it is another store's); `kairo-orch clean {short}` "
            "removes what it left"
        )
    spares = listing.spares
    if spares.count:  # what the disk holds for the next run, and how to have it back
        click.echo(
            f"{spares.count} spare worktree{'' if spares.count == 1 else 's'} kept for reuse, "
            f"{spares.bytes / 1024**2:,.0f} MiB (at most {spares.at_most_bytes / 1024**3:g} GiB "
            "a root: KAIRO_SPARE_DISK); `kairo-orch clean --spares` removes them"
        )


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@common_options
def events(execution: str | None, as_json: bool, repo: Path, store_url: str | None) -> None:
    """The event log, oldest first."""
    for event in inspecting.events(repo, store_url, execution):
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
    verified = inspecting.verify(repo, store_url, execution)
    click.echo(
        f"{verified.execution_id}: the log verifies; head seq {verified.head_seq}, "
        f"hash {verified.head_hash}"
    )


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON object.")
@click.option("--markdown", "as_markdown", is_flag=True, help="The report as Markdown (a PR body).")
@common_options
def report(
    execution: str | None, as_json: bool, as_markdown: bool, repo: Path, store_url: str | None
) -> None:
    """The merge report: what merged, what conflicted and with what, what failed and why."""
    document = inspecting.report(repo, store_url, execution)
    if as_json:
        click.echo(json.dumps(document, indent=2))
    elif as_markdown or not sys.stdout.isatty():  # off a terminal: the Markdown itself
        click.echo(to_markdown(document))
    else:
        render.report(document)
