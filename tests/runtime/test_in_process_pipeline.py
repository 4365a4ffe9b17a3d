"""The supervisor loop in-process, against the in-memory world (tests/world): a plan runs
to its end, its merges are made, a failed verify sends an attempt back. No git, no tmux."""

from __future__ import annotations

from pathlib import Path

import trio

from orchestrator.core import events as ev
from orchestrator.core.reasons import ReasonCode
from orchestrator.errors import StepFailed
from orchestrator.git.history import DiffStat
from tests.world import running_world, subtask, waits_for, writes
from tests.world.repository import Tree


async def test_three_subtasks_with_a_dependency_run_to_completed_and_merge(tmp_path: Path) -> None:
    agents = {"a": writes("a.txt", "A\n"), "b": writes("b.txt", "B\n"), "c": writes("c.txt", "C\n")}
    async with running_world(tmp_path, {"README.md": "project\n"}, agents) as world:
        world.create(
            {"name": "world", "subtasks": [subtask("a"), subtask("b"), subtask("c", "a", "b")]}
        )
        final = await world.supervise()
    assert final.status == "COMPLETED"
    assert world.integration_files() == {
        "README.md": "project\n",
        "a.txt": "A\n",
        "b.txt": "B\n",
        "c.txt": "C\n",
    }
    # c started from the merges of a and b, after both.
    launched = [sid for sid, _ in world.host.launched]
    assert sorted(launched) == ["a", "b", "c"] and launched[-1] == "c"
    c_start = next(
        e for e in world.events() if isinstance(e, ev.SubtaskScheduled) and e.subtask_id == "c"
    )
    assert world.repository.tree_at(c_start.start_commit).keys() >= {"a.txt", "b.txt"}
    merged = [e.subtask_id for e in world.events() if isinstance(e, ev.SubtaskMerged)]
    assert sorted(merged) == ["a", "b", "c"] and merged[-1] == "c"
    assert world.types()[-1] == "execution_ended"
    assert not world.repository.worktrees  # every worktree released


async def test_a_failed_verify_sends_the_attempt_back_with_its_output_then_it_merges(
    tmp_path: Path,
) -> None:
    async def fixes_on_the_second_try(files: Tree, attempt: int) -> int:
        files["b.txt"] = "good\n" if attempt == 2 else "bad\n"
        return 0

    agents = {"b": fixes_on_the_second_try}
    async with running_world(tmp_path, {"README.md": "project\n"}, agents) as world:
        world.host.checks["check b"] = lambda files: (
            (0, "ok\n") if files.get("b.txt") == "good\n" else (1, "b.txt is bad\n")
        )
        world.create({"name": "world", "subtasks": [subtask("b", verify="check b")]})
        final = await world.supervise()
    assert final.status == "COMPLETED"
    assert world.host.launched == [("b", 1), ("b", 2)]
    verified = [e for e in world.events() if isinstance(e, ev.VerifyFinished)]
    assert [v.exit_code for v in verified] == [1, 0]
    assert "b.txt is bad" in final.subtask("b").attempts[0].feedback
    assert world.integration_files()["b.txt"] == "good\n"


async def test_a_merge_that_breaks_the_integration_check_is_undone(tmp_path: Path) -> None:
    agents = {"a": writes("a.txt", "A\n"), "b": writes("b.txt", "breaks\n")}
    plan = {
        "name": "world",
        "max_parallel": 1,
        "integration_verify": "integration check",
        "subtasks": [subtask("a"), subtask("b")],
    }
    async with running_world(tmp_path, {"README.md": "project\n"}, agents) as world:
        world.host.checks["integration check"] = lambda files: (
            (1, "b broke it\n") if "b.txt" in files else (0, "")
        )
        world.create(plan)
        final = await world.supervise()
    checked = [e for e in world.events() if isinstance(e, ev.IntegrationChecked)]
    assert [(e.subtask_ids, e.exit_code) for e in checked] == [(("a",), 0), (("b",), 1)]
    b_merge = next(
        e for e in world.events() if isinstance(e, ev.SubtaskMerged) and e.subtask_id == "b"
    )
    [undone] = [e for e in world.events() if isinstance(e, ev.MergesUndone)]
    assert undone == ev.MergesUndone(
        subtask_ids=("b",), restored_commit=b_merge.previous_commit, culprit="b"
    )
    assert world.integration_files() == {"README.md": "project\n", "a.txt": "A\n"}
    assert final.status == "FAILED"


