"""The edge: each command of `decide` carried out against git, tmux and processes.

Every function here takes the state it was decided on and returns the events that say
what happened; none of them changes the state itself.
"""

from __future__ import annotations

import functools
import time
from dataclasses import replace
from pathlib import Path

import structlog
import trio

from agents.base import AttemptContext
from agents.registry import adapter_for
from agents.usage import ResumePoint, resume_point, resumed
from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.constraints import token_allowance
from orchestrator.core.decide import agent_state_dir
from orchestrator.core.earlier_attempts import earlier_attempts_section
from orchestrator.core.ids import attempt_cgroup, idempotency_key, subtask_branch, wake_channel
from orchestrator.core.state import ExecutionState
from orchestrator.errors import KairoError, StepFailed
from orchestrator.git.refs import BranchExists, branch_ref
from orchestrator.runtime import resolution
from orchestrator.runtime.attempts import (
    exited,
    read_exit_record,
    records_written_by_others,
    render_prompt,
    scrub,
    write_attempt_files,
)
from orchestrator.runtime.awaiting_exit import wait_for_exit
from orchestrator.runtime.cgroups import cgroups_wanted
from orchestrator.runtime.check_sandbox import check_setting
from orchestrator.runtime.closing_panes import ended_panes
from orchestrator.runtime.commit_step import commit_attempt
from orchestrator.runtime.edges import Edges, attempt_files, command_variables
from orchestrator.runtime.integration import merge_subtasks
from orchestrator.runtime.integration_checks import check_integration, undo_merges
from orchestrator.runtime.processes import OUTPUT_TAIL_BYTES, CheckScope
from orchestrator.runtime.recovery import interrupt, recorded_group
from orchestrator.runtime.review import run_review_step
from orchestrator.runtime.sandbox import AgentPlace, sandbox_for
from orchestrator.runtime.worktree_setup import copy_files, run_setup
from orchestrator.tmux.server import PaneRef

log = structlog.get_logger(__name__)

KILL_RECORD_WAIT_S = 10.0


async def execute(
    edges: Edges, state: ExecutionState, command: cmd.Command
) -> list[ev.ExecutionEvent]:
    match command:
        case cmd.CreateIntegrationBranch():
            return await _create_integration_branch(edges, state)
        case cmd.PrepareWorkspace():
            return await _prepare_workspace(edges, state, command)
        case cmd.OpenPane():
            return await _open_pane(edges, state, command)
        case cmd.AwaitAttempt():
            return await _await_attempt(edges, state, command)
        case cmd.KillAttempt():
            return await _kill_attempt(edges, state, command)
        case cmd.CommitAttempt():
            return await commit_attempt(edges, state, command)
        case cmd.RunVerify():
            return await _run_verify(edges, state, command)
        case cmd.MergeSubtask():
            return await merge_subtasks(edges, state, command)
        case cmd.CheckIntegration():
            return await check_integration(edges, state, command)
        case cmd.UndoMerges():
            return await undo_merges(edges, state, command)
        case cmd.ReleaseWorkspace():
            return await _release(edges, state, command)
        case cmd.RunReviewStep(step=step):
            return await run_review_step(edges, state, step)
    raise AssertionError(f"unknown command {command!r}")  # pragma: no cover


async def _create_integration_branch(
    edges: Edges, state: ExecutionState
) -> list[ev.ExecutionEvent]:
    created = state.created
    branch = created.integration_branch
    # Created first, looked for only when that fails: one git process on the way to the
    # first worktree, where asking first took three.
    try:
        await edges.repository.create_branch(branch, created.base_commit)
        commit = created.base_commit
    except BranchExists:
        # Made by an earlier supervisor of this execution, which died before saying so.
        commit = await edges.repository.rev_parse(branch_ref(branch))
    return [ev.IntegrationBranchCreated(branch=branch, commit=commit)]


