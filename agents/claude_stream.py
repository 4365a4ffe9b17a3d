"""The stream filter of kind `claude-code`: `claude -p ... --output-format stream-json
--verbose` shown readably in the pane, and its usage recorded (agents/stream_filter.py).

    python -I -S agents/claude_stream.py -- claude -p --output-format stream-json ...

The events, as Claude Code 2.1 prints them (pinned by tests/agents/standins/claude):

    {"type":"system","subtype":"init","session_id":..,"model":..,"permissionMode":..,...}
    {"type":"assistant","message":{"id":..,"content":[{"type":"text"|"tool_use",...}],
                                   "usage":{...}},"session_id":..,"error"?:..}
    {"type":"user","message":{"content":[{"type":"tool_result","is_error":..,...}]}}
    {"type":"result","subtype":"success"|"error_max_turns"|"error_during_execution"|...,
     "is_error":bool,"num_turns":..,"result"?:str,"errors"?:[str],"total_cost_usd":..,
     "usage":{...},"modelUsage":{model:{inputTokens,outputTokens,cacheReadInputTokens,
                                        cacheCreationInputTokens,costUSD}}}

Without credentials the result says `"subtype":"success","is_error":true` and the text
"Not logged in · Please run /login": `is_error`, not the subtype, decides. The assistant
message before it says `"error":"authentication_failed"`, which becomes the record's result.

Tokens counted (what token budgets see): `input_tokens` = fresh input + cache writes (new
text the model read), `output_tokens`. Cache reads, the same prompt read again on every
turn at a tenth of the price, are recorded apart as `cache_read_input_tokens` and not
counted: with them a 30-turn session would count its system prompt 30 times. The numbers
are `modelUsage` summed over models (it includes every API call, the ones of sub-agents and
of small helper models too), else the result's `usage`; a stream cut short (no result) is
estimated from its assistant messages, marked `"estimated": true`.
"""

# ruff: noqa: PTH100, PTH120  (os.path: pathlib would only cost startup time here)

from __future__ import annotations

import json
import os
import sys

if __package__ in (None, ""):  # run by path, as stream_filter.filter_argv does
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agents.stream_filter import AUTHENTICATION_FAILED, RULE, count, main, one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LABEL = "claude-code"
# The tool input that best says what a tool use does, in order of preference.
_SUMMARY_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "description")


class ClaudeStream:
    def __init__(self) -> None:
        self.session_id: str | None = None  # from system/init: the session exists
        self.result: dict[str, Any] | None = None
        self.by_message: dict[str, dict[str, Any]] = {}  # message id -> its last usage
        self.error: str = ""  # an assistant message's `error`: "authentication_failed"

    def event(self, event: dict[str, Any]) -> str | None:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            self.session_id = _text(event.get("session_id")) or None
            return (
                f"{RULE} claude-code {event.get('claude_code_version', '')} · session "
                f"{self.session_id} · model {event.get('model')} · permission mode "
                f"{event.get('permissionMode')}"
            )
        if kind == "assistant":
            return self._assistant(event)
        if kind == "user":
            return _tool_errors(event)
        if kind == "result":
            self.result = event
        return None

    def _assistant(self, event: dict[str, Any]) -> str | None:
        message = event.get("message")
        if not isinstance(message, dict):
            return None
        if isinstance(message.get("usage"), dict):
            self.by_message[str(message.get("id"))] = message["usage"]
        shown: list[str] = []
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and _text(block.get("text")).strip():
                shown.append(_text(block["text"]).strip())
            elif block.get("type") == "tool_use":
                shown.append(f"→ {block.get('name')}: {_summary(block.get('input'))}")
        if event.get("error"):  # e.g. "authentication_failed"
            self.error = _text(event["error"])
            if shown:
                shown[0] = f"{event['error']}: {shown[0]}"
        return "\n".join(shown) or None

    def finish(self, exit_code: int, stderr_tail: list[str]) -> tuple[dict[str, Any], str]:
        record: dict[str, Any]
        result = self.result
        if result is None:
            tokens = _estimate(self.by_message.values())
            record = {**tokens, "cost_usd": None, "session_id": self.session_id}
            record.update(result="truncated", is_error=True, num_turns=None, estimated=True)
            why = f": {one_line(stderr_tail[-1])}" if stderr_tail else ""
            return record, (
                f"{RULE} claude-code ended without a result (exit {exit_code}), "
                f"the stream was cut short{why}"
            )
        subtype = _text(result.get("subtype")) or "unknown"
        is_error = bool(result.get("is_error")) or subtype != "success"
        if is_error and subtype == "success" and self.error == AUTHENTICATION_FAILED:
            subtype = AUTHENTICATION_FAILED  # "success" says nothing; no retry helps this
        tokens = _tokens(result)
        cost = result.get("total_cost_usd")
        record = {
            **tokens,
            "cost_usd": cost if isinstance(cost, int | float) else None,
            "session_id": self.session_id,
            "result": subtype,
            "is_error": is_error,
            "num_turns": result.get("num_turns"),
        }
        return record, _closing(record, result)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _summary(tool_input: object) -> str:
    if not isinstance(tool_input, dict):
        return one_line(str(tool_input))
    for key in _SUMMARY_KEYS:
        if isinstance(tool_input.get(key), str):
            return one_line(tool_input[key])
    return one_line(json.dumps(tool_input, separators=(",", ":")))


