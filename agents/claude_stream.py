"""The stream filter of kind `claude-code`: `claude -p ... --output-format stream-json
--verbose --include-partial-messages` shown readably in the pane, and its usage recorded
(agents/stream_filter.py).

    python -I -S agents/claude_stream.py [--token-limit N] -- claude -p ...

The events, as Claude Code 2.1 prints them (pinned by tests/agents/standins/claude and
the real program against tests/model_server):

    {"type":"system","subtype":"init","session_id":..,"model":..,"permissionMode":..,...}
    {"type":"system","subtype":"api_retry","attempt":..,"max_retries":..,"retry_delay_ms":..,
     "error_status":529,"error":"overloaded"}            it retries 429, 529, 5xx, 401 itself
    {"type":"stream_event","event":{"type":"message_start","message":{"id":..,"usage":..}}}
    {"type":"stream_event","event":{"type":"message_delta","usage":{"output_tokens":..}}}
    {"type":"assistant","message":{"id":..,"content":[{"type":"text"|"tool_use",...}],
                                   "usage":{...}},"session_id":..,"error"?:..}
    {"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":..,
                                          "is_error":..,"content":..}]}}
    {"type":"result","subtype":"success"|"error_max_turns"|"error_during_execution"|...,
     "is_error":bool,"api_error_status":int|null,"num_turns":..,"result"?:str,
     "errors"?:[str],"total_cost_usd":..,"usage":{...},"permission_denials":[{"tool_name",
     "tool_use_id","tool_input"}],"modelUsage":{model:{inputTokens,outputTokens,
     cacheReadInputTokens,cacheCreationInputTokens,costUSD}}}

A run that ends on an API error says `"subtype":"success","is_error":true`; the synthetic
assistant message before it names the error (`"error":"authentication_failed"`,
`"server_error"` for a 529 storm, `"rate_limit"`, `"max_output_tokens"` once four replies
in a row were cut at the output limit), and that word becomes the record's result.

Tokens counted (what token budgets see): `input_tokens` = fresh input + cache writes (new
text the model read), `output_tokens`. Cache reads, the same prompt read again on every
turn at a tenth of the price, are recorded apart as `cache_read_input_tokens` and not
counted: with them a 30-turn session would count its system prompt 30 times. While it
runs, each API call is counted from its `message_start` and `message_delta` stream events
(its `assistant` messages where there are none): that is the live count, the allowance's,
and what a run cut short (no result) records, with a cost from Anthropic's list prices
(`estimated`). At the end the result's `modelUsage`, summed over models (every call,
sub-agents' and small helper models' too), and its `total_cost_usd` replace them.
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
    RULE,
    SUMMARY_CHARS,
    TOKEN_BUDGET,
    main,
    one_line,
    tally_options,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LABEL = "claude-code"
# The tool input that best says what a tool use does, in order of preference.
_SUMMARY_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "description")
_USAGE_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class ClaudeStream:
    def __init__(self, tally: Tally | None = None) -> None:
        self.tally = tally or Tally()
        self.session_id: str | None = None  # from system/init: the session exists
        self.result: dict[str, Any] | None = None
        self.calls: dict[str, dict[str, int]] = {}  # message id -> its usage, as it grows
        self.models: dict[str, str] = {}  # message id -> the model that answered it
        self.streaming: dict[object, str] = {}  # parent_tool_use_id -> the message it streams
        self.error: str = ""  # the synthetic message's `error`: "authentication_failed", ...
        self.failed_tools: dict[str, str] = {}  # tool_use_id -> what its failed result said
        self.last_text = ""

    def wants_stop(self) -> bool:
        return self.tally.spent

    def event(self, event: dict[str, Any]) -> str | None:
        kind = event.get("type")
        if kind == "stream_event":
            self._stream_event(event)
            return None
        if kind == "system" and event.get("subtype") == "init":
            self.session_id = _text(event.get("session_id")) or None
            return (
                f"{RULE} claude-code {event.get('claude_code_version', '')} · session "
                f"{self.session_id} · model {event.get('model')} · permission mode "
                f"{event.get('permissionMode')}"
            )
        if kind == "system" and event.get("subtype") == "api_retry":
            return self._retry(event)
        if kind == "assistant":
            return self._assistant(event)
        if kind == "user":
            return self._tool_errors(event)
        if kind == "result":
            self.result = event
        return None

    def _stream_event(self, event: dict[str, Any]) -> None:
        raw = event.get("event")
        if not isinstance(raw, dict):
            return
        parent = event.get("parent_tool_use_id")
        if raw.get("type") == "message_start" and isinstance(raw.get("message"), dict):
            message = raw["message"]
            self.streaming[parent] = str(message.get("id"))
            self.models[self.streaming[parent]] = _text(message.get("model"))
            self._call(self.streaming[parent], message.get("usage"))
        elif raw.get("type") == "message_delta" and parent in self.streaming:
            self._call(self.streaming[parent], raw.get("usage"))

    def _call(self, message_id: str, usage: object) -> None:
        """Fold one API call's usage in: its input once known, its output as it grows."""
        if not isinstance(usage, dict):
            return
        seen = self.calls.setdefault(message_id, {})
        before = _counted(seen)
        for key in _USAGE_KEYS:
            if key in usage and key not in seen:
                seen[key] = count(usage[key])
        seen["output_tokens"] = max(seen.get("output_tokens", 0), count(usage.get("output_tokens")))
        self.tally.count(self.tally.tokens + _counted(seen) - before)

    def _retry(self, event: dict[str, Any]) -> str:
        status = event.get("error_status")
        self.tally.retried(status if isinstance(status, int) else None)
        delay = event.get("retry_delay_ms")
        wait = f" in {delay / 1000:.1f} s" if isinstance(delay, int | float) else ""
        return (
            f"  ⟳ the API answered {status} ({event.get('error')}): retry "
            f"{event.get('attempt')} of {event.get('max_retries')}{wait}"
        )

    def _assistant(self, event: dict[str, Any]) -> str | None:
        message = event.get("message")
        if not isinstance(message, dict):
            return None
        synthetic = message.get("model") == "<synthetic>"  # an error's: no API call, no words
        if not synthetic:
            self.models.setdefault(str(message.get("id")), _text(message.get("model")))
            self._call(str(message.get("id")), message.get("usage"))
        shown: list[str] = []
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and _text(block.get("text")).strip():
                shown.append(_text(block["text"]).strip())
                self.last_text = self.last_text if synthetic else shown[-1]
            elif block.get("type") == "tool_use":
                shown.append(f"→ {block.get('name')}: {_summary(block.get('input'))}")
        if event.get("error"):  # e.g. "authentication_failed"
            self.error = _text(event["error"])
            if shown:
                shown[0] = f"{event['error']}: {shown[0]}"
        return "\n".join(shown) or None

    def _tool_errors(self, event: dict[str, Any]) -> str | None:
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        shown: list[str] = []
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            if block.get("is_error"):
                said = one_line(_content_text(block.get("content")) or "the tool failed", 300)
                self.failed_tools[str(block.get("tool_use_id"))] = said
                shown.append(f"  ✗ {one_line(said)}")
        return "\n".join(shown) or None

    def finish(self, exit_code: int, stderr_tail: list[str]) -> tuple[dict[str, Any], str]:
        result = self.result
        record: dict[str, Any]
        if self.tally.spent or result is None:
            tokens = _estimate(self.calls.values())
            cost = _list_cost(self.calls, self.models)
            record = {**tokens, "cost_usd": cost, "session_id": self.session_id}
            record.update(num_turns=None, estimated=True, **self._common())
            if self.tally.spent:
                record.update(result=TOKEN_BUDGET, is_error=True)
                used = tokens["input_tokens"] + tokens["output_tokens"]
                return record, (
                    f"{RULE} claude-code stopped: {TOKEN_BUDGET}: its stream showed {used} "
                    f"tokens, its allowance was {self.tally.limit}"
                )
            record.update(result="truncated", is_error=True)
            why = f": {one_line(stderr_tail[-1])}" if stderr_tail else ""
            return record, (
                f"{RULE} claude-code ended without a result (exit {exit_code}), "
                f"the stream was cut short{why}"
            )
        subtype = _text(result.get("subtype")) or "unknown"
        is_error = bool(result.get("is_error")) or subtype != "success"
        if is_error and subtype == "success" and self.error:
            subtype = self.error  # "success" says nothing; the error's own word does
        tokens = _tokens(result)
        cost = result.get("total_cost_usd")
        status = result.get("api_error_status")
        if not isinstance(status, int):  # a 529 storm's says null: its retries said 529
            status = self.tally.api_status if self.error else None
        record = {
            **tokens,
            "cost_usd": cost if isinstance(cost, int | float) else None,
            "session_id": self.session_id,
            "result": subtype,
            "is_error": is_error,
            "num_turns": result.get("num_turns"),
            **self._common(),
            "api_status": status,  # of the API error the run ended on
        }
        if isinstance(result.get("result"), str) and not is_error:
            record["summary"] = result["result"].strip()[:SUMMARY_CHARS]
        record["refusals"] = self._refusals(result.get("permission_denials"))
        return record, _closing(record, result)

    def _common(self) -> dict[str, Any]:
        """What every record says besides tokens: retries, and the last words."""
        common: dict[str, Any] = {"api_retries": self.tally.api_retries}
        common.update(api_status=None, refusals=[])
        if self.last_text:
            common["summary"] = self.last_text[:SUMMARY_CHARS]
        return common

    def _refusals(self, denials: object) -> list[dict[str, str]]:
        """Each tool use Claude Code refused, with what it told the model."""
        found = []
        for denial in denials if isinstance(denials, list) else []:
            if not isinstance(denial, dict):
                continue
            said = self.failed_tools.get(str(denial.get("tool_use_id")), "")
            found.append(
                {
                    "tool": _text(denial.get("tool_name")) or "a tool",
                    "target": _summary(denial.get("tool_input")),
                    "message": said,
                }
            )
        return found


