"""`validate`: check a plan and print its subtasks and their order; touches nothing."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.cli.options import common_options
from orchestrator.cli.plans import read_plan, require_runnable
from orchestrator.cli.render import console
from orchestrator.core.dag import merge_order
from orchestrator.git.repo import NotARepository, discover_repo


@click.command()
@click.argument("plan", type=click.Path(dir_okay=False, path_type=Path))
@common_options
def validate(plan: Path, repo: Path, store_url: str | None) -> None:
    """Check PLAN and print its subtasks and dependency order."""
    try:
        paths = discover_repo(repo)
    except NotARepository:
        paths = None  # a plan can be checked anywhere; `split` then needs a repository
    checked = read_plan(plan, paths)
    resolved = checked.loaded.plan
    require_runnable(resolved)
    out = console()
    for warning in checked.warnings:
        out.print(f"warning: {warning}", markup=False, style="yellow")
    base = f" (base {checked.base_commit[:12]})" if checked.base_commit else ""
    count = len(resolved.subtasks)
    many = f"{count} subtask{'' if count == 1 else 's'}"
    out.print(f"plan {resolved.name}: {many}{base}", markup=False)
    for position, subtask_id in enumerate(merge_order(resolved), start=1):
        spec = resolved.subtask(subtask_id)
        after = f"  after {', '.join(spec.depends_on)}" if spec.depends_on else ""
        count = len(spec.files)
        files = f"  [{count} file{'' if count == 1 else 's'}]" if spec.files else ""
        out.print(f"{position:>3}. {spec.id}  ({spec.agent.kind}){files}{after}", markup=False)
