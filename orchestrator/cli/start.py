"""`start`: validate a plan, create its execution, start its supervisor, then return."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import click
import trio
from ulid import ULID

from orchestrator.cli.context import Workspace, common_options, open_workspace, supervisor_alive
from orchestrator.cli.plans import read_plan
from orchestrator.cli.watch import exec_tmux
from orchestrator.core import events as ev
from orchestrator.core.ids import default_integration_branch, short_id, tmux_session_name
from orchestrator.core.plan import ResolvedPlan
from orchestrator.core.status import effective_status
from orchestrator.errors import EnvironmentProblem, UsageError
from orchestrator.git.refs import branch_exists
from orchestrator.git.workspace import default_worktree_root
from orchestrator.runtime.daemon import spawn_supervisor, supervisor_log_path
from orchestrator.runtime.journal import read_state
from orchestrator.store.base import NewEvent
from orchestrator.tmux.server import tmux_version

EXIT_FAILED = 1
EXIT_SUPERVISOR_DIED = 6
STARTUP_TIMEOUT_S = 20.0
POLL_S = 0.1


@click.command()
@click.argument("plan", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--wait", is_flag=True, help="Block until the execution ends; exit with its outcome.")
@click.option("--detach", is_flag=True, help="Do not attach to the tmux session.")
@click.option("--fresh", is_flag=True, help="Start a new execution even if one was interrupted.")
@common_options
def start(
    plan: Path, wait: bool, detach: bool, fresh: bool, repo: Path, store_url: str | None
) -> None:
    """Validate PLAN, create an execution and start its supervisor."""
    with open_workspace(repo, store_url) as ws:
        execution_id = trio.run(_create_execution, ws, plan)
        state = read_state(ws.store, execution_id)
        run_root = Path(state.created.run_root)
        supervisor = spawn_supervisor(
            execution_id, repo_root=ws.paths.toplevel, store_url=ws.store_url, run_root=run_root
        )
        _wait_until_supervised(ws, execution_id, supervisor, run_root)
        click.echo(
            f"started {state.plan.name} as {execution_id}: {len(state.subtasks)} subtasks, "
            f"integration branch {state.created.integration_branch}",
            err=True,
        )
        if wait:
            raise SystemExit(_wait_until_ended(ws, execution_id))
    if sys.stdin.isatty() and sys.stdout.isatty() and not detach:
        exec_tmux(state.created.tmux_socket, state.created.tmux_session)
    click.echo(
        f"watch it: kairo-orch attach {short_id(execution_id)}    "
        f"status: kairo-orch status {short_id(execution_id)}",
        err=True,
    )


async def _create_execution(ws: Workspace, plan_path: Path) -> str:
    await tmux_version()  # refuse before anything is created, not once agents should start
    checked = await read_plan(plan_path, ws.paths)
    plan = checked.loaded.plan
    for warning in checked.loaded.warnings:
        click.echo(f"warning: {warning}", err=True)
    _require_adapters(plan)
    assert checked.base_commit is not None
    execution_id = str(ULID())
    integration = plan.integration_branch or default_integration_branch(plan.name, execution_id)
    if await branch_exists(ws.paths.toplevel, integration):
        raise UsageError(
            f"{plan_path}: integration branch '{integration}' already exists; delete it or "
            "name another in the plan"
        )
    kairo_dir = ws.paths.git_common_dir / "kairo"
    created = ev.ExecutionCreated(
        plan=plan,
        plan_path=str(await trio.Path(plan_path).resolve()),
        repo_root=str(ws.paths.toplevel),
        git_common_dir=str(ws.paths.git_common_dir),
        base_commit=checked.base_commit,
        integration_branch=integration,
        tmux_socket=os.environ.get("KAIRO_TMUX_SOCKET") or None,
        tmux_session=tmux_session_name(plan.name, execution_id),
        worktree_root=str(_worktree_root(ws, plan, plan_path) / short_id(execution_id)),
        run_root=str(kairo_dir / "runs" / execution_id),
    )
    record = NewEvent(*ev.to_record(created), schema_version=ev.SCHEMA_VERSION)
    await trio.to_thread.run_sync(
        lambda: ws.store.create_execution(execution_id, plan.name, "RUNNING", [record])
    )
    return execution_id


def _require_adapters(plan: ResolvedPlan) -> None:
    from agents.registry import adapter_for

    for subtask in plan.subtasks:
        adapter_for(subtask.agent.kind)


def _worktree_root(ws: Workspace, plan: ResolvedPlan, plan_path: Path) -> Path:
    """The plan's worktree_root (relative to the repository root), else inside .git."""
    if plan.worktree_root is None:
        return default_worktree_root(ws.paths.git_common_dir)
    root = (ws.paths.toplevel / plan.worktree_root).resolve()
    inside_checkout = root == ws.paths.toplevel or ws.paths.toplevel in root.parents
    inside_git_dir = root == ws.paths.git_common_dir or ws.paths.git_common_dir in root.parents
    if inside_checkout and not inside_git_dir:
        raise UsageError(
            f"{plan_path}: worktree_root {plan.worktree_root} lies inside the working tree "
            f"{ws.paths.toplevel}; it must lie outside it"
        )
    return root


def _wait_until_supervised(
    ws: Workspace, execution_id: str, supervisor: subprocess.Popen[bytes], run_root: Path
) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if read_state(ws.store, execution_id).supervisor_pid is not None:
            return
        if supervisor.poll() is not None:
            break
        time.sleep(POLL_S / 2)
    log = supervisor_log_path(run_root)
    raise EnvironmentProblem(
        f"the supervisor of {execution_id} did not start; its log is {log}",
        execution_id=execution_id,
    )


def _wait_until_ended(ws: Workspace, execution_id: str) -> int:
    while True:
        state = read_state(ws.store, execution_id)
        if state.ended is not None:
            return 0 if state.ended == "COMPLETED" else EXIT_FAILED
        if not supervisor_alive(state):
            status = effective_status(state, supervisor_alive=False)
            click.echo(
                f"kairo-orch: the supervisor of {execution_id} died before the execution "
                f"ended; it is {status}. Its log: "
                f"{supervisor_log_path(Path(state.created.run_root))}",
                err=True,
            )
            return EXIT_SUPERVISOR_DIED
        time.sleep(POLL_S)
