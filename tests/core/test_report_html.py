"""The HTML report, pure: its timeline, its escaping and policy, a plan of a thousand."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from orchestrator.core import events as ev
from orchestrator.core.report_html import html_page
from orchestrator.core.report_html_conflicts import (
    ConflictItem,
    OverlapItem,
    overlaps_section,
    resolutions_section,
)
from orchestrator.core.report_html_timeline import ROWS_IN_A_GROUP
from orchestrator.core.state import ExecutionState, fold
from orchestrator.core.status import status_document
from orchestrator.core.timeline import Gap, LoggedEvent, Timeline, build_timeline
from tests.golden import logs
from tests.world.big_log import T0, big_execution

EVIL = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def page(
    state: ExecutionState, logged: Sequence[LoggedEvent], *, status: str, now: float = T0 + 1e4
) -> str:
    document = status_document(state, status=status, version=1, head_seq=state.seq, head_hash="h")
    return html_page(state, logged, document, now=now)


def test_a_thousand_subtasks_make_a_page_under_2_mb_in_groups() -> None:
    state, logged = big_execution(1024)
    html = page(state, logged, status=state.status)
    assert len(html.encode()) < 2_000_000
    assert html.count('class="row"') == 1024
    groups = re.findall(r"<summary>subtasks ([\d,]+) to ([\d,]+) of 1,024", html)
    assert len(groups) == 1024 // ROWS_IN_A_GROUP and groups[0] == ("1", "64")
    assert html.count('<details class="group" open>') == 1  # the first group open
    assert "events in the middle are not listed here" in html  # the log is capped


def test_the_policy_forbids_loading_anything_and_allows_only_its_own_stylesheet() -> None:
    state, logged = big_execution(3, max_parallel=2)
    html = page(state, logged, status=state.status)
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert policy is not None
    assert "default-src &#x27;none&#x27;" in policy.group(1)
    assert "unsafe" not in html and "<script" not in html and " style=" not in html
    style = re.search(r"<style>(.*)</style>", html, re.S)
    assert style is not None
    digest = base64.b64encode(hashlib.sha256(style.group(1).encode()).digest()).decode()
    assert f"sha256-{digest}" in policy.group(1)


def test_what_agents_printed_is_escaped() -> None:
    state, logged = big_execution(6, max_parallel=2)  # s0005 fails its verify twice

    def evil(item: LoggedEvent) -> LoggedEvent:
        event = item.event
        if isinstance(event, ev.VerifyFinished | ev.AttemptExited):
            return replace(item, event=event.model_copy(update={"output_tail": EVIL}))
        if isinstance(event, ev.AttemptJudged) and event.reason is not None:
            reason = event.reason.model_copy(update={"detail": EVIL})
            return replace(item, event=event.model_copy(update={"reason": reason}))
        return item

    logged = [evil(item) for item in logged]
    state = fold(state.execution_id, (item.event for item in logged))
    html = page(state, logged, status="FAILED")
    assert state.subtask("s0005").state == "failed"
    assert EVIL not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_conflicts_and_overlaps_render_from_plain_data() -> None:
    html = overlaps_section(
        [ConflictItem("b", "f<1>.txt", "content", ("a",))],
        [OverlapItem(("a", "c"), ("g.txt",), "both rename g")],
    )
    assert "f&lt;1&gt;.txt" in html and "both rename g" in html
    assert (
        '<tr data-path="f&lt;1&gt;.txt"><td><code>f&lt;1&gt;.txt</code></td><td class="mono">b, a</td>'
        in html
    )
    assert "No conflict" in overlaps_section([])


def test_a_running_execution_is_a_snapshot_its_open_attempts_running() -> None:
    state, logged = big_execution(4, max_parallel=2)
    cut = next(i for i, item in enumerate(logged) if isinstance(item.event, ev.AttemptExited))
    running = logged[:cut]
    state = fold(state.execution_id, (item.event for item in running))
    html = page(state, running, status="RUNNING", now=running[-1].at + 60)
    assert 'id="snapshot"' in html
    assert "k-agent o-running" in html


def test_a_gap_is_drawn_at_a_fixed_share_whatever_its_length() -> None:
    timeline = Timeline(0.0, 10_100.0, (), (Gap(50.0, 10_050.0),))
    assert timeline.position(50.0) == timeline.position(0.0) + 50 / (100 + 5)
    assert abs(timeline.position(10_050.0) - 55 / 105) < 1e-9
    assert timeline.position(10_100.0) == 1.0


def test_each_attempt_is_a_bar_coloured_by_its_outcome_and_dependencies_wait() -> None:
    state, logged = big_execution(128, max_parallel=8)
    timeline = build_timeline(state.plan, logged)
    rows = {row.subtask_id: row for row in timeline.rows}
    retried = [s.outcome for s in rows["s0007"].spans if s.kind == "agent"]
    assert retried == ["sent_back", "accepted"]
    assert [s.outcome for s in rows["s0005"].spans if s.kind == "agent"] == ["sent_back", "failed"]
    waiting = [s for s in rows["s0063"].spans if s.kind == "waiting"]
    merged = next(m.at for m in rows["s0062"].marks if m.kind == "merged")
    assert len(waiting) == 1 and waiting[0].end == merged
    assert [m.kind for m in rows["s0003"].marks] == ["conflicted"]
    assert timeline.gaps == ()


def test_an_agents_resolution_of_a_conflict_is_drawn_as_its_attempt() -> None:
    state, logged = big_execution(8, max_parallel=4)
    (conflicted,) = [e.event for e in logged if isinstance(e.event, ev.SubtaskConflicted)]
    sid, at, seq = conflicted.subtask_id, logged[-1].at, logged[-1].seq
    conflict = conflicted.conflicts[0]
    resolution: list[ev.ExecutionEvent] = [
        ev.ResolutionStarted(
            subtask_id=sid,
            attempt=2,
            idempotency_key="k",
            run_dir="/r",
            start_commit=conflicted.head_commit,
            merged_in="f" * 40,
            conflicts=(conflict,),
        ),
        ev.AttemptExited(subtask_id=sid, attempt=2, exit_code=0),
        ev.AttemptJudged(subtask_id=sid, attempt=2, accepted=True),
    ]
    logged = [
        *logged,
        *(LoggedEvent(seq + i, at + 10 * i, e) for i, e in enumerate(resolution, 1)),
    ]
    row = next(r for r in build_timeline(state.plan, logged).rows if r.subtask_id == sid)
    agents = [(s.attempt, s.outcome) for s in row.spans if s.kind == "agent"]
    assert agents == [(1, "accepted"), (2, "accepted")]


def when(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _killed_and_resumed(heartbeat: float | None) -> tuple[ExecutionState, list[LoggedEvent]]:
    """big_execution's log cut after its first attempt's exit, a supervisor killed there
    and resumed 100 s later, whose start says `heartbeat` of the one before."""
    state, logged = big_execution(4, max_parallel=2)
    cut = next(i for i, item in enumerate(logged) if isinstance(item.event, ev.AttemptExited))
    last = logged[cut - 1]
    started = ev.SupervisorStarted(
        pid=2, host="h", resumed=True, at=last.at + 100, previous_heartbeat_at=heartbeat
    )
    resumed = [
        *logged[:cut],
        LoggedEvent(last.seq + 1, last.at + 100, started),
        *(replace(item, seq=item.seq + 1, at=item.at + 100) for item in logged[cut:]),
    ]
    return fold(state.execution_id, (item.event for item in resumed)), resumed


def test_the_band_without_a_supervisor_starts_at_its_last_heartbeat() -> None:
    state, logged = _killed_and_resumed(None)
    resumed_at = next(
        i.at for i in logged if isinstance(i.event, ev.SupervisorStarted) and i.event.resumed
    )
    last_event = resumed_at - 100
    # A log that does not say (before schema version 7): from its last event, as before.
    assert build_timeline(state.plan, logged).gaps == (Gap(last_event, resumed_at),)
    assert "(100s): it was resumed" in page(state, logged, status=state.status)

    heartbeat = last_event + 30  # it beat on after its last event, then was killed
    state, logged = _killed_and_resumed(heartbeat)
    assert build_timeline(state.plan, logged).gaps == (Gap(heartbeat, resumed_at),)
    html = page(state, logged, status=state.status)
    assert f"No supervisor from {when(heartbeat)} to {when(resumed_at)} (70s)" in html


def test_a_paused_execution_has_had_no_supervisor_since_its_last_heartbeat() -> None:
    state, logged = big_execution(4, max_parallel=2)
    cut = next(i for i, item in enumerate(logged) if isinstance(item.event, ev.AttemptExited))
    paused = logged[:cut]
    state = fold(state.execution_id, (item.event for item in paused))
    heartbeat = paused[-1].at + 4.0
    html = page(state, paused, status="PAUSED")
    assert f"No supervisor since {when(paused[-1].at)}" in html
    html = html_page(
        state,
        paused,
        status_document(state, status="PAUSED", version=1, head_seq=state.seq, head_hash="h"),
        now=heartbeat + 60,
        last_heartbeat=heartbeat,
    )
    assert f"No supervisor since {when(heartbeat)}" in html


def golden(name: str) -> tuple[ExecutionState, list[LoggedEvent]]:
    """A golden log's events, as the store gives them, and their fold."""
    text = (logs.HERE / name / "log.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines()]
    logged = [
        LoggedEvent(
            row["seq"],
            T0 + row["seq"],
            ev.from_record(
                row["event_type"], json.loads(row["payload_json"]), row["schema_version"]
            ),
        )
        for row in rows
    ]
    return fold(rows[0]["execution_id"], (item.event for item in logged)), logged


def section(html: str, name: str) -> str:
    start = html.index(f'<section id="{name}">')
    return html[start : html.index("</section>", start)]


def test_a_resolved_conflict_has_a_section_of_its_own_and_is_not_shown_as_conflicted() -> None:
    # c conflicted with a, and its agent's resolution merged (the Markdown's "Conflict
    # resolutions"); no subtask ended conflicted.
    state, logged = golden("merge_queue")
    html = page(state, logged, status="FAILED")
    resolutions = section(html, "resolutions")
    assert (
        '<h2>Conflict resolutions</h2><div class="resolution" data-subtask="c" data-attempt="2"'
        in (resolutions)
    )
    assert 'data-outcome="accepted"' in resolutions
    assert '<td><code>shared.txt</code></td><td>add/add</td><td class="mono">a</td>' in (
        resolutions
    )
    assert "+from c" in resolutions and "resolution commit <code>010735d67851</code>" in resolutions
    conflicts = section(html, "conflicts")
    assert 'id="count-conflicted" data-count="0"' in html
    assert '<table class="conflicts">' not in conflicts  # resolved: not a row of Conflicts
    assert '<tr data-path="shared.txt"><td><code>shared.txt</code></td><td class="mono">c, a' in (
        conflicts
    )  # the map still has it
    assert '<td>merges_undone</td><td class="mono"></td><td>undone: bad; culprit bad</td>' in (
        section(html, "events")
    )


def test_the_conflicts_table_has_the_subtasks_the_header_counts_conflicted() -> None:
    state, logged = golden("conflicts_and_retries")
    html = page(state, logged, status="FAILED")
    counted = int(re.findall(r'id="count-conflicted" data-count="(\d+)"', html)[0])
    table = section(html, "conflicts")
    rows = set(re.findall(r'<tr data-subtask="([^"]+)"', table[table.index('conflicts">') :]))
    assert (
        counted == len(rows) == len([v for v in state.subtasks.values() if v.state == "conflicted"])
    )
    assert counted > 0
    assert 'id="resolutions"' not in html  # no agent resolved anything


def test_a_resolution_shows_the_dropped_lines_and_the_agents_word_inert() -> None:
    html = resolutions_section(
        [
            {
                "subtask": "fee",
                "attempt": 2,
                "merged_in": "b" * 40,
                "conflicts": [{"path": "b.py", "kind": "content", "with": ["discount"]}],
                "outcome": "refused",
                "reason": "resolution_dropped_changes: theirs b.py:3-5",
                "commit": "c" * 40,
                "dropped": [{"hunk": "theirs b.py:3-5", "lines": ["def discount_b(n):"]}],
                "unexplained": ["theirs b.py:3-5"],
                "explanation": EVIL,
                "diff": "-def discount_b(n):\n",
            }
        ]
    )
    assert 'data-subtask="fee" data-attempt="2" data-outcome="refused"' in html
    assert (
        '<li data-hunk="theirs b.py:3-5">dropped <code>theirs b.py:3-5</code> (not explained)'
        in html
    )
    assert "<br><code>def discount_b(n):</code>" in html
    assert "<script" not in html and "&lt;script&gt;" in html
    assert resolutions_section([]) == ""
