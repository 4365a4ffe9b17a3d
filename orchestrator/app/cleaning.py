"""`clean`: remove what an ended execution left, never work that is not merged."""

from __future__ import annotations

import contextlib
import functools
import shutil
from dataclasses import dataclass
from pathlib import Path

import trio

from orchestrator import kairo_dir
from orchestrator.app.project import NoExecutionYet, Project, open_project, repository_at
from orchestrator.core.cleanup import (
    Cleaned,
    ExecutionCleaned,
    ExecutionLeftAlone,
    GuardRefsKept,
    IntegrationBranchKept,
    NotEnded,
    Refused,
    Removed,
    SpareKept,
    SparesRemoved,
)
from orchestrator.core.decide import agent_state_dir
from orchestrator.core.guard import GUARD_NAMESPACE
from orchestrator.core.ids import short_id, short_id_named, subtask_branch
from orchestrator.core.state import ExecutionState
from orchestrator.errors import OwnershipError, StepFailed, UsageError
from orchestrator.git.refs import branch_exists, branch_ref, delete_branch, rev_parse
from orchestrator.git.user_state import drop_refs
from orchestrator.git.workspace import LocalWorktreeProvider
from orchestrator.runtime.cgroups import end_cgroups_of
from orchestrator.runtime.edges import integration_checkout
from orchestrator.runtime.leftovers import (
    Leftovers,
    find_leftovers,
    remove_leftovers,
    remove_subtask_branches,
)
from orchestrator.runtime.ownership import owner_alive
from orchestrator.store.base import UnknownExecution
from orchestrator.tmux.interactive import socket_from_environment
from orchestrator.tmux.server import TmuxServer


@dataclass(frozen=True)
class CleanResult:
    executions: tuple[ExecutionCleaned | ExecutionLeftAlone, ...]
    spares: tuple[Cleaned, ...] = ()


def clean(
    repo: Path,
    store_url: str | None,
    execution: str | None,
    *,
    every: bool,
    force: bool,
    spares: bool,
) -> CleanResult:
    """Clean `execution` (left out: the newest), or `every` ended one; with `spares`, the
    spare worktrees kept for reuse as well."""
    if every and execution:
        raise UsageError("give an execution ID or --all, not both")
    if execution and (unlogged := _leftovers_by_names(repo, store_url, execution)):
        paths = repository_at(repo)
        steps = trio.run(functools.partial(remove_leftovers, force=force), paths, _tmux(), unlogged)
        return CleanResult(
            (ExecutionCleaned(unlogged.short, None, tuple(steps)),),
            _spares_removed(paths.toplevel) if spares else (),
        )
    with open_project(repo, store_url, create=False) as project:
        if every:
            cleaned = _clean_every_ended(project, force)
        else:
            state = project.state(project.resolve_own(execution))
            try:
                cleaned = (_clean_one(project, state, force),)
            except OwnershipError as refused:
                if not (spares and execution is None):
                    raise
                # The spares are the repository's, not the newest execution's: that one
                # going on is no reason to keep them.
                cleaned = (Refused(state.execution_id, refused.message),)
        return CleanResult(cleaned, _spares_removed(project.paths.toplevel) if spares else ())


def _leftovers_by_names(repo: Path, store_url: str | None, execution: str) -> Leftovers | None:
    """What the execution `execution` names left, found by its names (runtime/leftovers.py)
    rather than by its log: the store has none (it was deleted, say), or has one that is
    not the one its supervisor wrote (TAMPERED), which might name anything at all."""
    short = short_id_named(execution)
    try:
        with open_project(repo, store_url, create=False) as project:
            execution_id = project.resolve(execution)
            if project.rewritten(execution_id) is None:
                return None  # logged: cleaned as any execution is
            short = short_id(execution_id)
    except (NoExecutionYet, UnknownExecution):
        if short is None:
            return None
    paths = repository_at(repo)
    if kairo_dir.started_with_another_store(paths.git_common_dir, short, store_url):
        raise UsageError(
            f"execution {short} runs with another store than this one (its run folder says "
            "so): its log is there; give `clean` that store (--store or KAIRO_STORE)"
        )
    return trio.run(find_leftovers, paths, _tmux(), short) or None


def _tmux() -> TmuxServer:
    return TmuxServer(socket_from_environment())


def _clean_one(project: Project, state: ExecutionState, force: bool) -> ExecutionCleaned:
    execution_id = state.execution_id
    short = short_id(execution_id)
    row = project.row(execution_id)
    running = owner_alive(row)
    if project.rewritten(execution_id) is not None:
        raise OwnershipError(
            f"execution {execution_id} is TAMPERED: its log is not the one its supervisor "
            f"wrote, and is not followed; `kairo-orch clean {short}` removes what it left, "
            "found by its names",
            execution_id=execution_id,
        )
    if state.ended is None and (running or not force):
        status = project.status_of(state, row)
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
    steps = trio.run(_clean, project, state, force)
    return ExecutionCleaned(execution_id, state.ended, tuple(steps))