async def _prepare_workspace(
    edges: Edges, state: ExecutionState, command: cmd.PrepareWorkspace
) -> list[ev.ExecutionEvent]:
    sid = command.subtask_id
    branch = subtask_branch(state.plan.name, state.execution_id, sid)
    path = Path(state.created.worktree_root) / sid
    try:
        workspace = await edges.workspaces.create(sid, branch, command.start_commit, path)
    except StepFailed:
        # A crash may have cut an earlier create short (its branch is there, the only one
        # of that name): finish that one. Tried second, so that a first create runs no
        # git process for it.
        adopted = await edges.workspaces.adopt(sid, branch, path)
        if adopted is None:
            raise
        workspace = adopted
    setup = state.plan.worktree
    copied = await copy_files(
        edges.repository, edges.repo_root, workspace.path, setup.copy_files, workspace.base_commit
    )
    if setup.setup is not None:
        # From the files of the branch it starts on: a script there an earlier subtask's
        # agent may have written.
        own = {**command_variables(state, sid, workspace.path), **_worktree_environment(state, sid)}
        setting = check_setting(
            state, edges.environment, "setup", sid, worktree=workspace.path, own=own
        )
        run_dir = Path(state.created.run_root) / sid
        await run_setup(
            edges.processes,
            setup.setup,
            worktree=workspace.path,
            run_dir=run_dir,
            env=setting.env,
            subtask_id=sid,
            scope=CheckScope.of(state.execution_id, "setup", sid),
            sandbox=setting.sandbox,
        )
    return [
        ev.WorkspaceCreated(
            subtask_id=sid,
            path=str(workspace.path),
            branch=branch,
            commit=workspace.base_commit,
            copied=copied,
        )
    ]


def _worktree_environment(state: ExecutionState, subtask_id: str) -> dict[str, str]:
    """What every process in the subtask's worktree gets besides the KAIRO_* of plan.md."""
    return {"KAIRO_PORT": str(state.plan.port_of(subtask_id))}


def _context(
    state: ExecutionState, subtask_id: str, attempt: int, feedback: str, earlier: str
) -> AttemptContext:
    view = state.subtask(subtask_id)
    spec = state.spec(subtask_id)
    files = attempt_files(state, subtask_id, attempt)
    assert view.worktree is not None
    return AttemptContext(
        checks=(spec.verify,) if spec.verify else (),
        token_allowance=token_allowance(state, subtask_id),
        execution_id=state.execution_id,
        subtask_id=subtask_id,
        attempt=attempt,
        prompt=render_prompt(spec, feedback, earlier),
        prompt_file=str(files.prompt),
        feedback=feedback,
        files=spec.files,
        worktree=view.worktree,
        idempotency_key=idempotency_key(state.execution_id, subtask_id, attempt, "agent"),
        usage_file=str(files.usage),
    )


async def _open_pane(
    edges: Edges, state: ExecutionState, command: cmd.OpenPane
) -> list[ev.ExecutionEvent]:
    sid, number = command.subtask_id, command.attempt
    view = state.subtask(sid)
    assert view.worktree is not None
    earlier = await _earlier_attempts(edges, state, sid)
    context = _context(state, sid, number, feedback=_feedback_for(state, sid), earlier=earlier)
    adapter = adapter_for(state.spec(sid).agent.kind)
    resolving = view.current_attempt is not None and view.current_attempt.resolution is not None
    if resolving:  # a session of its own, told the whole task and what collided
        section = await resolution.prepare(edges, state, sid)
        context = replace(context, prompt=f"{context.prompt.rstrip()}\n\n{section}")
    elif adapter.supports_resume:
        point = await trio.to_thread.run_sync(_resume_point, state, sid)
        context = resumed(context, point)
    files = attempt_files(state, sid, number)
    sandbox = sandbox_for(state.plan.sandbox)
    worktree = Path(view.worktree)
    pane_command = await trio.to_thread.run_sync(
        lambda: write_attempt_files(
            files,
            spec=state.spec(sid),
            context=context,
            base_environment={**edges.environment, **_worktree_environment(state, sid)},
            tmux_socket=state.created.tmux_socket,
            wake_channel=wake_channel(state.execution_id, sid, number),
            sandbox=sandbox,
            place=AgentPlace(
                worktree=worktree,
                run_dir=files.directory,
                git_common_dir=Path(state.created.git_common_dir),
                state_dir=Path(agent_state_dir(state.created.run_root, sid)),
                state_variables=adapter.state_variables,
                start_commit=view.current_attempt.start_commit if view.current_attempt else None,
                checkout=Path(state.created.repo_root),
            ),
            pass_env=state.plan.sandbox.pass_env,
            cgroup=attempt_cgroup(state.execution_id, sid, number)
            if cgroups_wanted(edges.environment)
            else None,
        )
    )
    pane = await _open_agent_pane(edges, state, sid, pane_command, Path(view.worktree))
    return [
        ev.AttemptPaneOpened(
            subtask_id=sid,
            attempt=number,
            pane_id=pane.pane_id,
            at=time.time(),
            resumed_session=context.resume_session,
        )
    ]


