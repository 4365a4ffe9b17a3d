"""The HTML report's timeline: a row per subtask, a bar per step, in groups when many.

Every text that came from the log (ids, notes, reasons) is escaped and made inert
(`inert_text.html_text`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.inert_text import html_text
from orchestrator.core.timeline import Span, Timeline, TimelineRow

#: Rows in one group: a plan of a thousand is read a group at a time (the first one open).
ROWS_IN_A_GROUP = 64
LEGEND = (
    ("k-waiting", "waiting for dependencies"),
    ("k-queued", "waiting for a place"),
    ("k-preparing", "worktree"),
    ("o-accepted", "attempt accepted"),
    ("o-sent_back", "sent back"),
    ("o-failed", "failed"),
    ("o-interrupted", "interrupted"),
    ("o-running", "running"),
    ("k-merge_queue", "waiting to merge"),
    ("k-integration", "integrating: merged, its integration check"),
    ("m-merged", "merged"),
    ("m-conflicted", "conflicted"),
    ("gap", "no supervisor"),
)


@dataclass
class Positions:
    """The positions (tenths of a percent) the page uses, for the rules of its stylesheet."""

    lefts: set[int] = field(default_factory=set)
    widths: set[int] = field(default_factory=set)

    def place(self, start: float, end: float, *, least: int = 1) -> str:
        left = _tenths(start)
        width = max(least, min(1000 - left, _tenths(end) - left))
        self.lefts.add(left)
        self.widths.add(width)
        return f"l{left} w{width}"

    def at(self, moment: float) -> str:
        left = _tenths(moment)
        self.lefts.add(left)
        return f"l{left}"

    def share(self, fraction: float) -> str:
        width = _tenths(fraction)
        self.widths.add(width)
        return f"w{width}"


def _tenths(fraction: float) -> int:
    return round(min(max(fraction, 0.0), 1.0) * 1000)


def duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 120:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 120:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def timeline_section(
    timeline: Timeline, subtasks: Mapping[str, Mapping[str, Any]], places: Positions
) -> str:
    """`subtasks`: status --json's entries by id (their state, attempts, tokens)."""
    legend = "".join(f'<i class="{cls}"></i>{html_text(text)}' for cls, text in LEGEND)
    axis = _axis(timeline, places)
    gaps = "".join(
        f'<i class="gap {places.place(timeline.position(g.start), timeline.position(g.end))}"'
        f' title="no supervisor for {html_text(duration(g.end - g.start))}"></i>'
        for g in timeline.gaps
    )
    rows = timeline.rows
    groups = [rows[i : i + ROWS_IN_A_GROUP] for i in range(0, len(rows), ROWS_IN_A_GROUP)]
    parts = [
        '<section id="timeline"><h2>Timeline</h2>',
        f'<p class="legend muted">{legend}</p>',
    ]
    for number, group in enumerate(groups):
        body = "".join(
            _row(timeline, row, subtasks.get(row.subtask_id, {}), places) for row in group
        )
        block = f'<div class="tl">{axis}<div class="lane">{gaps}</div>{body}</div>'
        if len(groups) == 1:
            parts.append(block)
            continue
        first, last = number * ROWS_IN_A_GROUP + 1, number * ROWS_IN_A_GROUP + len(group)
        opened = " open" if number == 0 else ""
        summary = f"subtasks {first:,} to {last:,} of {len(rows):,}{_troubles(group, subtasks)}"
        opening = f'<details class="group"{opened}><summary>{html_text(summary)}</summary>'
        parts.append(f"{opening}{block}</details>")
    parts.append("</section>")
    return "".join(parts)


def _troubles(group: Sequence[TimelineRow], subtasks: Mapping[str, Mapping[str, Any]]) -> str:
    """What a closed group hides that a reader looks for: its subtasks that did not merge."""
    states = [subtasks.get(row.subtask_id, {}).get("state") for row in group]
    wrong = sum(state in ("failed", "conflicted", "skipped", "stopped") for state in states)
    return f" ({wrong} did not merge)" if wrong else ""


def _axis(timeline: Timeline, places: Positions) -> str:
    ticks = []
    for fraction in (0.0, 0.25, 0.5, 0.75, 1.0):
        moment = timeline.start + fraction * (timeline.end - timeline.start)
        if timeline.gaps:  # a tick's label is the time drawn there, gaps compressed
            moment = _moment_at(timeline, fraction)
        label = "+" + duration(max(0.0, moment - timeline.start))
        ticks.append(f'<span class="{places.at(fraction)}">{html_text(label)}</span>')
    return f'<div class="axis">{"".join(ticks)}</div>'


def _moment_at(timeline: Timeline, fraction: float) -> float:
    """The time drawn at `fraction` of the axis (by bisection: position is monotonic)."""
    low, high = timeline.start, timeline.end
    for _ in range(40):
        middle = (low + high) / 2
        if timeline.position(middle) < fraction:
            low = middle
        else:
            high = middle
    return high


def _row(
    timeline: Timeline, row: TimelineRow, subtask: Mapping[str, Any], places: Positions
) -> str:
    sid = html_text(row.subtask_id)
    bars = "".join(_span(timeline, span, places) for span in row.spans if _seen(timeline, span))
    marks = "".join(
        f'<b class="m-{mark.kind} {places.at(timeline.position(mark.at))}"'
        f' title="{html_text(mark.kind)}: {html_text(mark.note)}"></b>'
        for mark in row.marks
    )
    return (
        f'<div class="row" id="row-{sid}" data-subtask="{sid}"'
        f' data-state="{html_text(str(subtask.get("state", "")))}"'
        f' data-attempts="{sum(span.kind == "agent" for span in row.spans)}">'
        f'<span class="name" title="{sid}: {html_text(str(subtask.get("state", "")))}">{sid}</span>'
        f'<span class="track">{bars}{marks}</span></div>'
    )


def _seen(timeline: Timeline, span: Span) -> bool:
    """An attempt always shows; a step too short to see at this scale (a commit of 0.2 s in
    an hour) is left out, which keeps a page of a thousand subtasks small."""
    drawn = timeline.position(span.end) - timeline.position(span.start)
    return span.kind == "agent" or drawn >= 0.0005


def _span(timeline: Timeline, span: Span, places: Positions) -> str:
    where = places.place(timeline.position(span.start), timeline.position(span.end))
    outcome = f" o-{span.outcome}" if span.outcome else ""
    attempt = f' data-attempt="{span.attempt}"' if span.attempt is not None else ""
    note = f"{span.note} ({duration(span.end - span.start)})"
    return f'<i class="k-{span.kind}{outcome} {where}"{attempt} title="{html_text(note)}"></i>'
