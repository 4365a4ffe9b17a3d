"""A merge a supervisor wrote to the integration branch but died before recording, as the
next supervisor finds it: the same merge, on the commit it was made on, then checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.plan import ResolvedPlan
from orchestrator.core.state import ExecutionState, apply
from orchestrator.git.merge import Merged, merge_branch
from orchestrator.git.refs import branch_ref, rev_parse
from orchestrator.runtime.effects import execute
from tests.git.conftest import run, write
from tests.git.test_integration_branch import BRANCH, IDENTITY, edges, execution


def merged_unrecorded(repo: Path, check: str) -> tuple[ExecutionState, str, str]:
    """Subtask `s` committed on its branch and judged; the state as the log has it, its
    base and its head."""
    base = run(repo, "rev-parse", "HEAD").strip()
    run(repo, "switch", "-q", "-c", "kairo-subtasks/s")
    write(repo / "s.txt", "s\n")
    run(repo, "add", "s.txt")
    run(repo, "commit", "-q", "-m", "s")
    head = run(repo, "rev-parse", "HEAD").strip()
    run(repo, "switch", "-q", "main")
    plan = ResolvedPlan.model_validate(
        {
            "name": "p",
            "integration_verify": check,
            "subtasks": [{"id": "s", "title": "s", "prompt": "", "agent": {"kind": "shell"}}],
        }
    )
    state = execution(repo, base, plan)
    events: list[ev.ExecutionEvent] = [
        ev.IntegrationBranchCreated(branch=BRANCH, commit=base),
        ev.SubtaskScheduled(subtask_id="s", start_commit=base),
        ev.WorkspaceCreated(subtask_id="s", path=str(repo), branch="kairo-subtasks/s", commit=base),
        ev.AttemptStarted(
            subtask_id="s", attempt=1, idempotency_key="k", run_dir="/r", start_commit=base
        ),
        ev.AttemptExited(subtask_id="s", attempt=1, exit_code=0),
        ev.AttemptCommitted(subtask_id="s", attempt=1, head_commit=head, changed=True),
        ev.AttemptJudged(subtask_id="s", attempt=1, accepted=True),
    ]
    for seq, event in enumerate(events, start=1):
        state = apply(state, event, seq)
    assert state.subtask("s").state == "succeeded" and state.anomalies == ()
    return state, base, head


@pytest.mark.parametrize(("check", "kept"), [("true", True), ("false", False)])
async def test_a_merge_written_but_not_recorded_is_found_and_checked(
    repo: Path, check: str, kept: bool
) -> None:
    state, base, head = merged_unrecorded(repo, check)
    run(repo, "branch", BRANCH, base)
    where = edges(repo)
    # The supervisor that died had written the merge: the branch is at it.
    written = await merge_branch(
        repo,
        target_ref=branch_ref(BRANCH),
        source_commit=head,
        message="kairo: merge s\n",
        identity=IDENTITY,
    )
    assert isinstance(written, Merged) and written.previous_commit == base

    merged = await execute(where, state, cmd.MergeSubtask(subtask_id="s"))
    assert [(e.merge_commit, e.previous_commit) for e in merged] == [  # type: ignore[union-attr]
        (written.merge_commit, base)
    ]
    for event in merged:
        state = apply(state, event, state.seq + 1)
    [outcome] = await execute(where, state, check_of("s"))

    assert isinstance(outcome, ev.IntegrationChecked)
    assert outcome.exit_code == (0 if kept else 1)
    state = apply(state, outcome, state.seq + 1)
    if not kept:
        [undone] = await execute(where, state, cmd.UndoMerges(subtask_id="s"))
        assert undone == ev.MergesUndone(subtask_ids=("s",), restored_commit=base, culprit="s")
    assert await rev_parse(repo, BRANCH) == (written.merge_commit if kept else base)


def check_of(*run: str) -> cmd.CheckIntegration:
    return cmd.CheckIntegration(subtask_id=run[-1], subtask_ids=run)


async def test_merges_undone_but_not_recorded_are_recorded_as_undone(repo: Path) -> None:
    state, base, _ = merged_unrecorded(repo, "false")
    run(repo, "branch", BRANCH, base)
    where = edges(repo)
    [merged] = await execute(where, state, cmd.MergeSubtask(subtask_id="s"))
    waiting = apply(state, merged, state.seq + 1)
    [failed] = await execute(where, waiting, check_of("s"))
    culprit_known = apply(waiting, failed, waiting.seq + 1)
    await execute(where, culprit_known, cmd.UndoMerges(subtask_id="s"))  # and it died
    assert await rev_parse(repo, BRANCH) == base

    # The next supervisor undoes again; or, where a stop had cut the check short, checks
    # again: both find the branch moved back already, and say so.
    [again] = await execute(where, culprit_known, cmd.UndoMerges(subtask_id="s"))
    assert again == ev.MergesUndone(subtask_ids=("s",), restored_commit=base, culprit="s")
    [found] = await execute(where, waiting, check_of("s"))
    assert found == ev.MergesUndone(  # no culprit known, no stop: it merges again
        subtask_ids=("s",), restored_commit=base, culprit=None, merge_again=("s",)
    )


async def test_a_merge_of_the_head_made_by_someone_else_is_not_ours_to_undo(
    repo: Path,
) -> None:
    state, base, head = merged_unrecorded(repo, "false")
    # The user committed onto the integration branch, then merged the subtask's branch.
    run(repo, "switch", "-q", "-c", BRANCH, base)
    write(repo / "mine.txt", "mine\n")
    run(repo, "add", "mine.txt")
    run(repo, "commit", "-q", "-m", "mine")
    run(repo, "merge", "-q", "--no-ff", "-m", "their merge", head)
    theirs = run(repo, "rev-parse", "HEAD").strip()
    run(repo, "switch", "-q", "main")
    where = edges(repo)

    [merged] = await execute(where, state, cmd.MergeSubtask(subtask_id="s"))

    assert isinstance(merged, ev.SubtaskMerged)
    assert (merged.merge_commit, merged.previous_commit) == (theirs, theirs)
    state = apply(state, merged, state.seq + 1)
    [verified] = await execute(where, state, check_of("s"))
    assert isinstance(verified, ev.IntegrationChecked) and verified.exit_code == 1
    state = apply(state, verified, state.seq + 1)
    [undone] = await execute(where, state, cmd.UndoMerges(subtask_id="s"))
    assert isinstance(undone, ev.MergesUndone) and undone.restored_commit == theirs
    assert await rev_parse(repo, BRANCH) == theirs  # the user's commit is still there