async def _open_agent_pane(
    edges: Edges, state: ExecutionState, sid: str, command: list[str], cwd: Path
) -> PaneRef:
    """A pane in the execution's session; a session that went away (its tmux server
    killed) is opened again, live view and all, and the pane asked for once more (once
    more too when another pane's call has just opened it again)."""
    session = state.created.tmux_session
    open_pane = functools.partial(
        edges.panes.open_agent_pane,
        session,
        title=f"{sid} · running",
        command=command,
        cwd=cwd,
        max_parallel=state.plan.max_parallel,
        recyclable=ended_panes(state),
    )
    try:
        return await open_pane()
    except KairoError:
        if edges.open_session is None:
            raise
    if not await edges.panes.has_session(session):
        log.warning("tmux_session_reopened", session=session)
        try:
            await edges.open_session()
        except KairoError:  # another pane's call opened it first
            if not await edges.panes.has_session(session):
                raise
    return await open_pane()


def _resume_point(state: ExecutionState, subtask_id: str) -> ResumePoint | None:
    """The agent session the subtask's earlier attempts left for this one to continue."""
    earlier = state.subtask(subtask_id).attempts[:-1]
    return resume_point([attempt_files(state, subtask_id, a.number).usage for a in earlier])


async def _earlier_attempts(edges: Edges, state: ExecutionState, subtask_id: str) -> str:
    """What the attempts before this one left on the branch, and why they did not pass."""
    view = state.subtask(subtask_id)
    attempt = view.current_attempt
    if attempt is None or attempt.number == 1 or view.start_commit is None:
        return ""
    base, head = view.start_commit, attempt.start_commit
    commits = await edges.repository.commits_between(base, head)
    stat = await edges.repository.diffstat(base, head) if commits else None
    section = earlier_attempts_section(
        view, [str(c) for c in commits], stat.text if stat is not None else ""
    )
    return edges.redactor.text(section)  # an agent's own commit message may quote a secret


def _feedback_for(state: ExecutionState, subtask_id: str) -> str:
    """What the attempt before the current one was told to do better ("" on attempt 1)."""
    earlier = [a for a in state.subtask(subtask_id).attempts[:-1] if a.judged]
    return earlier[-1].feedback if earlier else ""


async def _kill_attempt(
    edges: Edges, state: ExecutionState, command: cmd.KillAttempt
) -> list[ev.ExecutionEvent]:
    """Stop the agent's whole process group; its runner then ends what else the attempt
    left and records the exit as usual. What it could not end (its cgroup's processes, a
    runner gone meanwhile) is ended here once the record is there, or its wait is over."""
    files = attempt_files(state, command.subtask_id, command.attempt)
    pgid = await trio.to_thread.run_sync(recorded_group, files)
    if pgid is not None:
        await edges.processes.stop_group(pgid)
    with trio.move_on_after(KILL_RECORD_WAIT_S):
        while await trio.to_thread.run_sync(read_exit_record, files) is None:  # noqa: ASYNC110
            await trio.sleep(0.05)  # the runner writes it as soon as its agent is gone
    cgroup = attempt_cgroup(state.execution_id, command.subtask_id, command.attempt)
    await edges.processes.end_attempt(files, cgroup)
    return []


