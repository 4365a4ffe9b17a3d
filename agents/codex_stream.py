"""The stream filter of kind `codex`: `codex exec --json ...` shown readably in the pane,
and its usage recorded (agents/stream_filter.py).

    python -I -S agents/codex_stream.py [--baseline JSON] -- codex exec --json ...

The events, as Codex CLI 0.171 prints them (its `ThreadEvent`s, pinned by
tests/agents/standins/codex):

    {"type":"thread.started","thread_id":..}          the id `codex exec resume` takes
    {"type":"turn.started"}
    {"type":"item.started"|"item.updated"|"item.completed","item":{"id":..,"type":
        "agent_message"|"reasoning"|"command_execution"|"file_change"|"mcp_tool_call"|
        "web_search"|"todo_list"|"error",...}}
    {"type":"error","message":"Reconnecting... 2/5 (...)"}   not fatal by itself
    {"type":"turn.completed","usage":{"input_tokens":..,"cached_input_tokens":..,
        "cache_write_input_tokens":..,"output_tokens":..,"reasoning_output_tokens":..}}
    {"type":"turn.failed","error":{"message":..}}

Codex's `usage` is summed over the whole thread, earlier `exec` runs included when this one
resumed it (measured: 1600, then 3300, then 5100 over three runs of one thread). So the
record keeps those totals as `session_totals`, and `--baseline` (the `session_totals` of the
run this one resumes) is subtracted to count this run alone. Counted: `input_tokens` =
input not served from the cache, `output_tokens` (reasoning included: OpenAI counts it in
the output); the cached input is recorded as `cache_read_input_tokens`. Codex reports no
cost, and no usage before the turn completes: a run cut short counts 0, and no allowance
can stop it mid-turn (its timeout does). Its `error` events that say "Reconnecting..." are
counted as API retries.
"""

# ruff: noqa: PTH100, PTH120  (os.path: pathlib would only cost startup time here)

from __future__ import annotations

import json
import os
import re  # json imports it anyway
import sys

