"""Overlaps seen while agents work: what is new of a look, how the fold keeps them, and how
status, the report and the live view say them."""

from __future__ import annotations

import pytest

from orchestrator.app.live_pages import overlap_line
from orchestrator.core import checkpoints
from orchestrator.core import events as ev
from orchestrator.core.overlaps import overlaps_to_record, paths_in_words
from orchestrator.core.report import build_report, to_markdown
from orchestrator.core.state import ExecutionState
from orchestrator.core.status import status_document
from orchestrator.runtime.overlap_watch import watched
from tests.core.test_decide import BASE, feed, plan, start, subtask


def running(*ids: str) -> ExecutionState:
    """An execution whose subtasks `ids` (of a plan of those and `idle`) run."""
    state = start(plan(*(subtask(sid) for sid in (*ids, "idle")), max_parallel=8))
    for sid in ids:
        state = feed(
            state,
            [
                ev.SubtaskScheduled(subtask_id=sid, start_commit=BASE),
                ev.WorkspaceCreated(subtask_id=sid, path=f"/w/{sid}", branch=sid, commit=BASE),
                ev.AttemptStarted(
                    subtask_id=sid, attempt=1, idempotency_key=sid, run_dir=f"/r/{sid}",
                    start_commit=BASE,
                ),
            ],
        )  # fmt: skip
    return state


def test_two_subtasks_editing_one_file_are_recorded_once_per_path() -> None:
    state = running("fix-a", "fix-b", "fix-c")
    seen = {"fix-a": {"src/x.py", "a.py"}, "fix-b": {"src/x.py"}, "fix-c": {"c.py"}}
    (found,) = overlaps_to_record(state, seen, {}, at=10.0)
    assert found == ev.OverlapFound(
        subtasks=("fix-a", "fix-b"), kind="both_edit", paths=("src/x.py",), at=10.0
    )
    state = feed(state, [found])
    assert overlaps_to_record(state, seen, {}, at=11.0) == []  # seen again: nothing new
    seen["fix-b"] = {"src/x.py", "a.py"}
    (more,) = overlaps_to_record(state, seen, {}, at=12.0)
    assert more.paths == ("a.py",)  # the new path alone
    state = feed(state, [more])
    (overlap,) = state.overlaps  # one pair, its paths together, first seen at 10
    assert (overlap.subtasks, overlap.paths, overlap.at) == (
        ("fix-a", "fix-b"),
        ("src/x.py", "a.py"),
        10.0,
    )


def test_a_pair_is_named_in_plan_order_whatever_order_it_is_seen_in() -> None:
    state = running("fix-a", "fix-b")
    (found,) = overlaps_to_record(state, {"fix-b": {"x"}, "fix-a": {"x"}}, {}, at=1.0)
    assert found.subtasks == ("fix-a", "fix-b")


def test_an_accepted_branch_waiting_to_merge_pairs_with_a_running_one() -> None:
    state = running("fix-a", "fix-b")
    state = feed(
        state,
        [
            ev.AttemptExited(subtask_id="fix-a", attempt=1, exit_code=0),
            ev.AttemptCommitted(
                subtask_id="fix-a", attempt=1, head_commit="c" * 40, changed=True,
                paths=("x",), branch_paths=("x",),
            ),
            ev.VerifyFinished(subtask_id="fix-a", attempt=1, exit_code=0),
            ev.AttemptJudged(subtask_id="fix-a", attempt=1, accepted=True),
        ],
    )  # fmt: skip
    assert state.subtask("fix-a").state == "succeeded"
    (found,) = overlaps_to_record(state, {"fix-b": {"x", "y"}}, {}, at=1.0)
    assert (found.subtasks, found.paths) == (("fix-a", "fix-b"), ("x",))
    assert overlaps_to_record(state, {}, {}, at=1.0) == []  # none running: nothing to say