def _clean_every_ended(
    project: Project, force: bool
) -> tuple[ExecutionCleaned | ExecutionLeftAlone, ...]:
    """Oldest first; `--force` is for unmerged work here, never for an execution that has
    not ended."""
    cleaned: list[ExecutionCleaned | ExecutionLeftAlone] = []
    for row in reversed(project.executions()):
        state = project.state(row.execution_id)
        if state.ended is None:
            status = project.status_of(state, row)
            cleaned.append(NotEnded(row.execution_id, status))
            continue
        try:
            cleaned.append(_clean_one(project, state, force))
        except OwnershipError as refused:  # its supervisor is still letting go: the rest go on
            cleaned.append(Refused(row.execution_id, refused.message))
    return tuple(cleaned)


def _spares_removed(root: Path) -> tuple[Cleaned, ...]:
    removed, locked = trio.run(LocalWorktreeProvider(root).remove_spares)
    return (SparesRemoved(len(removed)), *(SpareKept(str(spare)) for spare in locked))


async def _clean(project: Project, state: ExecutionState, force: bool) -> list[Cleaned]:
    root = project.paths.toplevel
    # First what still runs of its attempts and checks (a supervisor killed, a runner
    # killed with it): nothing may write into a worktree while it is looked at or removed.
    ended = await trio.to_thread.run_sync(end_cgroups_of, state.execution_id)
    cleaned: list[Cleaned] = [Removed("cgroup", str(path)) for path in ended]
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
    found = await find_leftovers(project.paths, tmux, short)
    ours = subtask_branch(state.plan.name, state.execution_id, "")
    branches: dict[str, Path | None] = {
        b: found.worktrees.get(b) for b in found.subtask_branches if b.startswith(ours)
    }
    for view in state.subtasks.values():
        if view.branch is not None:
            branches[view.branch] = Path(view.worktree) if view.worktree else None
    # A branch still at (or behind) the base holds no work either.
    holders = [state.created.base_commit, *([integration_head] if integration_head else [])]
    steps = [*cleaned, *await remove_subtask_branches(root, branches, holders, force=force)]
    checkout = integration_checkout(state)
    provider = LocalWorktreeProvider(root)
    if await provider.exists(checkout):
        await provider.release(checkout)  # a detached checkout of merged work: nothing to lose
        steps.append(Removed("integration_checkout", str(checkout)))
    with contextlib.suppress(OSError):  # the execution's folder, once nothing is left in it
        await trio.Path(state.created.worktree_root).rmdir()
    if await tmux.has_session(state.created.tmux_session):
        await tmux.kill_session(state.created.tmux_session)
        steps.append(Removed("tmux_session", state.created.tmux_session))
    # What the live view read its store URL from, which may hold a password; it is gone
    # with the session (the log, the report and the attempts' records stay).
    await trio.Path(kairo_dir.store_file(Path(state.created.run_root))).unlink(missing_ok=True)
    for sid in state.subtasks:
        if await trio.to_thread.run_sync(_remove_agent_state, state, sid):
            steps.append(Removed("agent_state", str(Path(state.created.run_root) / sid)))
    if integration_head == state.created.base_commit and await _delete_quietly(root, integration):
        steps.append(Removed("integration_branch", integration))  # nothing was merged
    else:
        steps.append(IntegrationBranchKept(integration))
    guard = f"{GUARD_NAMESPACE}/{short}"
    if state.breaches and not force:
        steps.append(GuardRefsKept(guard))
    elif await drop_refs(root, guard):
        steps.append(Removed("guard_refs", guard))
    return steps


def _remove_agent_state(state: ExecutionState, subtask_id: str) -> bool:
    """The sessions a sandboxed agent kept across the subtask's attempts, and the scratch
    of each attempt (its temporary files, its own commits): the agent's, not the
    record's. Whether there was any. Never through a link the agent left in them
    (rmtree removes links, it does not follow them)."""
    sessions = Path(agent_state_dir(state.created.run_root, subtask_id))
    # Each attempt's scratch and each check's: `<subtask>/<attempt or check>/scratch`.
    scratches = sessions.parent.glob("*/scratch")
    found = [path for path in (sessions, *scratches) if path.is_dir()]
    for path in found:
        shutil.rmtree(path, ignore_errors=True)
    return bool(found)


async def _delete_quietly(root: Path, branch: str) -> bool:
    """Delete `branch` unless someone has it checked out (then it stays, as any branch)."""
    try:
        return await delete_branch(root, branch)
    except StepFailed:
        return False
