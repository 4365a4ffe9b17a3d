"""The dropped-hunk check of an agent's conflict resolution: pure, in milliseconds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core import events as ev
from orchestrator.core.reasons import ReasonCode
from orchestrator.core.resolution import (
    conflict_section,
    dropped_hunks,
    has_markers,
    refusal,
    unexplained,
)

BASE = "a\nb\nc\n"
OURS = "a\nb\nours1\nours2\nc\n"
THEIRS = "a\ntheirs\nb\nc\n"


def test_a_resolution_keeping_both_sides_drops_nothing() -> None:
    assert dropped_hunks("f", BASE, OURS, THEIRS, "a\ntheirs\nb\nours1\nours2\nc\n") == ()


def test_a_resolution_keeping_one_side_drops_the_others_hunk_by_its_lines() -> None:
    (hunk,) = dropped_hunks("f", BASE, OURS, THEIRS, OURS)
    assert (hunk.label, hunk.lines) == ("theirs f:2-2", ("theirs",))
    (hunk,) = dropped_hunks("f", BASE, OURS, THEIRS, THEIRS)
    assert hunk.label == "ours f:3-4"


def test_a_line_changed_in_the_combining_counts_as_dropped() -> None:
    assert len(dropped_hunks("f", BASE, OURS, THEIRS, "a\ntheirs\nb\nours1 edited\nours2\nc\n"))


def test_the_evidence_is_the_lines_the_result_lacks_never_one_it_holds() -> None:
    base = "a\nz\n"
    ours = "a\nnew1\nreturn x\nnew2\nz\n"
    theirs = "a\nreturn x\nz\n"
    # ours' hunk half kept: its `return x` line survives, new1 and new2 do not
    (hunk,) = dropped_hunks("f", base, ours, theirs, "a\nreturn x\nz\n")
    assert (hunk.label, hunk.lines) == ("ours f:2-4", ("new1", "new2"))
    # every line kept, in another order: nothing is dropped (the diff shows the move)
    assert dropped_hunks("f", base, ours, theirs, "a\nnew2\nreturn x\nnew1\nz\n") == ()


def test_a_dropped_hunk_passes_only_when_named_with_a_why() -> None:
    dropped = dropped_hunks("f", BASE, OURS, THEIRS, OURS)
    assert unexplained(dropped, "") == ("theirs f:2-2",)
    assert unexplained(dropped, "- `theirs f:2-2`") == ("theirs f:2-2",)
    assert unexplained(dropped, "- `theirs f:2-2`: ours renames it, so it is gone") == ()
    check = ev.ResolutionCheck(merged_in="x" * 40, dropped=dropped, unexplained=("theirs f:2-2",))
    reason = refusal(check)
    assert reason is not None and reason.code is ReasonCode.RESOLUTION_DROPPED_CHANGES


def test_markers_left_are_found() -> None:
    assert has_markers("a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> abc\n")
    assert not has_markers("a\n=======\nb\n")  # a lone rule of a text file is no marker


lines = st.lists(st.sampled_from(["x", "y", "z", "w", ""]), max_size=8)


@given(lines, lines, lines)
def test_the_union_of_both_sides_in_order_never_drops_a_hunk(
    base: list[str], ours: list[str], theirs: list[str]
) -> None:
    def text(rows: list[str]) -> str:
        return "".join(f"{row}\n" for row in rows)

    # every line of both sides, ours then theirs: each side's added lines are there in order
    kept = text(ours + theirs)
    assert dropped_hunks("f", text(base), text(ours), text(theirs), kept) == ()


def test_the_prompts_account_of_many_conflicts_stays_small_enough_to_hand_over() -> None:
    paths = [f"src/m{i:03}.py" for i in range(300)]
    started = ev.ResolutionStarted(
        subtask_id="s",
        attempt=2,
        idempotency_key="k",
        run_dir="/r",
        start_commit="a" * 40,
        merged_in="b" * 40,
        conflicts=tuple(ev.Conflict(path=p, kind="content", **{"with": ("other",)}) for p in paths),
    )
    diff = "\n".join(f"+line {i} of a long change" for i in range(40))
    section = conflict_section(
        started, {p: diff for p in paths}, {p: [f"ours {p}:1-40"] for p in paths}
    )
    assert len(section.encode()) < 64 * 1024  # an environment variable exec still takes
    assert all(f"### {p} (content), collides with: other" in section for p in paths)
    assert "`git diff HEAD...MERGE_HEAD -- PATH` shows" in section
    assert "ours src/m000.py:1-40" in section  # the first ones in full


def test_past_a_bound_the_conflicted_paths_are_counted_not_listed() -> None:
    paths = [f"src/a/very/long/path/to/module_number_{i:05}.py" for i in range(2000)]
    started = ev.ResolutionStarted(
        subtask_id="s",
        attempt=2,
        idempotency_key="k",
        run_dir="/r",
        start_commit="a" * 40,
        merged_in="b" * 40,
        conflicts=tuple(ev.Conflict(path=p, kind="content") for p in paths),
    )
    section = conflict_section(started, {}, {})
    assert len(section.encode()) < 64 * 1024
    listed = section.count("### src/")
    assert 0 < listed < 2000
    assert f"And {2000 - listed} more conflicted path(s)" in section


@given(lines, lines, lines, lines)
def test_no_line_shown_as_dropped_is_in_the_result_as_often_as_the_hunk_added_it(
    base: list[str], ours: list[str], theirs: list[str], resolved: list[str]
) -> None:
    def text(rows: list[str]) -> str:
        return "".join(f"{row}\n" for row in rows)

    for hunk in dropped_hunks("f", text(base), text(ours), text(theirs), text(resolved)):
        added = (ours if hunk.side == "ours" else theirs)[hunk.start - 1 : hunk.end]
        assert hunk.lines
        assert all(resolved.count(line) < added.count(line) for line in hunk.lines)
