"""What the edge answers the merge queue's checks with, in the pure tests: a check that
fails once any merge it covers is one of the `broken_by` (a function of the tree that,
once failing, fails for every longer run), and merges undone as runtime/integration_checks.py
undoes them."""

from __future__ import annotations

from collections.abc import Collection

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.integration_fold import merging_again
from orchestrator.core.state import ExecutionState

BROKEN_OUTPUT = "E   ImportError: cannot import name 'auth'"


def check_answer(
    state: ExecutionState, command: cmd.CheckIntegration, broken_by: Collection[str]
) -> ev.IntegrationChecked:
    merge = state.subtask(command.subtask_id).merge
    assert merge is not None
    failed = any(sid in broken_by for sid in command.subtask_ids)
    return ev.IntegrationChecked(
        subtask_ids=command.subtask_ids,
        merge_commit=merge.merge_commit,
        exit_code=1 if failed else 0,
        output_tail=BROKEN_OUTPUT if failed else "",
    )


def undo_answer(state: ExecutionState) -> ev.MergesUndone:
    first = state.subtask(state.unverified[0]).merge
    assert first is not None
    culprit = state.unverified[0] if state.fails_at == 1 else None
    return ev.MergesUndone(
        subtask_ids=state.unverified,
        restored_commit=first.previous_commit,
        culprit=culprit,
        merge_again=merging_again(state, culprit),
    )