def test_a_conflict_with_merged_work_names_the_merged_subtask() -> None:
    state = running("fix-a", "fix-b")
    merged = ev.SubtaskMerged(
        subtask_id="fix-a", merge_commit="m" * 40, previous_commit=BASE, head_commit="c" * 40,
        changed_paths=("src/x.py",), diffstat="1 file changed",
    )  # fmt: skip
    state = feed(
        state,
        [
            ev.AttemptExited(subtask_id="fix-a", attempt=1, exit_code=0),
            ev.AttemptCommitted(subtask_id="fix-a", attempt=1, head_commit="c" * 40, changed=True),
            ev.VerifyFinished(subtask_id="fix-a", attempt=1, exit_code=0),
            ev.AttemptJudged(subtask_id="fix-a", attempt=1, accepted=True),
            merged,
        ],
    )
    found = overlaps_to_record(state, {"fix-b": {"src/x.py"}}, {"fix-b": {"src/x.py"}}, at=5.0)
    assert found == [
        ev.OverlapFound(
            subtasks=("fix-b",), kind="conflicts_with_merged", paths=("src/x.py",), at=5.0
        )
    ]
    state = feed(state, found)
    document = status_document(state, status="RUNNING", version=1, head_seq=9, head_hash="h")
    assert document["overlaps"] == [
        {
            "subtasks": ["fix-b"],
            "kind": "conflicts_with_merged",
            "paths": ["src/x.py"],
            "at": 5.0,
            "sentence": "fix-b's change to src/x.py would conflict with merged work (fix-a)",
        }
    ]


def test_status_the_report_and_the_live_view_say_it_and_only_then() -> None:
    state = running("fix-a", "fix-b")
    assert "overlaps" not in status_document(
        state, status="RUNNING", version=1, head_seq=1, head_hash="h"
    )
    assert "overlaps" not in build_report(state, "RUNNING")
    state = feed(
        state, overlaps_to_record(state, {"fix-a": {"src/x.py"}, "fix-b": {"src/x.py"}}, {}, 1.0)
    )
    document = status_document(state, status="RUNNING", version=1, head_seq=1, head_hash="h")
    (overlap,) = document["overlaps"]
    assert overlap["sentence"] == "fix-a and fix-b both edit src/x.py"
    assert overlap_line(document) == "overlaps: fix-a and fix-b both edit src/x.py"
    markdown = to_markdown(build_report(state, "RUNNING"))
    assert "## Overlaps seen while the agents worked\n\n- fix-a and fix-b both edit src/x.py" in (
        markdown
    )


def test_a_checkpoint_keeps_the_overlaps() -> None:
    state = running("fix-a", "fix-b")
    state = feed(state, overlaps_to_record(state, {"fix-a": {"x"}, "fix-b": {"x"}}, {}, 1.0))
    restored = checkpoints.restore(checkpoints.snapshot(state, state.seq, "h"))
    assert restored is not None and restored[0].overlaps == state.overlaps


def test_an_overlap_naming_a_subtask_the_plan_has_not_is_refused() -> None:
    state = running("fix-a")
    with pytest.raises(KeyError):
        feed(state, [ev.OverlapFound(subtasks=("fix-a", "nope"), kind="both_edit", paths=("x",))])


def test_many_paths_are_counted_in_a_sentence() -> None:
    assert paths_in_words(("a",)) == "a"
    assert paths_in_words(("a", "b")) == "a and b"
    assert paths_in_words(("a", "b", "c", "d", "e")) == "a, b, c and 2 more files"


def test_an_overlap_round_trips_through_its_store_record() -> None:
    event = ev.OverlapFound(subtasks=("a", "b"), kind="both_edit", paths=("x", "y"), at=2.5)
    assert ev.from_record(*ev.to_record(event)) == event


def test_a_subtask_resolving_a_conflict_is_not_looked_at() -> None:
    state = running("a", "b")
    assert [view.id for view in watched(state)] == ["a", "b"]
    resolving = ev.ResolutionStarted(
        subtask_id="b", attempt=2, idempotency_key="k", run_dir="/r/b/2",
        start_commit=BASE, merged_in="c" * 40, conflicts=(),
    )  # fmt: skip
    state = feed(state, [resolving])
    # its worktree holds the integration branch merged in: none of that is b's own work
    assert [view.id for view in watched(state)] == ["a"]
