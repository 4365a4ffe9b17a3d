"""How long a review step (push, pull request command) may run: review.review_step_bound."""

from __future__ import annotations

from dataclasses import replace

from orchestrator.core.plan import ExecutionLimits
from orchestrator.runtime.review import REVIEW_STEP_MIN_S, REVIEW_STEP_TIMEOUT_S, review_step_bound
from tests.core.test_decide import plan, start, subtask


def test_a_review_step_gets_what_is_left_of_the_executions_timeout_but_never_none() -> None:
    limited = plan(subtask("a")).model_copy(
        update={"execution_limits": ExecutionLimits(timeout_s=600.0)}
    )
    state = replace(start(limited), started_at=1_000.0)
    assert review_step_bound(state, now=1_100.0) == 500.0
    assert review_step_bound(state, now=1_590.0) == REVIEW_STEP_MIN_S  # not 10 s
    assert review_step_bound(state, now=9_000.0) == REVIEW_STEP_MIN_S  # late: still runs
    long = limited.model_copy(update={"execution_limits": ExecutionLimits(timeout_s=43_200.0)})
    early = replace(start(long), started_at=1_000.0)
    assert review_step_bound(early, now=1_100.0) == REVIEW_STEP_TIMEOUT_S  # not 11 hours


def test_without_an_execution_timeout_a_review_step_is_bounded_all_the_same() -> None:
    state = replace(start(plan(subtask("a"))), started_at=1_000.0)
    assert review_step_bound(state, now=99_000.0) == REVIEW_STEP_TIMEOUT_S
