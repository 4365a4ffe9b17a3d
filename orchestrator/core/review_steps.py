"""What `decide` does once every subtask has settled: the plan's review steps (push the
integration branch, open a pull request), one at a time, each recorded as started before it
runs, so that a pull request command a crash cut short is never run twice (store.md)."""

from __future__ import annotations

from orchestrator.core import events as ev
from orchestrator.core.commands import RunReviewStep
from orchestrator.core.state import ExecutionState


def _review_steps(state: ExecutionState) -> list[ev.ReviewStep]:
    """The plan's review steps, when there is something to review: not after a stop."""
    review = state.plan.review
    if state.stop is not None or not state.merged:
        return []
    steps: list[ev.ReviewStep] = ["push"] if review.push else []
    return [*steps, "pull_request"] if review.pr_command else steps


def next_review_step(state: ExecutionState) -> ev.ExecutionEvent | RunReviewStep | None:
    """The next review step, one at a time, each recorded as started before it runs."""
    finished = {step: event for step, event in state.review.items() if event is not None}
    for step in _review_steps(state):
        if step in finished:
            continue
        if state.breaches and step not in state.review:
            # Pushed where? A remote's URL, an `insteadOf` or a credential helper may be
            # what was changed: nothing leaves the machine once the guard found a change.
            return ev.ReviewStepFinished(step=step, exit_code=None, output_tail=NOT_RUN_BREACHED)
        if step == "pull_request" and finished.get("push", _PUSHED).exit_code != 0:
            return ev.ReviewStepFinished(
                step=step, exit_code=None, output_tail="not run: the push failed"
            )
        if step not in state.review:
            return ev.ReviewStepStarted(step=step)
        if state.review_cut and step == "pull_request":
            return ev.ReviewStepFinished(
                step=step,
                exit_code=None,
                output_tail="not run again: the supervisor stopped while it ran, and a "
                "second run could open a second pull request; check whether it opened one",
            )
        return RunReviewStep(step=step)
    return None


NOT_RUN_BREACHED = (
    "not run: the guard found a change to what you own (`kairo-orch status` lists it); "
    "push the integration branch yourself once you have looked"
)

_PUSHED = ev.ReviewStepFinished(step="push", exit_code=0)  # no push configured: go on