async def _await_attempt(
    edges: Edges, state: ExecutionState, command: cmd.AwaitAttempt
) -> list[ev.ExecutionEvent]:
    """Wait for the runner's exit record; a runner gone without one was interrupted.
    Nothing of the attempt runs once this returns: the supervisor commits its worktree."""
    sid, number = command.subtask_id, command.attempt
    files = attempt_files(state, sid, number)
    channel = wake_channel(state.execution_id, sid, number)
    awaited = await wait_for_exit(edges.panes, edges.processes, files, channel)
    record = awaited.record
    if record is None or record.interrupted:  # while we watched: its pane went, or its runner
        await trio.to_thread.run_sync(scrub, files, edges.redactor.known)
        interrupted = await interrupt(edges, state, sid, rerun_interrupted=False, cause="pane")
        return [interrupted, *_breached(await edges.guard.compare("attempt", {sid}))]
    await edges.processes.end_attempt(files, attempt_cgroup(state.execution_id, sid, number))
    # Before the scrub, which may rewrite the log itself.
    written = await trio.to_thread.run_sync(
        functools.partial(records_written_by_others, files, record, forged=awaited.forged)
    )
    await trio.to_thread.run_sync(scrub, files, edges.redactor.known)
    event = functools.partial(exited, files, sid, number, record, written_by_others=written)
    exit_event = await trio.to_thread.run_sync(event)
    # Once nothing of the attempt runs any more; its exit first: the breach, if any, then
    # cuts an attempt that has exited.
    breach = await edges.guard.compare("attempt", {sid})
    return [exit_event, *_breached(breach)]


def _breached(breach: ev.GuardBreached | None) -> list[ev.ExecutionEvent]:
    return [breach] if breach is not None else []


async def _run_verify(
    edges: Edges, state: ExecutionState, command: cmd.RunVerify
) -> list[ev.ExecutionEvent]:
    sid = command.subtask_id
    view = state.subtask(sid)
    verify = state.spec(sid).verify
    assert view.worktree is not None and verify is not None
    context = _context(state, sid, command.attempt, feedback="", earlier="")
    own = {**context.environment(), **_worktree_environment(state, sid)}
    setting = check_setting(
        state, edges.environment, "verify", sid, worktree=Path(view.worktree), own=own
    )
    result = await edges.processes.run_shell(
        verify,
        cwd=Path(view.worktree),
        env=setting.env,
        timeout_s=state.spec(sid).limits.timeout_s,
        stop=edges.stop_now,
        scope=CheckScope.of(state.execution_id, "verify", sid),
        sandbox=setting.sandbox,
    )
    # What the check left in the worktree is its own; elsewhere, what it changed is
    # blamed on its subtask: it runs the agent's code too.
    await edges.guard.settled(sid, command.attempt, Path(view.worktree))
    breach = await edges.guard.compare("verify", {sid})
    return [
        ev.VerifyFinished(
            subtask_id=sid,
            attempt=command.attempt,
            exit_code=result.exit_code,
            output_tail=result.output[-OUTPUT_TAIL_BYTES:],
        ),
        *_breached(breach),
    ]


async def _release(
    edges: Edges, state: ExecutionState, command: cmd.ReleaseWorkspace
) -> list[ev.ExecutionEvent]:
    view = state.subtask(command.subtask_id)
    assert view.worktree is not None
    await edges.workspaces.release(Path(view.worktree))
    return [ev.WorkspaceReleased(subtask_id=command.subtask_id)]
