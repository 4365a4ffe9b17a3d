"""The subtask lifecycle table: what today's logs do fits it, what does not is noted, not
crashed on, and the architecture document shows the table the code has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest

from orchestrator.core import checkpoints
from orchestrator.core import events as ev
from orchestrator.core.decide import decide
from orchestrator.core.lifecycle import TRANSITIONS, Move, markdown_table
from orchestrator.core.reasons import Reason, ReasonCode
from orchestrator.core.report import build_report, to_markdown
from orchestrator.core.state import ExecutionState, apply, fold
from orchestrator.core.status import status_document
from orchestrator.core.views import TERMINAL, SubtaskStateName
from tests.core.test_decide import BASE, feed, plan, start, subtask
from tests.golden import logs

STATES: tuple[SubtaskStateName, ...] = get_args(SubtaskStateName)
ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def golden_events(name: str) -> list[ev.ExecutionEvent]:
    rows = (logs.HERE / name / "log.jsonl").read_text(encoding="utf-8").splitlines()
    return [
        ev.from_record(r["event_type"], json.loads(r["payload_json"]), r["schema_version"])
        for r in map(json.loads, rows)
    ]


@pytest.mark.parametrize("name", logs.golden_names())
def test_every_move_of_the_golden_logs_is_in_the_table(name: str) -> None:
    assert fold("E", golden_events(name)).anomalies == ()


def test_the_table_is_the_one_the_architecture_document_shows() -> None:
    assert markdown_table() in ARCHITECTURE.read_text(encoding="utf-8")


def test_every_move_leaves_states_and_leads_to_one() -> None:
    for move, transition in TRANSITIONS.items():
        assert transition.sources and transition.sources <= set(STATES), move
        assert transition.target is None or transition.target in STATES, move
    assert set(TRANSITIONS) == set(Move)


def test_every_state_is_reached_from_pending_and_every_unended_one_can_end() -> None:
    reached = {"pending"}
    while True:
        more = {
            t.target for t in TRANSITIONS.values() if t.target and t.sources & reached
        } - reached
        if not more:
            break
        reached |= more
    assert reached == set(STATES)
    for state in set(STATES) - TERMINAL:
        leads = {t.target for t in TRANSITIONS.values() if state in t.sources}
        assert leads & TERMINAL, state


def test_what_a_terminal_state_may_still_do_is_go_again_after_a_rerun() -> None:
    out_of_terminal = {
        (move, state, transition.target)
        for move, transition in TRANSITIONS.items()
        for state in transition.sources & TERMINAL
        if transition.target not in (None, state)
    }
    assert out_of_terminal == {
        (Move.RERUN, "stopped", "running"),
        (Move.DEPENDENCY_RERUN, "skipped", "pending"),
        (Move.RESOLUTION_STARTED, "conflicted", "running"),  # `resolve_conflicts`
        # its conflict was with a merge its check then undid
        (Move.UNDONE_CONFLICT_AGAIN, "conflicted", "succeeded"),
    }


def an_old_log_with_an_illegal_move() -> ExecutionState:
    """A merge recorded for a subtask that never ran: no version wrote that, but an old
    or hand-edited log may hold anything the events' shapes allow."""
    state = start(plan(subtask("a"), subtask("b")))
    merged = ev.SubtaskMerged(
        subtask_id="b",
        merge_commit="m",
        previous_commit=BASE,
        head_commit="h",
        changed_paths=("x.py",),
        diffstat="1 file changed",
    )
    return apply(state, merged, state.seq + 1)


def test_an_illegal_move_in_an_old_log_is_folded_as_written_and_noted() -> None:
    state = an_old_log_with_an_illegal_move()
    assert state.subtask("b").state == "merged" and state.merged == ("b",)  # as ever
    (anomaly,) = state.anomalies
    assert (anomaly.seq, anomaly.subtask_id, anomaly.move) == (2, "b", Move.MERGED)
    assert (anomaly.source, anomaly.target) == ("pending", "merged")
    assert anomaly.sentence() == (
        "event 2 (subtask_merged) took subtask b from pending to merged, which the "
        "lifecycle does not allow"
    )


def test_status_and_report_mention_an_illegal_move_and_only_then() -> None:
    state = an_old_log_with_an_illegal_move()
    document = status_document(state, status="PAUSED", version=1, head_seq=2, head_hash="h")
    assert document["anomalies"] == [state.anomalies[0].sentence()]
    report = build_report(state, "PAUSED")
    assert report["anomalies"] == document["anomalies"]
    assert f"- {state.anomalies[0].sentence()}" in to_markdown(report)
    clean = start(plan(subtask("a")))
    assert "anomalies" not in status_document(
        clean, status="PAUSED", version=1, head_seq=1, head_hash="h"
    )
    assert "anomalies" not in build_report(clean, "PAUSED")