if __package__ in (None, ""):  # run by path, as stream_filter.filter_argv does
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agents.live_usage import Tally, count
from agents.stream_filter import (
    AUTHENTICATION_FAILED,
    RULE,
    SUMMARY_CHARS,
    main,
    one_line,
    tally_options,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LABEL = "codex"
# A turn that failed because codex is not signed in: a 401, or a refresh token refused.
_UNAUTHORIZED = re.compile(r"\b401\b|refresh token|sign in again|log ?in again", re.IGNORECASE)
_STATUS = re.compile(r"\b([45]\d\d)\b")
TOTAL_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens")


class CodexStream:
    def __init__(self, baseline: dict[str, int] | None = None, tally: Tally | None = None) -> None:
        self.baseline = baseline or {}
        self.tally = tally or Tally()
        self.thread_id: str | None = None
        self.totals: dict[str, int] | None = None  # the last turn.completed usage
        self.failure: str | None = None  # turn.failed
        self.last_error: str | None = None  # the last `error` event, for a cut-short run
        self.last_message = ""

    def wants_stop(self) -> bool:
        return self.tally.spent

    def event(self, event: dict[str, Any]) -> str | None:
        kind = event.get("type")
        if kind == "thread.started":
            self.thread_id = _text(event.get("thread_id")) or None
            return f"{RULE} codex thread {self.thread_id}"
        if kind in ("item.started", "item.completed") and isinstance(event.get("item"), dict):
            item = event["item"]
            if kind == "item.completed" and item.get("type") == "agent_message":
                self.last_message = _text(item.get("text")).strip() or self.last_message
            return _item(item, started=kind == "item.started")
        if kind == "turn.completed":
            usage = event.get("usage")
            usage = usage if isinstance(usage, dict) else {}
            self.totals = {key: count(usage.get(key)) for key in TOTAL_KEYS}
            self.tally.count(sum(self._used().values()) - self._used()["cached_input_tokens"])
            return None
        if kind == "turn.failed":
            error = event.get("error")
            message = _text(error.get("message")) if isinstance(error, dict) else ""
            self.failure = message or "the turn failed"
            return None  # the closing line says it
        if kind == "error":
            self.last_error = _text(event.get("message")) or "error"
            if self.last_error.startswith("Reconnecting"):
                status = _STATUS.search(self.last_error)
                self.tally.retried(int(status.group(1)) if status else None)
            return f"codex: {one_line(self.last_error, 300)}"
        return None

    def _used(self) -> dict[str, int]:
        """This run's own usage: the thread's totals less what it had when resumed."""
        totals = self.totals or {}
        used = {
            key: max(0, totals.get(key, 0) - count(self.baseline.get(key))) for key in TOTAL_KEYS
        }
        used["cached_input_tokens"] = min(used["cached_input_tokens"], used["input_tokens"])
        return used

    def finish(self, exit_code: int, stderr_tail: list[str]) -> tuple[dict[str, Any], str]:
        used = self._used()
        cached = used["cached_input_tokens"]
        record: dict[str, Any] = {
            "input_tokens": used["input_tokens"] - cached,
            "output_tokens": used["output_tokens"],
            "cache_read_input_tokens": cached,
            "cost_usd": None,
            "session_id": self.thread_id,
            "session_totals": self.totals,
            "api_retries": self.tally.api_retries,
            "api_status": None,
            "refusals": [],
        }
        if self.last_message:
            record["summary"] = self.last_message[:SUMMARY_CHARS]
        tokens = (
            f"{record['input_tokens']} in / {record['output_tokens']} out tokens (+{cached} cached)"
        )
        if self.failure is not None:
            # A rejected key or an expired sign-in fails every attempt alike: no retry helps.
            unauthorized = _UNAUTHORIZED.search(self.failure) is not None
            record.update(result=AUTHENTICATION_FAILED if unauthorized else "turn_failed")
            status = _STATUS.search(self.failure)  # the API error it ended on, if one
            record.update(is_error=True, api_status=int(status.group(1)) if status else None)
            return record, f"{RULE} codex failed: {one_line(self.failure, 300)} · {tokens}"
        if self.totals is None:
            record.update(result="truncated", is_error=True)
            last = self.last_error or (stderr_tail[-1] if stderr_tail else "")
            why = f": {one_line(last, 300)}" if last else ""
            return record, (
                f"{RULE} codex ended without completing its turn (exit {exit_code}), "
                f"the stream was cut short{why}"
            )
        record.update(result="success", is_error=False)
        return record, f"{RULE} codex done: success · {tokens}"


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _item(item: dict[str, Any], *, started: bool) -> str | None:
    kind = item.get("type")
    if kind == "command_execution":
        if started:
            return f"→ $ {one_line(_text(item.get('command')))}"
        code = item.get("exit_code")
        if item.get("status") == "failed" or (isinstance(code, int) and code != 0):
            output = _text(item.get("aggregated_output")).strip().splitlines()
            last = f": {one_line(output[-1])}" if output else ""
            return f"  ✗ exit {code}{last}"
        return None
    if started:
        return None  # everything else is shown once, complete
    if kind == "agent_message":
        return _text(item.get("text")).strip() or None
    if kind == "file_change":
        changes = item.get("changes")
        changes = changes if isinstance(changes, list) else []
        paths = ", ".join(
            f"{c.get('kind')} {c.get('path')}" for c in changes if isinstance(c, dict)
        )
        failed = " (failed)" if item.get("status") == "failed" else ""
        return f"→ edit: {one_line(paths)}{failed}"
    if kind == "mcp_tool_call":
        return f"→ {item.get('server')}.{item.get('tool')}"
    if kind == "web_search":
        return f"→ web search: {one_line(_text(item.get('query')))}"
    if kind == "error":
        return f"codex: {one_line(_text(item.get('message')), 300)}"
    return None  # reasoning, todo_list, plan: not worth a pane line


def _make(options: dict[str, str]) -> CodexStream:
    tally = tally_options(options, limited=False)  # it says its usage only once done
    unknown = set(options) - {"baseline"}
    if unknown:
        raise ValueError(f"unknown options: {', '.join('--' + name for name in sorted(unknown))}")
    if "baseline" not in options:
        return CodexStream(tally=tally)
    try:
        baseline = json.loads(options["baseline"])
    except ValueError:
        baseline = None
    if not isinstance(baseline, dict):
        raise TypeError(f"--baseline must be a JSON object, got {options['baseline']!r}")
    return CodexStream({key: count(baseline.get(key)) for key in TOTAL_KEYS}, tally)


if __name__ == "__main__":
    sys.exit(main(_make, LABEL))
