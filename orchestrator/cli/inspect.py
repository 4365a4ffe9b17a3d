"""Read-only commands: status, list, events, verify, report (app/inspecting.py)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click

from orchestrator.app import inspecting
from orchestrator.cli import render, words
from orchestrator.cli.options import common_options
from orchestrator.core.ids import short_id
from orchestrator.core.os_strings import json_safe
from orchestrator.core.report import to_markdown


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (cli.md).")
@click.option(
    "--all", "every", is_flag=True, help="A row for every subtask, however many (default: 40)."
)
@common_options
def status(
    execution: str | None, as_json: bool, every: bool, repo: Path, store_url: str | None
) -> None:
    """One execution: its state and every subtask's."""
    document = inspecting.status(repo, store_url, execution)
    if as_json:  # a name that is not UTF-8 as its bytes (os_strings), for valid JSON
        click.echo(json.dumps(json_safe(document), indent=2))
    else:
        render.status(document, every=every)


@click.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="A JSON array, newest first.")
@common_options
def list_(as_json: bool, repo: Path, store_url: str | None) -> None:
    """Every execution of this repository, newest first."""
    listed = inspecting.list_executions(repo, store_url)
    items = [dataclasses.asdict(item) for item in listed]
    if as_json:
        click.echo(json.dumps(items, indent=2))
        return
    render.executions(items)
    # What the repository holds beside those, which takes more git calls: after the table.
    logged = {short_id(item.execution_id) for item in listed}
    left = inspecting.left_here(repo, store_url, logged)
    for short in left.unlogged:
        click.echo(words.unlogged(short))
    if left.spares is not None:  # what the disk holds for the next run, and how to have it back
        click.echo(words.spares_kept(left.spares))


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
    click.echo(words.verified(inspecting.verify(repo, store_url, execution)))


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON object.")
@click.option("--markdown", "as_markdown", is_flag=True, help="The report as Markdown (a PR body).")
@click.option(
    "--html",
    "as_html",
    is_flag=True,
    help="The report as one self-contained HTML page: a timeline, costs, conflicts.",
)
@common_options
def report(
    execution: str | None,
    as_json: bool,
    as_markdown: bool,
    as_html: bool,
    repo: Path,
    store_url: str | None,
) -> None:
    """The merge report: what merged, what conflicted and with what, what failed and why."""
    if as_html and (as_json or as_markdown):
        raise click.UsageError("--html is a report of its own: leave out --json and --markdown")
    if as_html:
        click.echo(inspecting.report_html(repo, store_url, execution), nl=False)
        return
    document = inspecting.report(repo, store_url, execution)
    if as_json:
        click.echo(json.dumps(json_safe(document), indent=2))
    elif as_markdown or not sys.stdout.isatty():  # off a terminal: the Markdown itself
        click.echo(to_markdown(document))
    else:
        render.report(document)
