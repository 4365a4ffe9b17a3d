"""The scripted model server: one local port that answers as the Anthropic Messages API,
the OpenAI Responses API and Chat Completions, from scripts, and logs every exchange.

    with serve(Script(Rule(Reply(tools=(read("calc.py"),)), turn=1), match="/fix-a")) as api:
        env = {**api.claude_env(), ...}      # ANTHROPIC_BASE_URL and a key
        ...
        api.usage("/fix-a")                  # (input, output) over every answered request
        api.exchanges("/fix-a")[-1].conversation.last_text   # what the agent sent last

Claude Code first sends `HEAD /` (answered 200), and after a large read may ask `POST
/v1/messages/count_tokens` (answered with an estimate, no turn of any script); every other
request is a POST to one of the three APIs, routed to the first script whose `match` its
body holds.
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.model_server import wire
from tests.model_server.script import Api, Conversation, Reply, Script

MODEL_CONTEXT = 200_000


@dataclass(frozen=True)
class Exchange:
    """One request and how it was answered."""

    script: str
    api: Api
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    conversation: Conversation
    reply: Reply
    at: float  # unix time it came in

    @property
    def answered(self) -> bool:
        """A whole successful answer was sent, whose usage the agent saw."""
        return self.reply.status == 200 and not self.reply.hang


class ModelServer:
    def __init__(self, scripts: tuple[Script, ...]) -> None:
        self.scripts = scripts
        self.url = ""
        self.log: list[Exchange] = []
        self.unrouted: list[dict[str, Any]] = []  # requests no script took, answered 500
        self.count_token_requests: list[int] = []  # count_tokens answers: no turn, no usage
        self.closing = threading.Event()
        self._lock = threading.Lock()

    def exchanges(self, script: str | None = None) -> list[Exchange]:
        with self._lock:
            return [e for e in self.log if script is None or e.script == script]

    def usage(self, script: str | None = None) -> tuple[int, int]:
        """(input, output) tokens over every answered request, counted as kairo counts them."""
        counted = [e.reply.usage.counted for e in self.exchanges(script) if e.answered]
        return sum(i for i, _ in counted), sum(o for _, o in counted)

    def record(self, exchange: Exchange) -> int:
        with self._lock:
            self.log.append(exchange)
            return len(self.log)

    def route(self, conversation: Conversation) -> Script | None:
        return next((s for s in self.scripts if s.routes(conversation)), None)

    # --- how each program is pointed here --------------------------------------------------

    def claude_env(self) -> dict[str, str]:
        return {
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": "sk-ant-scripted",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }

    def codex_args(self, *, retries: int = 0) -> list[str]:
        """`codex exec` options that make this server its model provider (no key: it asks
        for none), and stop its other lookups."""
        provider = (
            f'{{name="scripted",base_url="{self.url}/v1",wire_api="responses",'
            f"request_max_retries={retries},stream_max_retries={retries}}}"
        )
        return [
            "-c",
            'model_provider="scripted"',
            "-c",
            f"model_providers.scripted={provider}",
            "-c",
            "features.plugins=false",
            "-c",
            "analytics.enabled=false",
        ]

    def aider_args(self, model: str = "scripted") -> list[str]:
        return [
            "--model",
            f"openai/{model}",
            "--openai-api-base",
            f"{self.url}/v1",
            "--openai-api-key",
            "sk-scripted",
            "--no-stream",
        ]


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a hung answer must not hold the shutdown

    def handle_error(self, request: Any, client_address: Any) -> None:
        # An agent stopped mid-answer (its timeout, its budget) has closed its end: that is
        # what the test wanted, not a traceback on stderr.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def serve(*scripts: Script) -> Iterator[ModelServer]:
    server = ModelServer(scripts or (Script(),))
    httpd = _HTTPServer(("127.0.0.1", 0), _handler(server))
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.closing.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_HEAD(self) -> None:  # Claude Code's connectivity check
            self._send(200, b"")

        def do_GET(self) -> None:
            self._send(404, b"")

        def do_POST(self) -> None:
            came = time.time()
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.headers.get("content-encoding") == "gzip":
                raw = gzip.decompress(raw)
            text = raw.decode("utf-8", "replace")
            try:
                body = json.loads(text or "{}")
            except ValueError:
                body = {}
            if wire.is_count_tokens(self.path) and isinstance(body, dict):
                counted = wire.counted_tokens(body)
                server.count_token_requests.append(counted["input_tokens"])
                self._json(200, counted)
                return
            api = wire.api_of(self.path)
            if api is None or not isinstance(body, dict):
                self._send(404, b"")
                return
            conversation = wire.conversation(api, body, text, dict(self.headers))
            script = server.route(conversation)
            if script is None:
                server.unrouted.append(body)
                self._json(500, wire.error_body(api, 500))
                return
            reply = script.reply(conversation)
            number = server.record(
                Exchange(
                    script.name, api, self.path, dict(self.headers), body, conversation, reply, came
                )
            )
            if reply.delay_s:
                server.closing.wait(reply.delay_s)
            if reply.hang:
                server.closing.wait()
                self.close_connection = True
                return
            if reply.status != 200:
                retry = reply.retry_after_s
                headers = {} if retry is None else {"retry-after": f"{retry:g}"}
                self._json(reply.status, wire.error_body(api, reply.status), headers)
                return
            model = conversation.model
            if api == "messages" and body.get("stream"):
                self._stream(wire.claude_events(reply, model, number))
            elif api == "responses":
                self._stream(wire.codex_events(reply, number), named=True)
            elif api == "chat" and body.get("stream"):
                self._stream(wire.chat_events(reply, model, number), done=True)
            elif api == "chat":
                self._json(200, wire.chat_completion(reply, model, number))
            else:
                self._json(400, wire.error_body(api, 400))

        def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _json(
            self, status: int, data: dict[str, Any], headers: dict[str, str] | None = None
        ) -> None:
            self._send(
                status,
                json.dumps(data).encode(),
                {"content-type": "application/json", **(headers or {})},
            )

        def _stream(
            self, events: list[wire.Event], *, named: bool = False, done: bool = False
        ) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            for name, data in events:
                name = name or (str(data.get("type")) if named else None)
                head = f"event: {name}\n" if name else ""
                self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
            if done:
                self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler
