"""The prompt's section on earlier attempts, for agents that start each attempt cold."""

from __future__ import annotations

from dataclasses import replace

from orchestrator.core import events as ev
from orchestrator.core.earlier_attempts import MAX_COMMITS, earlier_attempts_section
from orchestrator.core.reasons import Reason, ReasonCode
from orchestrator.core.views import AttemptView, SubtaskView


def attempt(number: int, **fields: object) -> AttemptView:
    return AttemptView(number=number, idempotency_key="k", run_dir="/r", start_commit="c", **fields)  # type: ignore[arg-type]


def view(*attempts: AttemptView) -> SubtaskView:
    return replace(SubtaskView(id="a"), attempts=attempts)


def test_the_first_attempt_is_told_nothing() -> None:
    assert earlier_attempts_section(view(attempt(1)), ["abc first"], "1 file changed") == ""


def test_it_says_why_each_earlier_attempt_did_not_pass_and_what_the_branch_holds() -> None:
    section = earlier_attempts_section(
        view(
            attempt(
                1,
                reason=Reason(
                    code=ReasonCode.VERIFY_FAILED, detail="`pytest` failed (exit status 1)"
                ),
            ),
            attempt(2, interrupted=True, recovery_ref="refs/kairo/recovery/x/a/2"),
            attempt(3),
        ),
        ["0123456789ab kairo: a, attempt 1"],
        "1 file changed, 2 insertions(+)",
    )
    assert section.splitlines()[:2] == [
        "- Attempt 1 was not accepted: verify_failed: `pytest` failed (exit status 1).",
        "- Attempt 2 was interrupted (the supervisor stopped while it ran); what it had not "
        "committed was set aside on refs/kairo/recovery/x/a/2.",
    ]
    assert "  0123456789ab kairo: a, attempt 1" in section
    assert "  1 file changed, 2 insertions(+)" in section
    assert "Attempt 3" not in section


def test_an_empty_branch_is_said_to_be_empty() -> None:
    section = earlier_attempts_section(
        view(attempt(1, reason=Reason(code=ReasonCode.NO_CHANGES, detail="x")), attempt(2)), [], ""
    )
    assert "None of their work is on the branch" in section


def test_a_long_history_shows_its_newest_commits() -> None:
    commits = [f"c{i:02d} commit {i}" for i in range(MAX_COMMITS + 5)]
    section = earlier_attempts_section(view(attempt(1), attempt(2)), commits, "")
    assert "(5 earlier commits)" in section
    assert "c04 commit 4" not in section and f"c{MAX_COMMITS + 4} " in section


def resolving(
    number: int, *paths_with: tuple[str, tuple[str, ...]], **fields: object
) -> AttemptView:
    started = ev.ResolutionStarted(
        subtask_id="a",
        attempt=number,
        idempotency_key="k",
        run_dir="/r",
        start_commit="c",
        merged_in="d" * 40,
        conflicts=tuple(
            ev.Conflict(path=path, kind="content", **{"with": who}) for path, who in paths_with
        ),
    )
    return attempt(number, resolution=started, **fields)


def test_an_accepted_attempt_whose_merge_conflicted_is_said_to_be_so_and_with_whom() -> None:
    section = earlier_attempts_section(
        view(
            attempt(1, accepted=True),
            resolving(2, ("shop/a.py", ("discount",)), ("shop/b.py", ("discount", "fee"))),
        ),
        ["0123456789ab kairo: a, attempt 1"],
        "1 file changed",
    )
    assert section.splitlines()[0] == (
        "- Attempt 1 was accepted; its merge into the integration branch conflicted with "
        "discount, fee (shop/a.py, shop/b.py)."
    )
    assert "not accepted" not in section


def test_a_refused_resolution_and_the_next_conflict_are_told_apart() -> None:
    refused = Reason(code=ReasonCode.RESOLUTION_UNFINISHED, detail="markers left in a.py")
    section = earlier_attempts_section(
        view(
            attempt(1, accepted=True),
            resolving(2, ("a.py", ()), accepted=False, reason=refused),
            resolving(3, ("a.py", ()), accepted=True),
            resolving(4, *((f"m{i}.py", ("x",)) for i in range(7))),
        ),
        [],
        "",
    )
    assert section.splitlines()[:3] == [
        "- Attempt 1 was accepted; its merge into the integration branch conflicted with "
        "work merged earlier (a.py).",
        "- Attempt 2 (resolving its merge's conflict) was not accepted: resolution_unfinished: "
        "markers left in a.py.",
        "- Attempt 3 (resolving its merge's conflict) was accepted; its merge into the "
        "integration branch conflicted with x (m0.py, m1.py, m2.py, m3.py, m4.py and 2 more).",
    ]
