"""The three wire formats: a request read as a `Conversation`, a `Reply` written as the
events (or the JSON) the agent program expects.

    messages   Anthropic Messages API, streamed (Claude Code): message_start,
               content_block_start/delta/stop per block, message_delta, message_stop
    responses  OpenAI Responses API, streamed (Codex CLI): response.created,
               response.output_item.added/done per item, response.completed (or
               .incomplete at max_tokens); apply_patch is a custom_tool_call
    chat       OpenAI Chat Completions (Aider): chat.completion.chunk events and [DONE], or
               one chat.completion object when not streamed
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from tests.model_server.script import Api, Conversation, Reply, ToolCall, ToolResult

Event = tuple[str | None, dict[str, Any]]  # (SSE event name, data)

_CLAUDE_CWD = re.compile(r"Primary working directory: (\S+)")
_CODEX_CWD = re.compile(r"<cwd>([^<]+)</cwd>")


def api_of(path: str) -> Api | None:
    for suffix, api in (
        ("/v1/messages", "messages"),
        ("/v1/responses", "responses"),
        ("/v1/chat/completions", "chat"),
    ):
        if path.split("?")[0].endswith(suffix):
            return api  # type: ignore[return-value]
    return None


# --- reading a request ---------------------------------------------------------------------


def conversation(
    api: Api, body: dict[str, Any], raw: str, headers: Mapping[str, str]
) -> Conversation:
    """The request as the rules see it: its history as a list of items, each from the
    model or not, with their text; the tool results of the items after the last reply."""
    lower = {key.lower(): value for key, value in headers.items()}
    items: list[tuple[bool, str, tuple[ToolResult, ...]]]  # (from the model, text, results)
    if api == "responses":
        entries = [item for item in body.get("input", []) if isinstance(item, dict)]
        items = [
            (_from_model(item), _item_text(item), _codex_results(item))
            for item in entries
            if item.get("role") not in ("developer", "system")
        ]
        cwd = _first(_CODEX_CWD, raw)
        session = lower.get("session_id") or lower.get("thread-id", "")
    else:  # messages and chat: role and content
        messages = [m for m in body.get("messages", []) if m.get("role") in ("user", "assistant")]
        items = [
            (
                m["role"] == "assistant",
                _block_text(m.get("content")),
                _claude_results(m.get("content")),
            )
            for m in messages
        ]
        cwd = _first(_CLAUDE_CWD, _block_text(body.get("system"))) if api == "messages" else ""
        session = lower.get("x-claude-code-session-id", "")
    replies = sum(1 for i, item in enumerate(items) if item[0] and (i == 0 or not items[i - 1][0]))
    trailing = len(items)
    while trailing > 0 and not items[trailing - 1][0]:
        trailing -= 1
    return Conversation(
        api=api,
        model=str(body.get("model", "")),
        turn=1 + replies,
        messages_text="\n".join(text for _, text, _ in items),
        last_text="\n".join(text for _, text, _ in items[trailing:]),
        tool_results=tuple(result for _, _, results in items[trailing:] for result in results),
        cwd=cwd,
        session=session,
        raw=raw,
        history=tuple((from_model, text) for from_model, text, _ in items),
    )


def _first(pattern: re.Pattern[str], text: str) -> str:
    found = pattern.search(text)
    return found.group(1) if found else ""


def _from_model(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    if kind == "message":
        return item.get("role") == "assistant"
    return kind in ("function_call", "custom_tool_call", "reasoning")


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            parts.append(_block_text(block.get("content")))
        elif block.get("type") == "tool_use":
            parts.append(json.dumps(block.get("input")))
    return "\n".join(parts)


def _codex_results(item: dict[str, Any]) -> tuple[ToolResult, ...]:
    if not str(item.get("type", "")).endswith("_output"):
        return ()
    return (ToolResult(_output_text(item.get("output"))),)


def _claude_results(content: Any) -> tuple[ToolResult, ...]:
    blocks = content if isinstance(content, list) else []
    return tuple(
        ToolResult(_block_text(block.get("content")), bool(block.get("is_error")))
        for block in blocks
        if isinstance(block, dict) and block.get("type") == "tool_result"
    )


def _item_text(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if kind == "message":
        return "\n".join(
            str(part.get("text", "")) for part in item.get("content", []) if isinstance(part, dict)
        )
    if kind == "function_call":
        return str(item.get("arguments", ""))
    if kind == "custom_tool_call":
        return str(item.get("input", ""))
    if str(kind).endswith("_output"):
        return _output_text(item.get("output"))
    return ""


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(_output_text(part.get("text", part)) for part in output)
    return json.dumps(output)


def is_count_tokens(path: str) -> bool:
    """Claude Code's `POST /v1/messages/count_tokens`: how long a request would be, asked
    after a large read; no turn of the conversation."""
    return path.split("?")[0].endswith("/v1/messages/count_tokens")


def counted_tokens(body: dict[str, Any]) -> dict[str, int]:
    """The count_tokens answer: about four characters a token of what the model would
    read (system, messages, tools), as the real API counts them within a few per cent."""
    read = [body.get(key) for key in ("system", "messages", "tools") if body.get(key)]
    return {"input_tokens": max(1, len(json.dumps(read, ensure_ascii=False)) // 4)}


# --- writing a reply -----------------------------------------------------------------------


def error_body(api: Api, status: int) -> dict[str, Any]:
    kind, message = _ERRORS.get(status, ("api_error", f"HTTP {status}"))
    if api == "messages":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": kind}}


_ERRORS = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    429: ("rate_limit_error", "Number of requests has exceeded your rate limit"),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


def claude_events(reply: Reply, model: str, number: int) -> list[Event]:
    usage = reply.usage
    start = {
        "id": f"msg_{number:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.input_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
            "output_tokens": 1,
        },
    }
    events: list[Event] = [("message_start", {"type": "message_start", "message": start})]
    blocks = _claude_blocks(reply, number)
    for index, (block, delta) in enumerate(blocks):
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
        )
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    stop = "tool_use" if reply.tools else "end_turn"
    stop = "max_tokens" if reply.stop == "max_tokens" else stop
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": usage.output_tokens},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _claude_blocks(reply: Reply, number: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    blocks: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if reply.text:
        blocks.append(({"type": "text", "text": ""}, {"type": "text_delta", "text": reply.text}))
    for index, call in enumerate(reply.tools):
        arguments = json.dumps(call.input)
        if reply.stop == "max_tokens" and index == len(reply.tools) - 1:
            arguments = arguments[: len(arguments) // 2]  # cut off mid-call
        blocks.append(
            (
                {
                    "type": "tool_use",
                    "id": f"toolu_{number:04d}_{index}",
                    "name": call.name,
                    "input": {},
                },
                {"type": "input_json_delta", "partial_json": arguments},
            )
        )
    return blocks


def codex_events(reply: Reply, number: int) -> list[Event]:
    items = list(_codex_items(reply, number))
    response: dict[str, Any] = {"id": f"resp_{number:04d}", "object": "response"}
    events: list[Event] = [
        (None, {"type": "response.created", "response": {**response, "status": "in_progress"}})
    ]
    for index, item in enumerate(items):
        added = {**item, "content": []} if item["type"] == "message" else item
        events.append(
            (None, {"type": "response.output_item.added", "output_index": index, "item": added})
        )
        events.append(
            (None, {"type": "response.output_item.done", "output_index": index, "item": item})
        )
    usage = reply.usage
    cached = usage.cache_read_input_tokens
    total_in = usage.input_tokens + usage.cache_creation_input_tokens + cached
    done = {
        **response,
        "output": items,
        "usage": {
            "input_tokens": total_in,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": total_in + usage.output_tokens,
        },
    }
    if reply.stop == "max_tokens":
        done |= {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
        events.append((None, {"type": "response.incomplete", "response": done}))
    else:
        events.append(
            (None, {"type": "response.completed", "response": {**done, "status": "completed"}})
        )
    return events


def _codex_items(reply: Reply, number: int) -> Iterable[dict[str, Any]]:
    if reply.text:
        yield {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{number:04d}",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        }
    for index, call in enumerate(reply.tools):
        yield _codex_call(call, f"{number:04d}_{index}")


def _codex_call(call: ToolCall, suffix: str) -> dict[str, Any]:
    if isinstance(call.input, str):
        return {
            "type": "custom_tool_call",
            "id": f"ctc_{suffix}",
            "call_id": f"call_{suffix}",
            "name": call.name,
            "input": call.input,
            "status": "completed",
        }
    return {
        "type": "function_call",
        "id": f"fc_{suffix}",
        "call_id": f"call_{suffix}",
        "name": call.name,
        "arguments": json.dumps(call.input),
        "status": "completed",
    }


def chat_usage(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    cached = usage.cache_read_input_tokens
    prompt = usage.input_tokens + usage.cache_creation_input_tokens + cached
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def chat_events(reply: Reply, model: str, number: int) -> list[Event]:
    base = {"id": f"chatcmpl-{number:04d}", "object": "chat.completion.chunk", "model": model}
    base["created"] = 1_700_000_000 + number
    finish = "length" if reply.stop == "max_tokens" else "stop"
    events: list[Event] = [
        (None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
        (None, {**base, "choices": [{"index": 0, "delta": {"content": reply.text}}]}),
        (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
        (None, {**base, "choices": [], "usage": chat_usage(reply)}),
    ]
    return events


def chat_completion(reply: Reply, model: str, number: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{number:04d}",
        "object": "chat.completion",
        "created": 1_700_000_000 + number,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text},
                "finish_reason": "length" if reply.stop == "max_tokens" else "stop",
            }
        ],
        "usage": chat_usage(reply),
    }
