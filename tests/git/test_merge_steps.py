"""A merge step of several accepted subtasks against a real repository: each gets its own
merge commit, a conflict ends the step there, and a step that a dying supervisor wrote
but never recorded is found again merge by merge."""

from __future__ import annotations

from pathlib import Path

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.plan import ResolvedPlan
from orchestrator.core.state import ExecutionState, apply
from orchestrator.git.refs import branch_ref, parents_of, rev_parse
from orchestrator.runtime.effects import execute
from tests.git.conftest import run, write
from tests.git.test_integration_branch import BRANCH, edges, execution


def accepted(repo: Path, files: dict[str, str]) -> ExecutionState:
    """One subtask a file, each committed on its own branch and accepted, in that order."""
    base = run(repo, "rev-parse", "HEAD").strip()
    plan = ResolvedPlan.model_validate(
        {
            "name": "p",
            "subtasks": [
                {"id": sid, "title": sid, "prompt": "", "agent": {"kind": "shell"}} for sid in files
            ],
        }
    )
    state = execution(repo, base, plan)
    events: list[ev.ExecutionEvent] = [ev.IntegrationBranchCreated(branch=BRANCH, commit=base)]
    for sid, path in files.items():
        run(repo, "switch", "-q", "-c", f"kairo-subtasks/{sid}", base)
        write(repo / path, f"{sid}\n")
        run(repo, "add", path)
        run(repo, "commit", "-q", "-m", sid)
        head = run(repo, "rev-parse", "HEAD").strip()
        events += [
            ev.SubtaskScheduled(subtask_id=sid, start_commit=base),
            ev.WorkspaceCreated(subtask_id=sid, path=str(repo), branch=sid, commit=base),
            ev.AttemptStarted(
                subtask_id=sid, attempt=1, idempotency_key=sid, run_dir="/r", start_commit=base
            ),
            ev.AttemptExited(subtask_id=sid, attempt=1, exit_code=0),
            ev.AttemptCommitted(subtask_id=sid, attempt=1, head_commit=head, changed=True),
            ev.AttemptJudged(subtask_id=sid, attempt=1, accepted=True),
        ]
    run(repo, "switch", "-q", "main")
    run(repo, "branch", BRANCH, base)
    for event in events:
        state = apply(state, event, state.seq + 1)
    assert state.anomalies == ()
    return state


def step(state: ExecutionState) -> cmd.MergeSubtask:
    first, *rest = state.subtasks
    return cmd.MergeSubtask(subtask_id=first, then=tuple(rest))


async def test_a_step_merges_each_subtask_with_a_merge_commit_of_its_own(repo: Path) -> None:
    state = accepted(repo, {"a": "a.txt", "b": "b.txt", "c": "c.txt"})
    base = state.integration_head

    merged = await execute(edges(repo), state, step(state))

    assert [type(e) for e in merged] == [ev.SubtaskMerged] * 3
    chain = [(e.previous_commit, e.merge_commit) for e in merged]  # type: ignore[union-attr]
    assert chain[0][0] == base
    assert chain[1][0] == chain[0][1] and chain[2][0] == chain[1][1]
    assert await rev_parse(repo, BRANCH) == chain[2][1]
    for event in merged:
        assert isinstance(event, ev.SubtaskMerged)
        parents = await parents_of(repo, event.merge_commit)
        assert parents == [event.previous_commit, event.head_commit]
        assert event.changed_paths == (f"{event.subtask_id}.txt",)


async def test_a_conflict_ends_the_step_there_naming_whom_it_met_in_the_same_step(
    repo: Path,
) -> None:
    state = accepted(repo, {"a": "same.txt", "b": "same.txt", "c": "c.txt"})

    outcome = await execute(edges(repo), state, step(state))

    assert [e.type for e in outcome] == ["subtask_merged", "subtask_conflicted"]
    conflicted = outcome[1]
    assert isinstance(conflicted, ev.SubtaskConflicted) and conflicted.subtask_id == "b"
    assert [(c.path, c.with_) for c in conflicted.conflicts] == [("same.txt", ("a",))]
    assert await rev_parse(repo, BRANCH) == outcome[0].merge_commit  # type: ignore[union-attr]
    # c stays accepted, for the next step.
    for event in outcome:
        state = apply(state, event, state.seq + 1)
    assert state.subtask("c").state == "succeeded"


async def test_a_step_written_but_not_recorded_is_found_again_merge_by_merge(repo: Path) -> None:
    state = accepted(repo, {"a": "a.txt", "b": "b.txt", "c": "c.txt"})
    written = await execute(edges(repo), state, step(state))  # then the supervisor died
    tip = await rev_parse(repo, branch_ref(BRANCH))

    again = await execute(edges(repo), state, step(state))

    assert again == written
    assert await rev_parse(repo, branch_ref(BRANCH)) == tip  # nothing written twice
