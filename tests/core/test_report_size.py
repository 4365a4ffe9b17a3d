"""The report of a plan of a thousand: short enough for a pull request's description."""

from __future__ import annotations

from orchestrator.core.report import MERGES_LISTED, build_report, to_markdown
from tests.core.test_decide import World, plan, run, start, subtask


def test_a_report_of_many_merges_lists_the_first_and_counts_the_rest() -> None:
    many = MERGES_LISTED + 50
    ended = run(
        start(plan(*(subtask(f"s{i:04d}") for i in range(many)), max_parallel=32)),
        World(conflicts=["s0007"]),
        limit=20 * many,
    )
    text = to_markdown(build_report(ended, ended.status))
    assert "- **s0000**: " in text and "- **s0200**: " in text and "**s0201**:" not in text
    assert f"- and {many - 1 - MERGES_LISTED} more: `git log --first-parent" in text
    assert "- **s0007** on branch" in text  # what went wrong is listed whole
    assert len(text) < 65_536 // 2
