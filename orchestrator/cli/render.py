"""Human output: rich tables on a terminal, plain aligned text elsewhere (rich decides).

Text that came from an agent, a repository or another host (reasons, paths, branch and
host names) goes through `as_markup`: made inert (core/inert_text.py), and with no `[` that
rich would read as its markup (`[link=...]` is a hyperlink)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from orchestrator.core.guard import NOTHING_RESTORED
from orchestrator.core.ids import short_id
from orchestrator.core.inert_text import inert
from orchestrator.core.overlaps import some_sentences
from orchestrator.core.views import ACTIVE

_STATE_STYLE = {
    "merged": "green",
    "succeeded": "green",
    "running": "cyan",
    "preparing": "cyan",
    "verifying": "cyan",
    "integrating": "blue",
    "conflicted": "yellow",
    "failed": "red",
    "skipped": "magenta",
    "stopped": "magenta",
    "pending": "dim",
    "COMPLETED": "green",
    "RUNNING": "cyan",
    "FAILED": "red",
    "PAUSED": "yellow",
    "STOPPED": "magenta",
    "TAMPERED": "bold red",
}


def console() -> Console:
    # Off a terminal (a pipe, a file) nothing is cut to 80 columns: ids and paths stay whole.
    probe = Console()
    # (A width no line reaches, not 240: a row with a long worktree path wrapped mid-path.)
    return Console(highlight=False, width=None if probe.is_terminal else 100_000)


def as_markup(text: str) -> str:
    """`text` as rich markup that shows it as it is, escaped where it would act."""
    return escape(inert(text))


def styled(word: str) -> str:
    style = _STATE_STYLE.get(word)
    return f"[{style}]{word}[/]" if style else word


#: Subtasks a status lists one a row, at most, unless asked for all: a plan of a thousand
#: shows those that need a look, and counts the rest.
STATUS_ROWS = 40
# Which rows come first when not all are shown: what runs, then what ended unmerged.
_FIRST = {
    "preparing": 0,
    "running": 0,
    "verifying": 0,
    "integrating": 0,
    "succeeded": 1,
    "pending": 3,
}


def shown_subtasks(
    subtasks: list[dict[str, Any]], *, every: bool = False
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """The subtasks to list, and how many of each state are left out."""
    if every or len(subtasks) <= STATUS_ROWS:
        return subtasks, Counter()
    unmerged = [item for item in subtasks if item["state"] != "merged"]
    unmerged.sort(key=lambda item: _FIRST.get(item["state"], 2))  # stable: plan order
    shown = unmerged[:STATUS_ROWS]
    listed = {item["id"] for item in shown}
    left = Counter(item["state"] for item in subtasks if item["id"] not in listed)
    return shown, left


def status_table(subtasks: list[dict[str, Any]], *, run_root: str | None = None) -> Table:
    """`run_root`: each ended subtask's row names its agent's output file under it (the
    live view, whose agent panes are closed a while after their attempts end)."""
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for column in ("subtask", "state", "attempts", "tokens (cost)", "reason / worktree"):
        table.add_column(column)
    for item in subtasks:
        detail = item["reason"] or ""
        others = sorted({other for conflict in item["conflicts"] for other in conflict["with"]})
        if others and item["state"] == "conflicted":  # not one resolved since
            detail += f" (with {', '.join(others)})"
        running = item.get("running") or {}
        if running.get("api_retries"):  # what the agent is going through now
            status = f" {running['api_status']}" if running.get("api_status") else ""
            detail = f"API{status}: {running['api_retries']} retries so far{detail}"
        if item["worktree"]:  # a running subtask's, or one kept to look at what went wrong
            detail = f"{detail}; worktree {item['worktree']}" if detail else item["worktree"]
        output = item.get("output")
        if run_root and output and item["state"] not in ACTIVE:
            output = f"output {output.removeprefix(run_root.rstrip('/') + '/')}"
            detail = f"{detail}; {output}" if detail else output
        table.add_row(
            item["id"],
            styled(item["state"]),
            str(item["attempts"]),
            _usage(item),
            as_markup(detail),
        )
    return table


def _usage(item: dict[str, Any]) -> str:
    """Tokens (with a running attempt's so far), and the cost where the agent says it."""
    tokens = item["tokens"] + ((item.get("running") or {}).get("tokens") or 0)
    spent = item.get("cost_usd") or 0
    cost = f" (${spent:.2f})" if spent >= 0.01 else f" (${spent:.4f})" if spent else ""
    return f"{tokens:,}{cost}" if tokens or cost else "0"


def status_header(document: dict[str, Any]) -> str:
    return (
        f"[bold]{document['plan']}[/] {document['execution_id']}  {styled(document['status'])}"
        f"{_status_note(document)}\n"
        f"integration branch {as_markup(document['integration_branch'])}  "
        f"base {document['base_commit'][:12]}  tmux session {document['tmux_session']}"
    )


def _status_note(document: dict[str, Any]) -> str:
    """What the status word alone does not say: a stop under way, or how to go on."""
    short = short_id(document["execution_id"])
    if document.get("stopping") == "graceful":
        return (
            "  [magenta]stopping[/]: running attempts finish, nothing new starts "
            f"(kairo-orch stop --now {short} stops them at once)"
        )
    if document.get("stopping") == "now":
        return "  [magenta]stopping now[/]: running agents are being killed"
    if document["status"] == "PAUSED":
        return f"  interrupted: kairo-orch resume {short} goes on"
    return ""


def status(document: dict[str, Any], *, every: bool = False) -> None:
    out = console()
    out.print(status_header(document))
    if "tampered" in document:  # before the rows, which are what the rewritten log says
        out.print(
            f"[bold red]not the log its supervisor wrote[/]: {as_markup(document['tampered'])}"
        )
    shown, left = shown_subtasks(document["subtasks"], every=every)
    if shown:
        _print_table(out, status_table(shown))
    if left:
        counts = ", ".join(f"{count:,} {styled(state)}" for state, count in left.most_common())
        out.print(f"not listed: {counts} (kairo-orch status --all lists every subtask)")
    for anomaly in document.get("anomalies", ()):  # an old log's, read as written
        out.print(f"[yellow]the log holds a move it should not[/]: {as_markup(anomaly)}")
    for said in some_sentences(document.get("overlaps", [])):
        out.print(f"[yellow]overlap[/]: {as_markup(said)}")
    for said in document.get("written_by_others", ()):
        out.print(f"[red]written by another process[/]: {as_markup(said)}")
    breaches = document.get("breaches", ())
    for item in breaches:
        out.print(f"[red]changed[/]: {as_markup(item['sentence'])}; {as_markup(item['restore'])}")
    if breaches:
        out.print(as_markup(NOTHING_RESTORED))


def _print_table(out: Console, table: Table) -> None:
    """On a terminal as rich draws it; elsewhere without the spaces that pad each line's
    last cell to its column's width, which a script reading the lines would have to strip."""
    if out.is_terminal:
        out.print(table)
        return
    with out.capture() as captured:
        out.print(table)
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def executions(items: list[dict[str, Any]]) -> None:
    out = console()
    if not items:
        out.print("no executions in this repository yet")
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for column in ("execution", "plan", "status", "merged", "created"):
        table.add_column(column)
    for item in items:
        paused = item["status"] == "PAUSED"
        marker = (
            f"  (interrupted: kairo-orch resume {short_id(item['execution_id'])})" if paused else ""
        )
        table.add_row(
            item["execution_id"],
            item["plan"],
            styled(item["status"]) + marker,
            f"{item['merged']}/{item['subtasks']}",
            item["created_at"],
        )
    _print_table(out, table)


def workers(items: list[dict[str, Any]]) -> None:
    out = console()
    if not items:
        out.print("no worker is registered in this store")
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for column in ("host", "address", "slots", "running", "last heartbeat", "lease"):
        table.add_column(column)
    for item in items:
        table.add_row(
            as_markup(item["host"]),
            as_markup(item["address"]),
            str(item["slots"]),
            str(item["running"]),
            f"{item['last_heartbeat']} ({item['heartbeat_age_s']:.1f} s ago)",
            "[green]alive[/]" if item["alive"] else "[red]lapsed[/]",
        )
    _print_table(out, table)


def event_line(seq: int, created_at: str, event_type: str, payload: dict[str, Any]) -> str:
    brief = {k: v for k, v in payload.items() if k != "plan"}
    return f"{seq:>5}  {created_at}  {event_type:<28} {json.dumps(brief, separators=(',', ':'))}"


def report(document: dict[str, Any]) -> None:
    """The report rendered, for a terminal (`report` prints the Markdown itself elsewhere)."""
    from rich.markdown import Markdown

    from orchestrator.core.report import to_markdown

    console().print(Markdown(to_markdown(document)))


def conflict_map(document: dict[str, Any]) -> None:
    """`kairo-orch conflicts`: the pairs that would conflict first, then those that merge
    clean."""
    out = console()
    branches, pairs = len(document["branches"]), document["pairs"]
    noun = "pair changes" if len(pairs) == 1 else "pairs change"
    some = "branch" if branches == 1 else "branches"
    out.print(f"{branches} {some} to merge; {len(pairs)} {noun} a path in common")
    for pair in sorted(pairs, key=lambda pair: not pair["conflicts"]):
        first, second = pair["subtasks"]
        if pair["conflicts"]:
            said = ", ".join(f"{c['path']} ({c['kind']})" for c in pair["conflicts"])
            out.print(f"  {first} and {second} [red]would conflict[/] on {as_markup(said)}")
        else:
            shared = ", ".join(pair["shared"])
            out.print(f"  {first} and {second} both change {as_markup(shared)}: merges clean")
