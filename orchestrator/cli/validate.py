"""`validate`: check a plan and print its subtasks and their order; touches nothing."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.app.plans import PlannedSubtask, check_plan
from orchestrator.cli.options import common_options
from orchestrator.cli.render import console
from orchestrator.core.durations import format_duration
from orchestrator.core.inert_text import inert
from orchestrator.core.plan import SandboxSpec


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
    kind = checked.sandbox.kind
    shown = f"sandbox {kind}; {network(checked.sandbox)}" if kind == "bwrap" else f"sandbox {kind}"
    out.print(f"plan {checked.name}: {many}{base}; agents run in {shown}", markup=False)
    for position, spec in enumerate(checked.merge_order, start=1):
        after = f"  after {', '.join(spec.depends_on)}" if spec.depends_on else ""
        files = f"  [{owned_files(spec.files)}]" if spec.files else ""
        out.print(f"{position:>3}. {spec.id}  ({spec.agent_kind}){after}{files}", markup=False)
        out.print(f"     {bounds(spec)}", markup=False)


#: Files named on a subtask's line; past them, a count.
FILES_SHOWN = 4


def owned_files(files: tuple[str, ...]) -> str:
    """`2 files: a.py, b.py`; a long list elided: `12 files: a.py, ... and 8 more`."""
    count = f"{len(files)} file{'' if len(files) == 1 else 's'}"
    # Names of the repository's files: made inert.
    named = ", ".join(inert(path) for path in files[:FILES_SHOWN])
    more = f" and {len(files) - FILES_SHOWN} more" if len(files) > FILES_SHOWN else ""
    return f"{count}: {named}{more}"


def bounds(spec: PlannedSubtask) -> str:
    """Its limits and what a conflict of its merge comes to, as the plan's keys say them."""
    limits = spec.limits
    timeout = f"timeout {format_duration(limits.timeout_s)}" if limits.timeout_s else "no timeout"
    attempts = f"at most {limits.max_attempts} attempt{'' if limits.max_attempts == 1 else 's'}"
    budget = limits.token_budget
    tokens = f"token budget {budget:,}" if budget is not None else "no token budget"
    resolving = spec.resolve_attempts
    conflicts = (
        f"resolve_conflicts: {resolving} attempt{'' if resolving == 1 else 's'}"
        if resolving
        else "resolve_conflicts: off"
    )
    return f"limits: {timeout}, {attempts}, {tokens}; {conflicts}"


def network(sandbox: SandboxSpec) -> str:
    """`network: agent endpoint, setup all, checks none`: what each step reaches."""
    agent, setup = sandbox.network_for("agent"), sandbox.network_for("setup")
    return f"network: agent {agent}, setup {setup}, checks {sandbox.network_for('verify')}"