async def test_merges_checked_in_a_batch_are_bisected_to_the_one_that_broke_it(
    tmp_path: Path,
) -> None:
    gate = trio.Event()
    ids = [f"s{i}" for i in range(6)]
    # Each agent writes its file; s0 waits until the others are accepted, so that all six
    # merge in one step and are checked together.
    agents = {sid: writes(f"{sid}.txt", f"{sid}\n") for sid in ids}
    agents["s0"] = waits_for(gate, "s0.txt", "s0\n")
    plan = {
        "name": "world",
        "max_parallel": 6,
        "integration_verify": "integration check",
        "subtasks": [subtask(sid) for sid in ids],
    }
    async with running_world(tmp_path, {"README.md": "project\n"}, agents) as world:
        world.host.checks["integration check"] = lambda files: (
            (1, "s3 broke it\n") if "s3.txt" in files else (0, "")
        )
        world.create(plan)
        async with world.supervising() as ended:
            for sid in ids[1:]:
                await world.until(lambda sid=sid: "attempt_judged" in world.types(sid))
            gate.set()
    [final] = ended
    checks = [e for e in world.events() if isinstance(e, ev.IntegrationChecked)]
    runs = [(e.subtask_ids[-1], e.exit_code) for e in checks]
    # All six fail; s0-s2 pass; s3 alone fails: s3 is the culprit. Then s4 and s5 merge
    # again, without it, and pass.
    assert runs == [("s5", 1), ("s2", 0), ("s3", 1), ("s5", 0)]
    # The event says which merge again, and they do, right after it.
    [undone] = [e for e in world.events() if isinstance(e, ev.MergesUndone)]
    assert (undone.subtask_ids, undone.culprit, undone.merge_again) == (
        ("s3", "s4", "s5"),
        "s3",
        ("s4", "s5"),
    )
    after = world.events()[world.events().index(undone) :]
    assert [e.subtask_id for e in after if isinstance(e, ev.SubtaskMerged)] == ["s4", "s5"]
    assert final.merged == ("s0", "s1", "s2", "s4", "s5")
    assert final.subtask("s3").reason is not None
    assert final.subtask("s3").reason.code is ReasonCode.INTEGRATION_VERIFY_FAILED
    files = world.integration_files()
    assert "s3.txt" not in files and {f"{sid}.txt" for sid in ids if sid != "s3"} <= set(files)


async def test_a_merge_whose_change_cannot_be_read_is_taken_back_and_fails(tmp_path: Path) -> None:
    agents = {"a": writes("a.txt", "A\n")}
    async with running_world(tmp_path, {"README.md": "project\n"}, agents) as world:
        commits, read = world.repository.commits, world.repository.diffstat

        async def merges_unreadable(base: str, head: str) -> DiffStat:
            if len(commits[head].parents) == 2:
                raise StepFailed("git diff-tree could not read the merge")
            return await read(base, head)

        world.repository.diffstat = merges_unreadable  # type: ignore[method-assign]
        world.create({"name": "world", "subtasks": [subtask("a")]})
        final = await world.supervise()
    reason = final.subtask("a").reason
    assert reason is not None and reason.code is ReasonCode.MERGE_FAILED, reason
    assert "could not read the merge" in reason.detail
    assert not [e for e in world.events() if isinstance(e, ev.SubtaskMerged)]
    assert world.integration_files() == {"README.md": "project\n"}  # as the log says


async def test_two_subtasks_that_change_one_file_differently_conflict_on_it(
    tmp_path: Path,
) -> None:
    agents = {"a": writes("README.md", "by a\n"), "b": writes("README.md", "by b\n")}
    plan = {"name": "world", "max_parallel": 2, "subtasks": [subtask("a"), subtask("b")]}
    async with running_world(tmp_path, {"README.md": "project\n"}, agents) as world:
        world.create(plan)
        final = await world.supervise()
    conflicted = next(e for e in world.events() if isinstance(e, ev.SubtaskConflicted))
    merged = next(e for e in world.events() if isinstance(e, ev.SubtaskMerged))
    assert {conflicted.subtask_id, merged.subtask_id} == {"a", "b"}
    # The conflict names the path and the merged subtask that touched it first.
    assert [(c.path, c.with_) for c in conflicted.conflicts] == [
        ("README.md", (merged.subtask_id,))
    ]
    assert world.integration_files()["README.md"] == f"by {merged.subtask_id}\n"
    assert final.status == "FAILED"


async def test_a_merge_step_merges_what_was_accepted_behind_its_head_and_titles_each_pane(
    tmp_path: Path,
) -> None:
    gate = trio.Event()
    agents = {
        "head": waits_for(gate, "head.txt", "head\n"),
        "a": writes("same.txt", "A\n"),
        "b": writes("same.txt", "B\n"),
    }
    async with running_world(tmp_path, {"README.md": "project\n"}, agents) as world:
        world.create({"name": "world", "subtasks": [subtask("head"), subtask("a"), subtask("b")]})
        async with world.supervising() as final:
            # a and b accepted while the head of the merge queue still works.
            await world.until(lambda: "attempt_judged" in world.types("b"))
            await world.until(lambda: "attempt_judged" in world.types("a"))
            gate.set()
    [state] = final
    merges = [e for e in world.events() if e.type in ("subtask_merged", "subtask_conflicted")]
    assert [(e.type, e.subtask_id) for e in merges] == [
        ("subtask_merged", "head"),
        ("subtask_merged", "a"),
        ("subtask_conflicted", "b"),
    ]
    seqs = [i for i, e in enumerate(world.events()) if e in merges]
    assert seqs == list(range(seqs[0], seqs[0] + 3))  # one step, one append
    pane = state.subtask("b").attempts[-1].pane_id
    assert pane is not None and world.host.titles[pane] == "b · conflicted"
