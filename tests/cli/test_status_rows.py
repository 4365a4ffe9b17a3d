"""`status` of a plan of a thousand: the subtasks that need a look, the rest counted."""

from __future__ import annotations

from typing import Any

from orchestrator.cli.render import STATUS_ROWS, shown_subtasks


def subtasks(**states: int) -> list[dict[str, Any]]:
    return [{"id": f"{state}-{i}", "state": state} for state, n in states.items() for i in range(n)]


def test_a_small_plan_lists_every_subtask_in_plan_order() -> None:
    small = subtasks(merged=3, pending=2, running=1)
    assert shown_subtasks(small) == (small, {})


def test_a_large_plan_lists_what_runs_first_and_counts_the_rest() -> None:
    large = subtasks(merged=900, pending=80, failed=2, running=32)
    shown, left = shown_subtasks(large)
    assert len(shown) == STATUS_ROWS
    assert [item["state"] for item in shown] == ["running"] * 32 + ["failed"] * 2 + ["pending"] * 6
    assert left == {"merged": 900, "pending": 74}
    assert shown_subtasks(large, every=True) == (large, {})
