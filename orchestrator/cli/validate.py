"""`validate`: check a plan and print its subtasks and their order; touches nothing."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.app.plans import check_plan
from orchestrator.cli.options import common_options
from orchestrator.cli.render import console
from orchestrator.core.inert_text import inert


@click.command()
@click.argument("plan", type=click.Path(dir_okay=False, path_type=Path))
@common_options
def validate(plan: Path, repo: Path, store_url: str | None) -> None:
    """Check PLAN and print its subtasks and dependency order."""
    checked = check_plan(plan, repo)
    out = console()
    for warning in checked.warnings:
        # A warning may name the repository's files (a glob's matches): made inert.
        out.print(f"warning: {inert(warning, lines=True)}", markup=False, style="yellow")
    base = f" (base {checked.base_commit[:12]})" if checked.base_commit else ""
    count = len(checked.merge_order)
    many = f"{count} subtask{'' if count == 1 else 's'}"
    out.print(f"plan {checked.name}: {many}{base}", markup=False)
    for position, spec in enumerate(checked.merge_order, start=1):
        after = f"  after {', '.join(spec.depends_on)}" if spec.depends_on else ""
        files = f"  [{spec.files} file{'' if spec.files == 1 else 's'}]" if spec.files else ""
        out.print(f"{position:>3}. {spec.id}  ({spec.agent_kind}){files}{after}", markup=False)
