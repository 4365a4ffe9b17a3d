"""`kairo-orch conflicts`: which branches would conflict, and on what (app/conflicts.py)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from orchestrator.app.conflicts import conflicts as conflict_map_of
from orchestrator.cli import render
from orchestrator.cli.options import common_options
from orchestrator.core.conflict_map import to_document
from orchestrator.core.os_strings import json_safe


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (cli.md).")
@common_options
def conflicts(execution: str | None, as_json: bool, repo: Path, store_url: str | None) -> None:
    """For every pair of running or finished branches that change a path in common, the
    paths that would conflict if both were merged."""
    document = to_document(conflict_map_of(repo, store_url, execution))
    if as_json:
        click.echo(json.dumps(json_safe(document), indent=2))
    else:
        render.conflict_map(document)
