"""`clean`: remove what an ended execution left, never work that is not merged."""

from __future__ import annotations

import contextlib
import functools
import shlex
from pathlib import Path

import click
import trio

from orchestrator import kairo_dir
from orchestrator.cli.context import NoExecutionYet, Workspace, open_workspace, repository_at
from orchestrator.cli.new_execution import tmux_socket
from orchestrator.cli.options import common_options
from orchestrator.core.ids import short_id, short_id_named, subtask_branch
from orchestrator.core.state import ExecutionState
from orchestrator.errors import OwnershipError, StepFailed, UsageError
from orchestrator.git.refs import branch_exists, branch_ref, delete_branch, rev_parse
from orchestrator.git.workspace import LocalWorktreeProvider
from orchestrator.runtime.edges import integration_checkout
from orchestrator.runtime.leftovers import (
    Leftovers,
    find_leftovers,
    remove_leftovers,
    remove_subtask_branches,
)
from orchestrator.runtime.ownership import owner_alive
from orchestrator.store.base import UnknownExecution
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
    if execution and (unlogged := _leftovers_without_a_log(repo, store_url, execution)):
        paths = repository_at(repo)
        lines = trio.run(functools.partial(remove_leftovers, force=force), paths, _tmux(), unlogged)
        if spares:
            lines += trio.run(_remove_spares, paths.toplevel)
        for line in lines:
            click.echo(line)
        return
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
            lines += trio.run(_remove_spares, ws.paths.toplevel)
    for line in lines:
        click.echo(line)


def _leftovers_without_a_log(repo: Path, store_url: str | None, execution: str) -> Leftovers | None:
    """What an execution left that `execution` names and the store has no log of (the
    store was deleted, say): found by its names (runtime/leftovers.py)."""
    short = short_id_named(execution)
    if short is None:
        return None
    try:
        with open_workspace(repo, store_url, create=False) as ws:
            ws.resolve(execution)
            return None  # logged: cleaned as any execution is
    except (NoExecutionYet, UnknownExecution):
        pass
    paths = repository_at(repo)
    if kairo_dir.started_with_another_store(paths.git_common_dir, short, store_url):
        raise UsageError(
            f"execution {short} runs with another store than this one (its run folder says "
            "so): its log is there; give `clean` that store (--store or KAIRO_STORE)"
        )
    return trio.run(find_leftovers, paths, _tmux(), short) or None


def _tmux() -> TmuxServer:
    return TmuxServer(tmux_socket())


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


async def _remove_spares(root: Path) -> list[str]:
    removed, locked = await LocalWorktreeProvider(root).remove_spares()
    lines = [f"removed {len(removed)} spare worktree{'' if len(removed) == 1 else 's'}"]
    lines += [
        f"kept the spare worktree {spare}: it is locked; "
        f"`git worktree unlock {shlex.quote(str(spare))}` lets `clean --spares` remove it"
        for spare in locked
    ]
    return lines


async def _clean(ws: Workspace, state: ExecutionState, force: bool) -> list[str]:
    root = ws.paths.toplevel
    integration = state.created.integration_branch
    integration_head = (
        await rev_parse(root, branch_ref(integration))
        if await branch_exists(root, integration)
        else None
    )
    # With the branches the log does not know: made by a create that failed (git's switch
    # makes its branch even when it could not write the files) or that a crash cut short.
    tmux = TmuxServer(state.created.tmux_socket)
    short = short_id(state.execution_id)
    found = await find_leftovers(ws.paths, tmux, short)
    ours = subtask_branch(state.plan.name, state.execution_id, "")
    branches: dict[str, Path | None] = {
        b: found.worktrees.get(b) for b in found.subtask_branches if b.startswith(ours)
    }
    for view in state.subtasks.values():
        if view.branch is not None:
            branches[view.branch] = Path(view.worktree) if view.worktree else None
    # A branch still at (or behind) the base holds no work either.
    holders = [state.created.base_commit, *([integration_head] if integration_head else [])]
    lines = await remove_subtask_branches(root, branches, holders, force=force)
    checkout = integration_checkout(state)
    provider = LocalWorktreeProvider(root)
    if await provider.exists(checkout):
        await provider.release(checkout)  # a detached checkout of merged work: nothing to lose
        lines.append(f"removed the integration check's worktree {checkout}")
    with contextlib.suppress(OSError):  # the execution's folder, once nothing is left in it
        await trio.Path(state.created.worktree_root).rmdir()
    if await tmux.has_session(state.created.tmux_session):
        await tmux.kill_session(state.created.tmux_session)
        lines.append(f"killed tmux session {state.created.tmux_session}")
    # What the live view read its store URL from, which may hold a password; it is gone
    # with the session (the log, the report and the attempts' records stay).
    await trio.Path(kairo_dir.store_file(Path(state.created.run_root))).unlink(missing_ok=True)
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
