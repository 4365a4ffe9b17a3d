"""`clean`: remove what an ended execution left, never work that is not merged."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.app import cleaning
from orchestrator.cli import words
from orchestrator.cli.options import common_options
from orchestrator.core.cleanup import ExecutionCleaned
from orchestrator.core.inert_text import inert


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="Every ended execution of the repository (one that has not ended is left, named).",
)
@click.option(
    "--force", is_flag=True, help="Also remove branches and worktrees holding unmerged work."
)
@click.option(
    "--spares",
    is_flag=True,
    help="Also remove the spare worktrees kept for the next subtasks to reuse.",
)
@common_options
def clean(
    execution: str | None,
    every: bool,
    force: bool,
    spares: bool,
    repo: Path,
    store_url: str | None,
) -> None:
    """Remove an ended execution's worktrees, tmux session and merged subtask branches."""
    result = cleaning.clean(repo, store_url, execution, every=every, force=force, spares=spares)
    lines = []
    for done in result.executions:
        if not isinstance(done, ExecutionCleaned):
            lines.append(words.left_alone(done))
        elif every:  # each execution's under its id
            lines.append(words.cleaned_heading(done.execution_id, done.ended))
            lines += [f"  {words.cleaned(step)}" for step in done.steps]
        else:
            lines += [words.cleaned(step) for step in done.steps]
    if every and not result.executions:
        lines.append(words.NOTHING_TO_CLEAN)
    lines += [words.cleaned(step) for step in result.spares]
    for line in lines:  # names of branches and worktrees, git's words: made inert
        click.echo(inert(line))