def test_a_move_made_twice_is_noted_twice_in_log_order() -> None:
    state = start(plan(subtask("a")))
    for event in [
        ev.SubtaskScheduled(subtask_id="a", start_commit=BASE),
        ev.SubtaskScheduled(subtask_id="a", start_commit=BASE),
        ev.SubtaskSkipped(subtask_id="a", reason=Reason(code=ReasonCode.DEPENDENCY)),
    ]:
        state = apply(state, event, state.seq + 1)
    assert [(a.seq, a.move, a.source) for a in state.anomalies] == [
        (3, Move.SCHEDULED, "preparing"),
        (4, Move.SKIPPED, "preparing"),
    ]


def failed_before_a_stop() -> ExecutionState:
    """a failed, and a stop came, before the supervisor decided again: b, which depends on
    a, is both to be skipped and to be stopped."""
    state = start(plan(subtask("a"), subtask("b", "a"), max_parallel=2))
    return feed(
        state,
        [
            ev.SubtaskScheduled(subtask_id="a", start_commit=BASE),
            ev.SubtaskFailed(subtask_id="a", reason=Reason(code=ReasonCode.SETUP_FAILED)),
            ev.StopRequested(mode="graceful", source="kairo-orch stop"),
        ],
    )


def test_a_subtask_to_skip_and_to_stop_at_once_is_skipped_only() -> None:
    events = decide(failed_before_a_stop()).events
    assert [(type(e).__name__, getattr(e, "subtask_id", "")) for e in events] == [
        ("SubtaskSkipped", "b")
    ]


def test_a_subtask_skipped_for_its_program_is_not_also_scheduled() -> None:
    """x merged and a's agent found logged out, before the supervisor decided again: b
    (a's program, waiting on x) is skipped, not scheduled too."""
    state = start(plan(subtask("a"), subtask("x"), subtask("b", "x"), max_parallel=3))
    state = feed(
        state,
        [
            ev.SubtaskScheduled(subtask_id="a", start_commit=BASE),
            ev.SubtaskScheduled(subtask_id="x", start_commit=BASE),
            ev.WorkspaceCreated(subtask_id="a", path="/w/a", branch="b/a", commit=BASE),
            ev.AttemptStarted(
                subtask_id="a", attempt=1, idempotency_key="k", run_dir="/r", start_commit=BASE
            ),
            ev.AttemptExited(
                subtask_id="a", attempt=1, exit_code=1, result="authentication_failed"
            ),
        ],
    )
    # x's whole way to merged, folded without asking decide in between
    state = feed(
        state,
        [
            ev.WorkspaceCreated(subtask_id="x", path="/w/x", branch="b/x", commit=BASE),
            ev.AttemptStarted(
                subtask_id="x", attempt=1, idempotency_key="k", run_dir="/r", start_commit=BASE
            ),
            ev.AttemptExited(subtask_id="x", attempt=1, exit_code=0),
            ev.AttemptCommitted(subtask_id="x", attempt=1, head_commit="hx", changed=True),
            ev.AttemptJudged(subtask_id="x", attempt=1, accepted=True),
            ev.SubtaskMerged(
                subtask_id="x",
                merge_commit="mx",
                previous_commit=BASE,
                head_commit="hx",
                changed_paths=(),
                diffstat="",
            ),
        ],
    )
    moves = [e for e in decide(state).events if getattr(e, "subtask_id", "") == "b"]
    assert [type(e).__name__ for e in moves] == ["SubtaskSkipped"]
    assert feed(state, decide(state).events).subtask("b").state == "skipped"


def test_a_checkpoint_keeps_the_anomalies_and_the_reasons() -> None:
    state = an_old_log_with_an_illegal_move()
    failed = ev.SubtaskFailed(
        subtask_id="a", reason=Reason(code=ReasonCode.SETUP_FAILED, detail="the disk is full")
    )
    state = apply(state, failed, state.seq + 1)  # pending -> failed: another anomaly
    assert len(state.anomalies) == 2
    assert checkpoints.restore(checkpoints.snapshot(state, state.seq, "h")) == (
        state,
        state.seq,
        "h",
    )


def test_status_in_words_says_it_under_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    from orchestrator.cli import render

    state = an_old_log_with_an_illegal_move()
    render.status(status_document(state, status="PAUSED", version=1, head_seq=2, head_hash="h"))
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == f"the log holds a move it should not: {state.anomalies[0].sentence()}"
