"""What each agent pane's title says (supervisor.pane_titles): a retry opens a new pane, and
the one it leaves behind must not go on saying `running`."""

from __future__ import annotations

from orchestrator.core.reasons import Reason, ReasonCode
from orchestrator.core.views import AttemptView, SubtaskView
from orchestrator.runtime.supervisor import pane_titles


def attempt(number: int, pane_id: str | None, **fields: object) -> AttemptView:
    return AttemptView(number, f"k{number}", f"/runs/{number}", "c0ffee", pane_id, **fields)  # type: ignore[arg-type]


def test_a_single_attempts_pane_says_the_subtasks_state() -> None:
    view = SubtaskView("greet", state="verifying", attempts=(attempt(1, "%1"),))
    assert pane_titles("greet", view) == {"%1": "greet · verifying"}


def test_the_panes_a_retry_left_say_how_their_attempts_ended() -> None:
    view = SubtaskView(
        "greet",
        state="failed",
        attempts=(
            attempt(
                1, "%1", reason=Reason(code=ReasonCode.VERIFY_FAILED, detail="`pytest` exited")
            ),
            attempt(2, "%4", interrupted=True),
            attempt(3, None),  # its pane not open yet
            attempt(4, "%9", reason=Reason(code=ReasonCode.NO_PROGRESS, detail="the same tree")),
        ),
    )
    assert pane_titles("greet", view) == {
        "%1": "greet · attempt 1 · sent back (verify_failed)",
        "%4": "greet · attempt 2 · interrupted",
        "%9": "greet · failed · attempt 4",
    }
