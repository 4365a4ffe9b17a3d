"""What each agent pane's title says (supervisor.pane_titles): a retry opens a new pane, and
the one it leaves behind must not go on saying `running`; and what is logged of a pane."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from orchestrator.core import events as ev
from orchestrator.core.reasons import Reason, ReasonCode
from orchestrator.core.views import AttemptView, SubtaskView
from orchestrator.runtime.closing_panes import runner_spec
from orchestrator.runtime.supervisor import pane_titles, retitle
from orchestrator.tmux.server import TmuxServer
from tests.core.test_decide import BASE, feed, plan, start, subtask
from tests.tmux.conftest import private_tmux_server, tmux_out

IDLE = ["sleep", "600"]


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


async def test_a_pane_found_gone_is_logged_as_its_own_subtask_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge step of quote-url-docs merges exc-docs too, and retitles exc-docs's pane in
    its own step: what is logged of that pane names exc-docs and its attempt."""
    sids = ("quote-url-docs", "exc-docs")
    execution = plan(*(subtask(sid) for sid in sids))
    async with private_tmux_server(monkeypatch) as tmux:
        session = start(execution).created.tmux_session
        await tmux.new_session(session, window_name="supervisor", command=IDLE, cwd=tmp_path)
        events: list[ev.ExecutionEvent] = [ev.IntegrationBranchCreated(branch="i", commit=BASE)]
        panes = {}
        for sid in sids:
            run_dir = tmp_path / sid / "1"
            run_dir.mkdir(parents=True)
            command = ["/bin/sh", "-c", "exec sleep 600", runner_spec(str(run_dir))]
            ref = await tmux.open_agent_pane(session, title=sid, command=command, cwd=tmp_path)
            panes[sid] = ref.pane_id
            events += [
                ev.SubtaskScheduled(subtask_id=sid, start_commit=BASE),
                ev.WorkspaceCreated(subtask_id=sid, path=f"/w/{sid}", branch=sid, commit=BASE),
                ev.AttemptStarted(
                    subtask_id=sid,
                    attempt=1,
                    idempotency_key=sid,
                    run_dir=str(run_dir),
                    start_commit=BASE,
                ),
                ev.AttemptPaneOpened(subtask_id=sid, attempt=1, pane_id=ref.pane_id),
            ]
        state = feed(start(execution), events)
        await tmux_out(tmux, "kill-pane", "-t", panes["exc-docs"])  # behind its back
        resumed = TmuxServer(tmux.socket_name)  # a resumed supervisor's: no pane known yet

        merging = structlog.contextvars.bound_contextvars(subtask_id="quote-url-docs", attempt=1)
        with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logged, merging:
            await retitle(resumed, state, "exc-docs")
            await retitle(tmux, state, "exc-docs")

    gone = [entry for entry in logged if entry["event"] == "tmux_pane_gone"]
    assert [(e["pane_id"], e["subtask_id"], e["attempt"]) for e in gone] == [
        (panes["exc-docs"], "exc-docs", 1),
        (panes["exc-docs"], "exc-docs", 1),
    ]