def _counted(call: dict[str, int]) -> int:
    return (
        call.get("input_tokens", 0)
        + call.get("cache_creation_input_tokens", 0)
        + call.get("output_tokens", 0)
    )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _content_text(body: object) -> str:
    if isinstance(body, list):  # [{"type": "text", "text": ...}]
        return " ".join(_text(part.get("text")) for part in body if isinstance(part, dict))
    return _text(body)


def _summary(tool_input: object) -> str:
    if not isinstance(tool_input, dict):
        return one_line(str(tool_input))
    for key in _SUMMARY_KEYS:
        if isinstance(tool_input.get(key), str):
            return one_line(tool_input[key])
    return one_line(json.dumps(tool_input, separators=(",", ":")))


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


# Anthropic's list prices, dollars a million tokens (input, output), for the cost of a run
# cut short: Claude Code reports its cost only in its result, which a killed run never
# prints. A cache write costs 1.25 times the input price, a cache read 0.1 times (the
# figures Claude Code's own total_cost_usd gave here). First match wins; unknown: no cost.
_LIST_PRICES = (
    (re.compile(r"opus-4-(1|2025)|opus-4$|3-opus"), (15.0, 75.0)),
    (re.compile(r"opus"), (5.0, 25.0)),
    (re.compile(r"sonnet"), (3.0, 15.0)),
    (re.compile(r"3-5-haiku|3-haiku"), (0.8, 4.0)),
    (re.compile(r"haiku"), (1.0, 5.0)),
)


