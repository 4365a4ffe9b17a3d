"""Local stand-ins of the two model APIs, so the REAL claude and codex programs can run a
whole session here: the Messages API (ANTHROPIC_BASE_URL) and the Responses API (a codex
model provider). Each answers every request with the same short streamed reply and keeps
what it was sent, for the tests to look at."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# What the fake Messages API says each call used (disjoint, as the real API's are).
CLAUDE_CALL = {"input_tokens": 120, "cache_creation_input_tokens": 2000}
CLAUDE_CALL |= {"cache_read_input_tokens": 3000}
CODEX_CALL = {"input_tokens": 1500, "cached_tokens": 1000, "output_tokens": 30}


@dataclass
class FakeApi:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)  # path, headers, body


def _sse(handler: BaseHTTPRequestHandler, events: list[tuple[str, dict[str, Any]]]) -> None:
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.send_header("connection", "close")
    handler.end_headers()
    for name, data in events:
        handler.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
    handler.wfile.flush()
    handler.close_connection = True


def _messages(model: str, number: int, use_tool: bool) -> list[tuple[str, dict[str, Any]]]:
    start: dict[str, Any] = {
        "id": f"msg_{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**CLAUDE_CALL, "output_tokens": 1},
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    if use_tool:
        block = {"type": "tool_use", "id": f"toolu_{number}", "name": "Bash", "input": {}}
        delta = {"type": "input_json_delta", "partial_json": '{"command": "ls"}'}
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": "Hello from the fake API."}
    events += [
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use" if use_tool else "end_turn"},
                "usage": {"output_tokens": 7},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def _responses() -> list[tuple[str, dict[str, Any]]]:
    item = {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "content": [{"type": "output_text", "text": "Hello from the fake API."}],
    }
    usage = {
        "input_tokens": CODEX_CALL["input_tokens"],
        "input_tokens_details": {"cached_tokens": CODEX_CALL["cached_tokens"]},
        "output_tokens": CODEX_CALL["output_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": CODEX_CALL["input_tokens"] + CODEX_CALL["output_tokens"],
    }
    events: tuple[dict[str, Any], ...] = (
        {"type": "response.created", "response": {"id": "resp_1"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "content": []},
        },
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {"id": "resp_1", "usage": usage}},
    )
    return [(str(event["type"]), event) for event in events]


@contextmanager
def fake_api(*, use_tool: bool = False) -> Iterator[FakeApi]:
    """Both APIs on one local port: POST /v1/messages and POST /v1/responses."""
    api = FakeApi(url="")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _empty(self, status: int) -> None:
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_HEAD(self) -> None:  # Claude Code's connectivity check
            self._empty(200)

        def do_GET(self) -> None:
            self._empty(404)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                request = json.loads(body or b"{}")
            except ValueError:  # codex may compress its body; the tests need its headers
                request = {}
            with lock:
                number = len(api.requests)
                api.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": request}
                )
            if self.path.startswith("/v1/messages") and request.get("stream"):
                _sse(self, _messages(str(request.get("model")), number, use_tool))
            elif self.path.startswith("/v1/responses"):
                _sse(self, _responses())
            else:
                self._empty(404)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def codex_provider_args(api: FakeApi) -> list[str]:
    """`codex exec` options that make the fake API its model provider, no retries."""
    provider = (
        f'{{name="fake",base_url="{api.url}/v1",wire_api="responses",'
        "request_max_retries=0,stream_max_retries=0}"
    )
    return ["-c", 'model_provider="fake"', "-c", f"model_providers.fake={provider}"]
