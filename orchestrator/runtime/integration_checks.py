"""`integration_verify` run on the merge queue's merges, and merges undone.

The check runs in a detached checkout of its own (`integration_checkout`), on the merge
commit of the last subtask of the run it checks, with every subtask of the run named in
its environment. Undoing moves the integration branch back by compare-and-swap before it
is recorded, so a supervisor that dies in between finds the branch already moved back
and records what it did (core/merge_queue.py decides both).
"""

from __future__ import annotations

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.integration_fold import merging_again
from orchestrator.core.state import ExecutionState
from orchestrator.errors import KairoError, StepFailed
from orchestrator.git.refs import branch_ref
from orchestrator.runtime.check_sandbox import check_setting
from orchestrator.runtime.edges import Edges, command_variables, integration_checkout
from orchestrator.runtime.processes import OUTPUT_TAIL_BYTES, CheckScope

CANNOT_RUN = 126  # the shell's word for a command that could not be started


async def check_integration(
    edges: Edges, state: ExecutionState, command: cmd.CheckIntegration
) -> list[ev.ExecutionEvent]:
    run = command.subtask_ids
    merge = state.subtask(command.subtask_id).merge
    check = state.plan.integration_verify
    assert merge is not None and check is not None and run[-1] == command.subtask_id
    target = branch_ref(state.created.integration_branch)
    current = await edges.repository.rev_parse(target)
    if current == _last_passed(state) != state.integration_head:
        # Undone already, by a supervisor that stopped before it could say so.
        return [_undone(state)]
    if current != state.integration_head:
        raise StepFailed(f"{target} moved to {current[:12]} while its merges waited for a check")
    try:
        checkout = await edges.workspaces.check_out_detached(
            integration_checkout(state), merge.merge_commit
        )
        own = {
            **command_variables(state, command.subtask_id, checkout),
            "KAIRO_SUBTASK_IDS": " ".join(run),
            "KAIRO_INTEGRATION_BRANCH": state.created.integration_branch,
        }
        setting = check_setting(
            state, edges.environment, "integration", command.subtask_id, worktree=checkout, own=own
        )
        # Bounded as the subtasks' attempts are: a check as long as a whole attempt hangs.
        timeouts = [state.spec(sid).limits.timeout_s for sid in run]
        result = await edges.processes.run_shell(
            check,
            cwd=checkout,
            env=setting.env,
            timeout_s=None if None in timeouts else max(t for t in timeouts if t is not None),
            stop=edges.stop_now,
            scope=CheckScope.of(state.execution_id, "integration", command.subtask_id),
            sandbox=setting.sandbox,
        )
        exit_code, output = result.exit_code, result.output
    except KairoError as error:
        # A merge that could not be checked does not stay either.
        exit_code, output = CANNOT_RUN, f"the check could not run: {error.message}"
    # The check ran what the merged agents wrote: a change of the user's it made is found
    # here (and blamed on whoever else runs; these are merged already).
    breach = await edges.guard.compare("integration_verify")
    return [
        ev.IntegrationChecked(
            subtask_ids=run,
            merge_commit=merge.merge_commit,
            exit_code=exit_code,
            output_tail=output[-OUTPUT_TAIL_BYTES:],
        ),
        *([breach] if breach is not None else []),
    ]


async def undo_merges(
    edges: Edges, state: ExecutionState, command: cmd.UndoMerges
) -> list[ev.ExecutionEvent]:
    target = branch_ref(state.created.integration_branch)
    tip, restored = state.integration_head, _last_passed(state)
    assert tip is not None and command.subtask_id == state.unverified[0]
    async with edges.guard.moving_integration("merge") as moving:
        current = await edges.repository.rev_parse(target)
        if current == tip:
            moving.heads.append(restored)
            await edges.repository.update_ref(target, new=restored, old=tip)
        elif current != restored:
            raise StepFailed(
                f"{target} moved to {current[:12]} while its merges waited for a check"
            )
    return [*moving.events, _undone(state)]


def _last_passed(state: ExecutionState) -> str:
    """The commit the first merge waiting for a check was made on: checked already."""
    merge = state.subtask(state.unverified[0]).merge
    assert merge is not None
    return merge.previous_commit


def _undone(state: ExecutionState) -> ev.MergesUndone:
    culprit = state.unverified[0] if state.fails_at == 1 else None
    return ev.MergesUndone(
        subtask_ids=state.unverified,
        restored_commit=_last_passed(state),
        culprit=culprit,
        merge_again=merging_again(state, culprit),
    )
