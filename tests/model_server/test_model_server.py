"""The scripted model server itself: requests of each API read alike, rules applied in
order, replies written in each wire format, errors and hangs as asked."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.model_server import Reply, Rule, Script, ToolCall, Usage, edit, read, serve
from tests.model_server.script import Conversation
from tests.model_server.wire import conversation

SYSTEM = [{"type": "text", "text": "You are Claude.\n - Primary working directory: /w/fix-a\n"}]


def claude_request(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "claude-x", "system": SYSTEM, "messages": list(messages), "stream": True}


def as_claude(body: dict[str, Any]) -> Conversation:
    return conversation("messages", body, json.dumps(body), {"X-Claude-Code-Session-Id": "s1"})


def test_a_claude_request_reads_as_its_turn_last_message_and_cwd() -> None:
    tool_use = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/w/a"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "1\tx = 1", "is_error": False}
    seen = as_claude(
        claude_request(
            {"role": "user", "content": [{"type": "text", "text": "Fix it"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, tool_use]},
            {"role": "user", "content": [result]},
        )
    )
    assert (seen.turn, seen.cwd, seen.session) == (2, "/w/fix-a", "s1")
    assert seen.last_text == "1\tx = 1" and seen.tool_results[0].text == "1\tx = 1"
    assert "Fix it" in seen.messages_text and "You are Claude" not in seen.messages_text


def test_a_codex_request_counts_a_reply_of_several_items_as_one_turn() -> None:
    body = {
        "model": "gpt-5.5",
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "rules"}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "<cwd>/w/b</cwd>"}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Fix it"}],
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            },
            {
                "type": "custom_tool_call",
                "call_id": "c1",
                "name": "apply_patch",
                "input": "*** Begin",
            },
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "Success. Updated a.py"},
        ],
    }
    seen = conversation("responses", body, json.dumps(body), {"session_id": "th1"})
    assert (seen.turn, seen.cwd, seen.session) == (2, "/w/b", "th1")
    assert seen.last_text == "Success. Updated a.py" and "rules" not in seen.messages_text


def test_rules_apply_in_order_by_turn_words_and_times() -> None:
    script = Script(
        Rule(Reply(status=529), times=2),
        Rule(Reply(text="fixed"), last_contains="Feedback"),
        Rule(Reply(tools=(read("a.py"),)), turn=1),
        default=Reply(text="done"),
    )
    first = as_claude(claude_request({"role": "user", "content": "Fix it"}))
    again = as_claude(
        claude_request(
            {"role": "user", "content": "Fix it"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "## Feedback on your previous attempt"},
        )
    )
    answers = [script.reply(first) for _ in range(3)] + [script.reply(again)]
    assert [a.status for a in answers] == [529, 529, 200, 200]
    assert answers[2].tools == (ToolCall("Read", {"file_path": "/w/fix-a/a.py"}),)  # {cwd} filled
    assert answers[3].text == "fixed"


def post(url: str, body: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def sse(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def test_each_api_is_answered_in_its_format_and_logged() -> None:
    usage = Usage(input_tokens=300, output_tokens=40, cache_creation_input_tokens=50)
    change = edit("a.py", "x = 1", "x = 2")
    with serve(Script(default=Reply(text="Editing.", tools=(change,), usage=usage))) as api:
        status, text = post(
            f"{api.url}/v1/messages?beta=true", claude_request({"role": "user", "content": "go"})
        )
        events = sse(text)
        assert status == 200 and events[0]["message"]["usage"]["input_tokens"] == 300
        assert [
            e["content_block"]["type"] for e in events if e["type"] == "content_block_start"
        ] == ["text", "tool_use"]
        tool_input = [
            e["delta"]["partial_json"]
            for e in events
            if e.get("delta", {}).get("type") == "input_json_delta"
        ]
        assert json.loads(tool_input[0])["file_path"] == "/w/fix-a/a.py"
        assert events[-2]["delta"]["stop_reason"] == "tool_use"

        status, text = post(f"{api.url}/v1/responses", {"model": "m", "input": []})
        done = sse(text)[-1]
        assert (status, done["type"]) == (200, "response.completed")
        assert done["response"]["usage"]["input_tokens"] == 350

        status, text = post(f"{api.url}/v1/chat/completions", {"model": "m", "messages": []})
        reply = json.loads(text)
        assert reply["choices"][0]["message"]["content"] == "Editing."
        assert reply["usage"]["prompt_tokens"] == 350
    assert [e.api for e in api.exchanges()] == ["messages", "responses", "chat"]
    assert api.usage() == (3 * 350, 3 * 40)


def test_count_tokens_is_answered_with_an_estimate_and_is_no_turn() -> None:
    """Claude Code asks it after a large read; a 404 there is not what the real API says."""
    with serve(Script(Rule(Reply(text="first"), turn=1), default=Reply(text="later"))) as api:
        short = claude_request({"role": "user", "content": "go"})
        long = claude_request({"role": "user", "content": "go " + "x = 1\n" * 4000})
        answers = [post(f"{api.url}/v1/messages/count_tokens?beta=true", b) for b in (short, long)]
        assert [status for status, _ in answers] == [200, 200], answers
        small, large = (json.loads(text)["input_tokens"] for _, text in answers)
        assert 0 < small < 100 and 6000 < large < 8000, (small, large)
        _, text = post(f"{api.url}/v1/messages", short)
    assert "first" in text  # the conversation's turn 1 still: no turn was spent
    assert [e.api for e in api.exchanges()] == ["messages"]
    assert api.count_token_requests == [small, large]
    assert api.usage() == (100, 20)


def test_an_error_is_answered_as_the_api_words_it_and_not_counted() -> None:
    with serve(Script(Rule(Reply(status=529, retry_after_s=0), times=1))) as api:
        status, text = post(
            f"{api.url}/v1/messages", claude_request({"role": "user", "content": "go"})
        )
        assert (status, json.loads(text)["error"]["type"]) == (529, "overloaded_error")
        status, _ = post(
            f"{api.url}/v1/messages", claude_request({"role": "user", "content": "go"})
        )
        assert status == 200
    assert api.usage() == (100, 20)  # the default usage, once


def test_a_max_tokens_stop_cuts_the_last_tool_call_short() -> None:
    reply = Reply(tools=(edit("a.py", "x", "y"),), stop="max_tokens")
    with serve(Script(default=reply)) as api:
        _, text = post(f"{api.url}/v1/messages", claude_request({"role": "user", "content": "go"}))
    events = sse(text)
    partial = next(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta")
    with pytest.raises(ValueError):
        json.loads(partial)
    assert events[-2]["delta"]["stop_reason"] == "max_tokens"


def test_a_hung_answer_is_dropped_when_the_server_closes() -> None:
    outcome: list[str] = []

    def ask(url: str) -> None:
        try:
            post(f"{url}/v1/messages", claude_request({"role": "user", "content": "go"}))
            outcome.append("answered")
        except OSError as error:
            outcome.append(type(error).__name__)

    with serve(Script(default=Reply(hang=True))) as api:
        client = threading.Thread(target=ask, args=(api.url,))
        client.start()
        time.sleep(0.3)
        assert outcome == [] and len(api.exchanges()) == 1
    client.join(timeout=5)
    assert outcome and outcome != ["answered"]
