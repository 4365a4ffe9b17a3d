"""`clean`: remove what an ended execution left, never work that is not merged."""

from __future__ import annotations

import contextlib
import shlex
from pathlib import Path

import click
import trio

from orchestrator.cli.context import Workspace, open_workspace
from orchestrator.cli.options import common_options
from orchestrator.core.ids import short_id
from orchestrator.core.state import ExecutionState
from orchestrator.errors import OwnershipError, StepFailed, UsageError
from orchestrator.git.refs import branch_exists, branch_ref, delete_branch, is_ancestor, rev_parse
from orchestrator.git.repo import git
from orchestrator.git.workspace import LocalWorktreeProvider
from orchestrator.runtime.edges import integration_checkout
from orchestrator.runtime.ownership import owner_alive
from orchestrator.runtime.supervisor_process import live_view_store_path
from orchestrator.tmux.server import TmuxServer


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
    if every and execution:
        raise UsageError("give an execution ID or --all, not both")
    with open_workspace(repo, store_url, create=False) as ws:
        if every:
            lines = _clean_every_ended(ws, force)
        else:
            state = ws.state(ws.resolve_own(execution))
            try:
                lines = _clean_one(ws, state, force)
            except OwnershipError as refused:
                if not (spares and execution is None):
                    raise
                # The spares are the repository's, not the newest execution's: that one
                # going on is no reason to keep them.
                lines = [f"{state.execution_id}: left alone, {refused.message}"]
        if spares:
            lines += trio.run(_remove_spares, ws)
    for line in lines:
        click.echo(line)


def _clean_one(ws: Workspace, state: ExecutionState, force: bool) -> list[str]:
    execution_id = state.execution_id
    short = short_id(execution_id)
    row = ws.row(execution_id)
    running = owner_alive(row)
    if state.ended is None and (running or not force):
        status = ws.status_of(state, row)
        advice = (
            f"`kairo-orch stop {short}` ends it, and `clean` then removes what it left"
            if running
            else f"`kairo-orch resume {short}` goes on with it, and `clean --force` removes "
            "it anyway"
        )
        raise OwnershipError(
            f"execution {execution_id} has not ended (it is {status}); {advice}",
            execution_id=execution_id,
        )
    if running:
        raise OwnershipError(
            f"execution {execution_id} ended {state.ended}, but its supervisor (pid "
            f"{state.supervisor_pid}) is still letting go of it; try again in a moment",
            execution_id=execution_id,
        )
    return trio.run(_clean, ws, state, force)


def _clean_every_ended(ws: Workspace, force: bool) -> list[str]:
    """Oldest first, each execution's lines under its id; `--force` is for unmerged work
    here, never for an execution that has not ended."""
    lines: list[str] = []
    for row in reversed(ws.executions()):
        state = ws.state(row.execution_id)
        if state.ended is None:
            status = ws.status_of(state, row)
            lines.append(f"{row.execution_id}: left alone, it has not ended (it is {status})")
            continue
        try:
            cleaned = _clean_one(ws, state, force)
        except OwnershipError as refused:  # its supervisor is still letting go: the rest go on
            lines.append(f"{row.execution_id}: left alone, {refused.message}")
            continue
        lines.append(f"{row.execution_id} ({state.ended}):")
        lines += [f"  {line}" for line in cleaned]
    return lines or ["no executions in this repository yet"]


async def _remove_spares(ws: Workspace) -> list[str]:
    removed, locked = await LocalWorktreeProvider(ws.paths.toplevel).remove_spares()
    lines = [f"removed {len(removed)} spare worktree{'' if len(removed) == 1 else 's'}"]
    lines += [
        f"kept the spare worktree {spare}: it is locked; "
        f"`git worktree unlock {shlex.quote(str(spare))}` lets `clean --spares` remove it"
        for spare in locked
    ]
    return lines


async def _has_uncommitted_work(worktree: Path) -> bool:
    result = await git(
        "status", "--porcelain", "--untracked-files=normal", cwd=worktree, check=False
    )
    return result.returncode != 0 or bool(result.stdout.strip())


async def _clean(ws: Workspace, state: ExecutionState, force: bool) -> list[str]:
    root = ws.paths.toplevel
    integration = state.created.integration_branch
    integration_head = (
        await rev_parse(root, branch_ref(integration))
        if await branch_exists(root, integration)
        else None
    )
    provider = LocalWorktreeProvider(root)
    lines: list[str] = []
    for view in state.subtasks.values():
        if view.branch is None:
            continue
        merged = False
        if integration_head is not None and await branch_exists(root, view.branch):
            head = await rev_parse(root, branch_ref(view.branch))
            merged = await is_ancestor(root, head, integration_head)
        elif not await branch_exists(root, view.branch):
            merged = True  # nothing left to lose on a branch that is gone
        if not merged and not force:
            where = f" and its worktree {view.worktree}" if view.worktree else ""
            lines.append(
                f"kept {view.id}: branch {view.branch}{where} hold unmerged work (--force removes)"
            )
            continue
        if view.worktree is not None and await trio.Path(view.worktree).exists():
            if not force and await _has_uncommitted_work(Path(view.worktree)):
                lines.append(f"kept {view.id}: worktree {view.worktree} has uncommitted changes")
                continue
            await provider.release(Path(view.worktree))
            lines.append(f"removed worktree {view.worktree}")
        if await delete_branch(root, view.branch):
            lines.append(f"deleted branch {view.branch}")
    checkout = integration_checkout(state)
    if await provider.exists(checkout):
        await provider.release(checkout)  # a detached checkout of merged work: nothing to lose
        lines.append(f"removed the integration check's worktree {checkout}")
    with contextlib.suppress(OSError):  # the execution's folder, once nothing is left in it
        await trio.Path(state.created.worktree_root).rmdir()
    tmux = TmuxServer(state.created.tmux_socket)
    if await tmux.has_session(state.created.tmux_session):
        await tmux.kill_session(state.created.tmux_session)
        lines.append(f"killed tmux session {state.created.tmux_session}")
    # What the live view read its store URL from, which may hold a password; it is gone
    # with the session (the log, the report and the attempts' records stay).
    await trio.Path(live_view_store_path(Path(state.created.run_root))).unlink(missing_ok=True)
    if integration_head == state.created.base_commit and await _delete_quietly(root, integration):
        # nothing was merged into it: it holds no work, only clutter
        lines.append(f"deleted the integration branch {integration} (nothing was merged)")
    else:
        lines.append(f"kept the integration branch {integration}")
    return lines


async def _delete_quietly(root: Path, branch: str) -> bool:
    """Delete `branch` unless someone has it checked out (then it stays, as any branch)."""
    try:
        return await delete_branch(root, branch)
    except StepFailed:
        return False
