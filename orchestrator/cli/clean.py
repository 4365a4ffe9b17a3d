"""`clean`: remove what an ended execution left, never work that is not merged."""

from __future__ import annotations

from pathlib import Path

import click
import trio

from orchestrator.cli.context import Workspace, open_workspace
from orchestrator.cli.options import common_options
from orchestrator.core.state import ExecutionState
from orchestrator.errors import OwnershipError
from orchestrator.git.refs import branch_exists, branch_ref, delete_branch, is_ancestor, rev_parse
from orchestrator.git.repo import git
from orchestrator.git.workspace import LocalWorktreeProvider
from orchestrator.runtime.edges import integration_checkout
from orchestrator.runtime.ownership import owner_alive
from orchestrator.tmux.server import TmuxServer


@click.command()
@click.argument("execution", required=False, metavar="[ID]")
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
    execution: str | None, force: bool, spares: bool, repo: Path, store_url: str | None
) -> None:
    """Remove an ended execution's worktrees, tmux session and merged subtask branches."""
    with open_workspace(repo, store_url) as ws:
        execution_id = ws.resolve(execution)
        state = ws.state(execution_id)
        if state.ended is None and not force:
            raise OwnershipError(
                f"execution {execution_id} has not ended (it is "
                f"{ws.status_of(state, ws.row(execution_id))}); `kairo-orch resume` goes on "
                "with it, and `clean --force` removes it anyway",
                execution_id=execution_id,
            )
        if owner_alive(ws.row(execution_id)):
            raise OwnershipError(
                f"execution {state.execution_id} is still running (supervisor pid "
                f"{state.supervisor_pid}); stop it before cleaning",
                execution_id=state.execution_id,
            )
        kept = trio.run(_clean, ws, state, force, spares)
    for line in kept:
        click.echo(line)


async def _has_uncommitted_work(worktree: Path) -> bool:
    result = await git(
        "status", "--porcelain", "--untracked-files=normal", cwd=worktree, check=False
    )
    return result.returncode != 0 or bool(result.stdout.strip())


async def _clean(ws: Workspace, state: ExecutionState, force: bool, spares: bool) -> list[str]:
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
    tmux = TmuxServer(state.created.tmux_socket)
    if await tmux.has_session(state.created.tmux_session):
        await tmux.kill_session(state.created.tmux_session)
        lines.append(f"killed tmux session {state.created.tmux_session}")
    lines.append(f"kept the integration branch {integration}")
    if spares:
        removed = await provider.remove_spares()
        lines.append(f"removed {len(removed)} spare worktree{'' if len(removed) == 1 else 's'}")
    return lines
