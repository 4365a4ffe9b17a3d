"""The HTML report's tables: tokens and cost against the budgets, the merges in their
order, what failed and why, the events. Every text from the log is escaped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.core import events as ev
from orchestrator.core.inert_text import html_text
from orchestrator.core.plan import ResolvedPlan
from orchestrator.core.report_html_timeline import Positions, duration
from orchestrator.core.timeline import LoggedEvent

SPENDERS_SHOWN = 50  # the largest spenders; the rest behind a click
MERGES_OPEN = 64  # a list of more merges starts closed
TAIL_CHARS = 4_000  # of an output's tail (already its last lines)
SENT_BACK_LISTED = 200
EVENTS_LISTED = 1_000  # the first half and the last half of a longer log
EVENTS_IN_A_GROUP = 250


def usage_section(
    plan: ResolvedPlan, subtasks: Sequence[Mapping[str, Any]], places: Positions
) -> str:
    """`subtasks`: status --json's entries (with a running attempt's usage so far)."""
    total_tokens = sum(entry["tokens"] for entry in subtasks)
    running = sum((entry.get("running") or {}).get("tokens") or 0 for entry in subtasks)
    total_cost = round(sum(entry["cost_usd"] for entry in subtasks), 6)
    budget = plan.execution_limits.token_budget
    parts = [
        '<section id="usage"><h2>Tokens and cost</h2>',
        f'<p id="usage-total" data-tokens="{total_tokens}" data-cost="{total_cost:g}">'
        f"<strong>{total_tokens:,}</strong> tokens, <strong>${total_cost:.4f}</strong>",
        f" (and {running:,} so far by running attempts)" if running else "",
        f"; execution budget {budget:,} {_meter(total_tokens + running, budget, places)}"
        if budget
        else "; no execution budget",
        "</p>",
    ]
    budgets = {spec.id: spec.limits.token_budget for spec in plan.subtasks}
    ordered = sorted(subtasks, key=lambda e: (-e["tokens"], -e["cost_usd"]))
    head = (
        '<table class="usage"><thead><tr><th>subtask</th><th class="n">attempts</th>'
        '<th class="n">tokens</th><th class="n">input</th><th class="n">output</th>'
        '<th class="n">cost</th><th>budget</th></tr></thead><tbody>'
    )
    rows = [_usage_row(entry, budgets.get(entry["id"]), places) for entry in ordered]
    parts += [head, *rows[:SPENDERS_SHOWN], "</tbody></table>"]
    if len(rows) > SPENDERS_SHOWN:
        parts += [
            f"<details><summary>{len(rows) - SPENDERS_SHOWN:,} more subtasks</summary>",
            head,
            *rows[SPENDERS_SHOWN:],
            "</tbody></table></details>",
        ]
    parts.append("</section>")
    return "".join(parts)


def _usage_row(entry: Mapping[str, Any], budget: int | None, places: Positions) -> str:
    now = entry.get("running") or {}
    live = f' <span class="muted">+{now["tokens"]:,} running</span>' if now.get("tokens") else ""
    meter = f"{budget:,} {_meter(entry['tokens'], budget, places)}" if budget else ""
    return (
        f'<tr data-subtask="{html_text(entry["id"])}" data-tokens="{entry["tokens"]}"'
        f' data-cost="{entry["cost_usd"]:g}"><td class="mono">{html_text(entry["id"])}</td>'
        f'<td class="n">{entry["attempts"]}</td><td class="n">{entry["tokens"]:,}{live}</td>'
        f'<td class="n">{entry["input_tokens"]:,}</td>'
        f'<td class="n">{entry["output_tokens"]:,}</td>'
        f'<td class="n">${entry["cost_usd"]:.4f}</td><td>{meter}</td></tr>'
    )


def _meter(used: int, budget: int | None, places: Positions) -> str:
    if not budget:
        return ""
    over = " over" if used > budget else ""
    share = places.share(min(1.0, used / budget))
    return f'{used / budget:.0%} <span class="meter{over}"><i class="{share}"></i></span>'


def merges_section(merged: Sequence[Mapping[str, Any]]) -> str:
    """report --json's `merged`, in the order they merged."""
    if not merged:
        nothing = '<p class="muted">Nothing merged.</p>'
        return f'<section id="merges"><h2>Merge order</h2>{nothing}</section>'
    rows = "".join(
        f'<tr data-subtask="{html_text(item["id"])}"><td class="n">{number}</td>'
        f'<td class="mono">{html_text(item["id"])}</td><td>{html_text(_title(item))}</td>'
        f"<td>{html_text(item['diffstat'] or 'no file changes')}</td>"
        f'<td class="n">+{item["insertions"]} &minus;{item["deletions"]}</td>'
        f'<td class="mono">{html_text(item["merge_commit"][:12])}</td></tr>'
        for number, item in enumerate(merged, start=1)
    )
    table = (
        '<table class="merges"><thead><tr><th class="n">#</th><th>subtask</th><th>title</th>'
        '<th>diffstat</th><th class="n">lines</th><th>merge commit</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )
    opened = " open" if len(merged) <= MERGES_OPEN else ""
    return (
        f'<section id="merges"><h2>Merge order</h2><details{opened}><summary>'
        f"{len(merged):,} merge(s), one merge commit each</summary>{table}</details></section>"
    )


def _title(item: Mapping[str, Any]) -> str:
    return item["title"] if item["title"] != item["id"] else ""


def failures_section(report: Mapping[str, Any]) -> str:
    """What did not merge and why, with its output's tail; then the attempts sent back."""
    parts = ['<section id="failures"><h2>Failures and retries</h2>']
    unmerged = [(key, item) for key in ("failed", "stopped", "skipped") for item in report[key]]
    if not unmerged:
        parts.append('<p class="muted">No subtask failed, was stopped or skipped.</p>')
    for key, item in unmerged:
        sid = html_text(item["id"])
        where = (
            f" Worktree kept at <code>{html_text(item['worktree'])}</code>."
            if item["worktree"]
            else ""
        )
        output = f" Output: <code>{html_text(item['output'])}</code>." if item["output"] else ""
        tail = item["output_tail"][-TAIL_CHARS:]
        parts.append(
            f'<div class="failure" data-subtask="{sid}" data-state="{key}">'
            f'<h3 class="mono">{sid} <span class="muted">({key})</span></h3>'
            f'<p class="reason">{html_text(item["reason"] or "")}</p>'
            f'<p class="muted">{where}{output}</p>'
            + (f"<pre>{html_text(tail, lines=True)}</pre>" if tail else "")
            + "</div>"
        )
    sent_back = [
        (sid, attempt)
        for sid, attempts in report["attempts"].items()
        for attempt in attempts
        if attempt["accepted"] is False
    ]
    if sent_back:
        parts.append(
            '<h3>Attempts not accepted</h3><table class="retries"><thead><tr><th>subtask</th>'
            '<th class="n">attempt</th><th>why</th></tr></thead><tbody>'
        )
        parts += [
            f'<tr data-subtask="{html_text(sid)}"><td class="mono">{html_text(sid)}</td>'
            f'<td class="n">{attempt["attempt"]}</td>'
            f"<td>{html_text(attempt['reason'] or 'not accepted')}</td></tr>"
            for sid, attempt in sent_back[:SENT_BACK_LISTED]
        ]
        parts.append("</tbody></table>")
        if len(sent_back) > SENT_BACK_LISTED:
            more = len(sent_back) - SENT_BACK_LISTED
            parts.append(f'<p class="muted">and {more:,} more: `kairo-orch report --json`</p>')
    parts.append("</section>")
    return "".join(parts)


def events_section(logged: Sequence[LoggedEvent], execution_id: str) -> str:
    """Every event (a long log: its first and last), collapsed, in groups."""
    start = logged[0].at if logged else 0.0
    shown = list(logged)
    left_out = len(shown) - EVENTS_LISTED
    if left_out > 0:
        half = EVENTS_LISTED // 2
        shown = [*shown[:half], *shown[-half:]]
    groups = [shown[i : i + EVENTS_IN_A_GROUP] for i in range(0, len(shown), EVENTS_IN_A_GROUP)]
    parts = [
        f'<section id="events"><h2>Events</h2><details><summary>{len(logged):,} events</summary>'
    ]
    if left_out > 0:
        parts.append(
            f'<p class="note">The {left_out:,} events in the middle are not listed here: '
            f"<code>kairo-orch events {html_text(execution_id)}</code> lists them all.</p>"
        )
    for group in groups:
        first, last = group[0].seq, group[-1].seq
        rows = "".join(_event_row(item, start) for item in group)
        parts.append(
            f"<details><summary>seq {first} to {last}</summary>"
            f'<table class="ev"><tbody>{rows}</tbody></table></details>'
        )
    parts.append("</details></section>")
    return "".join(parts)


def _event_row(item: LoggedEvent, start: float) -> str:
    event = item.event
    subtask = getattr(event, "subtask_id", None) or ""
    attempt = getattr(event, "attempt", None)
    who = f"{subtask} #{attempt}" if attempt is not None and subtask else subtask
    return (
        f'<tr><td class="n">{item.seq}</td><td class="n">+{duration(item.at - start)}</td>'
        f'<td>{event.type}</td><td class="mono">{html_text(who)}</td>'
        f"<td>{html_text(_event_words(event))}</td></tr>"
    )


def _event_words(event: ev.ExecutionEvent) -> str:
    match event:
        case ev.SupervisorStarted(pid=pid, host=host, resumed=resumed):
            return f"pid {pid} on {host}" + (", resumed" if resumed else "")
        case ev.AttemptExited(exit_code=code, tokens=tokens):
            return f"exit {code}, {tokens:,} tokens"
        case ev.VerifyFinished(exit_code=code) | ev.IntegrationVerified(exit_code=code):
            return f"exit {code}"
        case ev.AttemptJudged(accepted=accepted, reason=reason):
            return "accepted" if accepted else f"not accepted: {reason.code if reason else ''}"
        case ev.SubtaskMerged(diffstat=diffstat):
            return diffstat
        case ev.MergesUndone(subtask_ids=undone, culprit=culprit):
            return f"undone: {', '.join(undone)}" + (f"; culprit {culprit}" if culprit else "")
        case ev.SubtaskConflicted(conflicts=conflicts):
            return ", ".join(c.path for c in conflicts)
        case ev.SubtaskFailed(reason=r) | ev.SubtaskSkipped(reason=r) | ev.SubtaskStopped(reason=r):
            return str(r.code)
        case ev.ConstraintViolated(constraint=constraint, action=action):
            return f"{constraint}: {action}"
        case ev.ExecutionEnded(status=status):
            return status
        case ev.StopRequested(mode=mode, source=source):
            return f"{mode}, by {source}"
    return ""
