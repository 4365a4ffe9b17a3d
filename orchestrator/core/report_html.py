"""`report --html`: one self-contained page of an execution, to look at rather than read.

Pure: from the folded state, the logged events (with the times the store wrote them) and
status --json's document. No script, and a Content-Security-Policy that forbids loading
anything: its one stylesheet is inline and allowed by its hash. Everything that came from
an agent, a repository or a plan (ids, paths, reasons, output tails) is escaped and made
inert (`inert_text.html_text`: no control, bidi or invisible character survives).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from orchestrator.core.conflict_map import ConflictMap
from orchestrator.core.guard import NOTHING_RESTORED
from orchestrator.core.inert_text import html_text
from orchestrator.core.overlaps import overlap_documents
from orchestrator.core.report import build_report
from orchestrator.core.report_html_conflicts import (
    ConflictItem,
    OverlapItem,
    conflicts_of,
    map_of,
    overlaps_section,
    resolutions_section,
)
from orchestrator.core.report_html_sections import (
    events_section,
    failures_section,
    merges_section,
    usage_section,
)
from orchestrator.core.report_html_style import BASE, position_rules
from orchestrator.core.report_html_timeline import Positions, duration, timeline_section
from orchestrator.core.state import ExecutionState
from orchestrator.core.timeline import LoggedEvent, Timeline, build_timeline

COUNTED = ("merged", "conflicted", "failed", "skipped", "stopped")


def html_page(
    state: ExecutionState,
    logged: Sequence[LoggedEvent],
    document: Mapping[str, Any],
    *,
    now: float,
    conflict_map: ConflictMap | None = None,
    last_heartbeat: float | None = None,
) -> str:
    """`document`: status --json's; `now`: the snapshot's time (a running execution's
    timeline runs up to it); `conflict_map`: what the branches that may still merge would
    conflict on, where git could say; `last_heartbeat`: of a paused execution, when its
    supervisor last wrote its row (it beat on after its last event, until it died)."""
    status = str(document["status"])
    report = build_report(state, status)
    timeline = build_timeline(state.plan, logged, end=now if status == "RUNNING" else None)
    places = Positions()
    subtasks = {entry["id"]: entry for entry in document["subtasks"]}
    body = "".join(
        (
            _header(report, document, timeline, now, last_heartbeat),
            timeline_section(timeline, subtasks, places),
            usage_section(state.plan, document["subtasks"], places),
            merges_section(report["merged"]),
            overlaps_section(*_conflicts_and_overlaps(state, report, document, conflict_map)),
            resolutions_section(report.get("resolutions", ())),
            failures_section(report),
            events_section(logged, state.execution_id),
        )
    )
    style = BASE + position_rules(places.lefts, places.widths)
    digest = base64.b64encode(hashlib.sha256(style.encode("utf-8")).digest()).decode("ascii")
    policy = (
        f"default-src 'none'; style-src 'sha256-{digest}'; img-src 'none'; "
        "script-src 'none'; base-uri 'none'; form-action 'none'"
    )
    title = f"kairo-orch: {report['plan']} ({state.execution_id})"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{html_text(policy)}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{html_text(title)}</title><style>{style}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def _header(
    report: Mapping[str, Any],
    document: Mapping[str, Any],
    timeline: Timeline,
    now: float,
    last_heartbeat: float | None,
) -> str:
    status = str(document["status"])
    counts = {key: len(report[key]) for key in COUNTED}
    counts["pending"] = len(report["pending"])
    said = "".join(
        f'<span id="count-{key}" data-count="{count}">{key}: <strong>{count:,}</strong></span>'
        for key, count in counts.items()
    )
    head = report["integration_head"] or ""
    lines = [
        f"<header><h1>{html_text(report['plan'])}</h1>",
        f'<p>Execution <code id="execution-id">{html_text(report["execution_id"])}</code> '
        f'<span id="status" class="status st-{html_text(status)}"'
        f' data-status="{html_text(status)}">{html_text(status)}</span></p>',
        f"<p>Integration branch <code>{html_text(report['integration_branch'])}</code>"
        f" at <code>{html_text(head[:12])}</code>, from base"
        f" <code>{html_text(report['base_commit'][:12])}</code>. Started {_when(timeline.start)},"
        f" {duration(timeline.end - timeline.start)} shown.</p>",
        f'<p class="counts">{said}</p>',
    ]
    if status == "RUNNING":
        lines.append(
            f'<p class="note" id="snapshot">A snapshot at {_when(now)}, while it runs: '
            "<code>kairo-orch report --html</code> again shows what happened since.</p>"
        )
    elif status == "PAUSED":
        lines.append(
            f'<p class="note" id="snapshot">No supervisor since'
            f" {_when(max(timeline.end, last_heartbeat or timeline.end))}: "
            "<code>kairo-orch resume</code> goes on with it.</p>"
        )
    for gap in timeline.gaps:
        lines.append(
            f'<p class="note gap-note">No supervisor from {_when(gap.start)} to '
            f"{_when(gap.end)} ({duration(gap.end - gap.start)}): it was resumed"
            " (the hatched band on the timeline).</p>"
        )
    for said in (*report.get("anomalies", ()), *report.get("written_by_others", ())):
        lines.append(f'<p class="note">{html_text(said)}</p>')
    lines += _breaches(report.get("breaches", ()))
    lines.append("</header>")
    return "".join(lines)


def _breaches(breaches: Sequence[Mapping[str, Any]]) -> list[str]:
    """The guard's findings, each with its restoring command (core/guard.py)."""
    if not breaches:
        return []
    items = "".join(
        f"<li>{html_text(item['sentence'])}: <code>{html_text(item['restore'])}</code></li>"
        for item in breaches
    )
    return [
        '<section id="breaches" class="breaches"><h2>Changes to what you own</h2>',
        f'<ul>{items}</ul><p class="note">{html_text(NOTHING_RESTORED)}</p></section>',
    ]


def _when(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _conflicts_and_overlaps(
    state: ExecutionState,
    report: Mapping[str, Any],
    document: Mapping[str, Any],
    conflict_map: ConflictMap | None,
) -> tuple[list[ConflictItem], list[OverlapItem], dict[str, list[str]]]:
    """The conflicts of the subtasks that ended conflicted (the header's count; one an agent
    resolved is among the resolutions), the overlaps the log warned of, and the map of
    every conflict the log recorded with what the branches still to merge would conflict
    on."""
    conflicts = conflicts_of(report["conflicted"])
    overlaps = [
        OverlapItem(tuple(o["subtasks"]), tuple(o["paths"]), o["sentence"])
        for o in overlap_documents(state)
    ]
    mapped = map_of(conflicts_of(document["subtasks"]))
    for pair in conflict_map.conflicting if conflict_map is not None else ():
        for conflict in pair.conflicts:
            involved = mapped.setdefault(conflict.path, [])
            involved += [s for s in (pair.first, pair.second) if s not in involved]
    return conflicts, overlaps, mapped