def _list_cost(calls: dict[str, dict[str, int]], models: dict[str, str]) -> float | None:
    total = 0.0
    for message_id, call in calls.items():
        model = models.get(message_id, "")
        prices = next((p for pattern, p in _LIST_PRICES if pattern.search(model)), None)
        if prices is None:
            return None
        fresh, output = prices
        total += (
            call.get("input_tokens", 0) * fresh
            + call.get("cache_creation_input_tokens", 0) * fresh * 1.25
            + call.get("cache_read_input_tokens", 0) * fresh * 0.1
            + call.get("output_tokens", 0) * output
        ) / 1e6
    return round(total, 6) if calls else None


def _estimate(calls: Any) -> dict[str, int]:
    """Summed over the API calls the stream showed."""
    total = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0}
    total["cache_creation_input_tokens"] = 0
    for call in calls:
        written = call.get("cache_creation_input_tokens", 0)
        total["input_tokens"] += call.get("input_tokens", 0) + written
        total["cache_creation_input_tokens"] += written
        total["cache_read_input_tokens"] += call.get("cache_read_input_tokens", 0)
        total["output_tokens"] += call.get("output_tokens", 0)
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
    if record["api_retries"]:
        facts.append(f"{record['api_retries']} API retries")
    if record["refusals"]:
        facts.append(f"{len(record['refusals'])} tool use(s) refused")
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
    tally = tally_options(options)
    if options:
        raise ValueError(f"unknown options: {', '.join('--' + name for name in options)}")
    return ClaudeStream(tally)


if __name__ == "__main__":
    sys.exit(main(_make, LABEL))
