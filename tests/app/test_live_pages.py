"""The live view's pages (app/live_pages.py): what a thousand subtasks show first."""

from __future__ import annotations

from typing import Any

from orchestrator.app.live_pages import Pager, counts


def _document(states: list[str]) -> dict[str, Any]:
    return {"subtasks": [{"id": f"s{i}", "state": state} for i, state in enumerate(states)]}


def _ids(pager: Pager, states: list[str], rows: int) -> list[str]:
    return [item["id"] for item in pager.cut(_document(states), rows).subtasks]


def test_subtasks_at_work_come_first_then_those_that_need_a_look() -> None:
    states = ["merged", "pending", "failed", "running", "pending", "verifying", "conflicted"]

    assert _ids(Pager(), states, rows=10) == ["s3", "s5", "s2", "s6", "s0", "s1", "s4"]


def test_the_latest_changes_come_right_after_the_subtasks_at_work() -> None:
    pager = Pager()
    _ids(pager, ["running", "running", "pending", "pending"], rows=10)
    _ids(pager, ["merged", "running", "running", "pending"], rows=10)

    shown = _ids(pager, ["merged", "failed", "running", "running"], rows=10)

    assert shown == ["s2", "s3", "s1", "s0"]  # s1 failed after s0 merged


def test_a_thousand_subtasks_page_with_an_indicator_and_stay_on_the_last_page() -> None:
    states = ["running"] * 32 + ["merged"] * 500 + ["pending"] * 492
    pager = Pager()

    first = pager.cut(_document(states), rows=40)
    assert (first.number, first.pages, len(first.subtasks)) == (1, 26, 40)
    assert [item["state"] for item in first.subtasks[:32]] == ["running"] * 32
    assert first.counts == "1,024 subtasks: 492 pending, 32 running, 500 merged"

    pager.turn(+100)
    last = pager.cut(_document(states), rows=40)
    assert (last.number, len(last.subtasks)) == (26, 1024 - 25 * 40)
    pager.turn(-1)
    assert pager.cut(_document(states), rows=40).number == 25
    pager.turn(-100)
    assert pager.cut(_document(states), rows=0).number == 1  # a tiny pane shows a row


def test_counts_say_each_state_once() -> None:
    assert counts([{"state": "merged"}]) == "1 subtask: 1 merged"
    assert counts([]) == "0 subtasks"


def test_a_merge_under_its_integration_check_is_at_work_and_counted_as_integrating() -> None:
    states = ["merged", "pending", "integrating", "succeeded", "running"]

    page = Pager().cut(_document(states), rows=10)

    assert [item["id"] for item in page.subtasks][:2] == ["s2", "s4"]
    assert page.counts == "5 subtasks: 1 pending, 1 running, 1 succeeded, 1 integrating, 1 merged"