def _tool_errors(event: dict[str, Any]) -> str | None:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    shown: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("is_error"):
            body = block.get("content")
            if isinstance(body, list):  # [{"type": "text", "text": ...}]
                body = " ".join(_text(part.get("text")) for part in body if isinstance(part, dict))
            shown.append(f"  ✗ {one_line(_text(body) or 'the tool failed')}")
    return "\n".join(shown) or None


def _tokens(result: dict[str, Any]) -> dict[str, int]:
    fresh = written = read = output = 0
    by_model = result.get("modelUsage")
    if isinstance(by_model, dict) and by_model:
        for use in by_model.values():
            if isinstance(use, dict):
                fresh += count(use.get("inputTokens"))
                written += count(use.get("cacheCreationInputTokens"))
                read += count(use.get("cacheReadInputTokens"))
                output += count(use.get("outputTokens"))
    elif isinstance(result.get("usage"), dict):
        usage = result["usage"]
        fresh, written = (
            count(usage.get("input_tokens")),
            count(usage.get("cache_creation_input_tokens")),
        )
        read, output = (
            count(usage.get("cache_read_input_tokens")),
            count(usage.get("output_tokens")),
        )
    return {
        "input_tokens": fresh + written,
        "output_tokens": output,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
    }


def _estimate(usages: Any) -> dict[str, int]:
    """Summed over assistant messages (each id once: one message comes as several events)."""
    total = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0}
    total["cache_creation_input_tokens"] = 0
    for usage in usages:
        written = count(usage.get("cache_creation_input_tokens"))
        total["input_tokens"] += count(usage.get("input_tokens")) + written
        total["cache_creation_input_tokens"] += written
        total["cache_read_input_tokens"] += count(usage.get("cache_read_input_tokens"))
        total["output_tokens"] += count(usage.get("output_tokens"))
    return total


def _closing(record: dict[str, Any], result: dict[str, Any]) -> str:
    turns = record["num_turns"]
    facts = [f"{turns} turn{'' if turns == 1 else 's'}"] if isinstance(turns, int) else []
    facts.append(
        f"{record['input_tokens']} in / {record['output_tokens']} out tokens"
        f" (+{record['cache_read_input_tokens']} cache reads)"
    )
    if record["cost_usd"] is not None:
        facts.append(f"${record['cost_usd']:.4f}")
    if not record["is_error"]:
        return f"{RULE} claude-code done: {record['result']} · {' · '.join(facts)}"
    errors = result.get("errors")
    why = "; ".join(e for e in errors if isinstance(e, str)) if isinstance(errors, list) else ""
    why = why or _text(result.get("result")) or "no reason given"
    flag = " (is_error)" if record["result"] == "success" else ""
    return (
        f"{RULE} claude-code failed: {record['result']}{flag}: {one_line(why, 300)} · "
        f"{' · '.join(facts)}"
    )


def _make(options: dict[str, str]) -> ClaudeStream:
    if options:
        raise ValueError(f"unknown options: {', '.join('--' + name for name in options)}")
    return ClaudeStream()


if __name__ == "__main__":
    sys.exit(main(_make, LABEL))
