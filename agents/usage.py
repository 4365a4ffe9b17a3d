"""The usage lines the stream filters append to KAIRO_USAGE_FILE, read back.

One line per attempt of kinds `claude-code` and `codex` (none for `aider`, which reports
nothing reliable), written by agents/stream_filter.py when the agent has exited:

    {"input_tokens": int, "output_tokens": int,   counted against token budgets (plan.md)
     "cache_read_input_tokens": int,              recorded, not counted (see claude_stream)
     "cache_creation_input_tokens": int,          claude-code: part of input_tokens
     "cost_usd": float | null,                    claude-code only
     "session_id": str | null,                    the session to resume; null: none started
     "result": str,                               claude-code: the result's subtype
                                                  ("success", "error_max_turns",
                                                  "error_during_execution", ...); codex:
                                                  "success" | "turn_failed"; both:
                                                  "authentication_failed" when it could not
                                                  log in, "truncated" when the stream ended
                                                  with no result (cut short, or the program
                                                  failed)
     "is_error": bool,                            the run did not end well
     "exit_code": int,                            the wrapped program's status
     "num_turns": int | null,                     claude-code
     "estimated": true,                           claude-code, truncated: from its messages
     "session_totals": {..} | null}               codex: the thread's cumulative usage

`resume_point` is what the supervisor needs to continue a session on the next attempt.

While an attempt runs, its stream filter keeps what it has used so far in a live file beside
the usage file (agents/live_usage.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from agents.base import AttemptContext

USAGE_FILE = "usage.jsonl"  # in the attempt's run directory: KAIRO_USAGE_FILE


@dataclass(frozen=True)
class ResumePoint:
    session_id: str
    totals: Mapping[str, int] | None = None  # codex: what the session had used so far


def usage_records(path: str | Path) -> list[dict[str, object]]:
    """Every well-formed JSON object line of a usage file (none when it does not exist)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # half-written or not ours
        if isinstance(record, dict):
            records.append(record)
    return records


def resume_point(usage_files: Sequence[str | Path]) -> ResumePoint | None:
    """The session the next attempt should continue, from earlier attempts' usage files
    (oldest first): the last record of the newest file that has one. None (start cold)
    when that record names no session: the run started none, or its resume failed.

    A file without a record belongs to an attempt killed outright (or to an agent that
    records nothing); the attempt before it is looked at instead.
    """
    for path in reversed(usage_files):
        records = usage_records(path)
        if not records:
            continue
        last = records[-1]
        session = last.get("session_id")
        if not isinstance(session, str) or not session:
            return None
        totals = last.get("session_totals")
        if isinstance(totals, dict):
            ints = {k: v for k, v in totals.items() if isinstance(v, int) and v >= 0}
            return ResumePoint(session, ints)
        return ResumePoint(session)
    return None


def resumed(context: AttemptContext, point: ResumePoint | None) -> AttemptContext:
    """`context` continuing `point`'s session (unchanged when there is none)."""
    if point is None:
        return context
    return replace(context, resume_session=point.session_id, resume_totals=point.totals)
