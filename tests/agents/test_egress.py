"""agents/egress.py and the routes of agents/endpoints.py: what a sandboxed agent reaches.

Pure rules first, then the server itself on real sockets (no sandbox: the one under
bubblewrap is tests/e2e/test_sandbox.py's)."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import agents.egress as egress
from agents.egress import KEY_STAND_IN, allowed, build, request_line, rewrite_head
from agents.endpoints import ENDPOINT_PORT, behind_egress, egress_routes
from orchestrator.core.plan import AgentSpec, Endpoint

ALLOW = ["api.anthropic.com:443", "[::1]:8443"]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("api.anthropic.com:443", True),
        ("API.Anthropic.com.:443", True),  # DNS does not tell these apart
        ("[::1]:8443", True),
        ("api.anthropic.com:80", False),  # another port of an allowed host: another service
        ("api.anthropic.com:4430", False),
        ("api.anthropic.com", False),
        ("api.anthropic.com.evil.example:443", False),
        ("evil.example:443", False),
        ("api.anthropic.com:443@evil.example:443", False),
        ("api.anthropic.com:443/x", False),
        ("api.anthropic.com:+443", False),
        ("::1:8443", False),
        ("", False),
    ],
)
def test_a_tunnel_opens_to_an_allowed_host_on_its_own_port_only(
    target: str, expected: bool
) -> None:
    assert allowed(target, ALLOW) is expected


def test_a_request_line_is_three_parts_of_http_1() -> None:
    head = b"CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: x"
    assert request_line(head) == ("CONNECT", "api.anthropic.com:443", "HTTP/1.1")
    assert request_line(b"SSH-2.0-OpenSSH_9.6") is None
    assert request_line(b"GET / HTTP/2\r\n") is None


def test_the_reverse_proxy_puts_the_key_in_the_headers_only_and_sends_one_request() -> None:
    head = (
        b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3127\r\n"
        + f"x-api-key: {KEY_STAND_IN}\r\nAuthorization: Bearer {KEY_STAND_IN}\r\n".encode()
        + b"Connection: keep-alive\r\nContent-Length: 5"
    )
    sent = rewrite_head(head, "gateway.example", "sk-real")
    assert sent.split(b"\r\n") == [
        b"POST /v1/messages HTTP/1.1",
        b"x-api-key: sk-real",
        b"Authorization: Bearer sk-real",
        b"Content-Length: 5",
        b"Host: gateway.example",
        b"Connection: close",
        b"",
        b"",
    ]
    # without a key to add, the stand-in goes as it is: the agent had nothing else
    assert KEY_STAND_IN.encode() in (rewrite_head(head, "gateway.example", None) or b"")


def test_the_key_goes_into_no_header_an_endpoint_might_echo_back() -> None:
    head = f"GET /echo HTTP/1.1\r\nX-Echo: {KEY_STAND_IN}".encode()
    assert b"sk-real" not in (rewrite_head(head, "gateway.example", "sk-real") or b"")
    # a header smuggled after a bare line feed is refused, not passed for the server to read
    smuggled = f"GET / HTTP/1.1\r\nX-A: 1\nx-api-key: {KEY_STAND_IN}".encode()
    assert rewrite_head(smuggled, "gateway.example", "sk-real") is None


def test_a_held_variable_reaches_the_agent_as_the_stand_in() -> None:
    env = {"ANTHROPIC_API_KEY": "sk-real", "PATH": "/bin"}
    served = build({"hold": ["ANTHROPIC_API_KEY"], "proxy": ["3128"]}, env)
    assert env == {"ANTHROPIC_API_KEY": KEY_STAND_IN, "PATH": "/bin"}
    assert served.key == "sk-real"


@pytest.mark.parametrize(
    "options",
    [{"forward": ["x=1.2.3.4:5"]}, {"reverse": ["3127=ftp://x"]}, {"allow": ["host"]}],
)
def test_options_that_name_no_address_are_refused(options: dict[str, list[str]]) -> None:
    with pytest.raises(ValueError, match="wants"):
        build(options, {})


# --- The routes: what each agent may reach ----------------------------------------------


def test_a_vendor_s_agent_reaches_its_vendor_s_api_alone() -> None:
    routes = egress_routes(AgentSpec(kind="claude-code"), {})
    assert routes.allow == ("api.anthropic.com:443",)
    assert (routes.forwards, routes.reverse, routes.hold) == ((), (), ())
    codex = egress_routes(AgentSpec(kind="codex"), {}).allow
    assert codex == ("api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443")
    assert egress_routes(AgentSpec(kind="shell", run="x"), {}).allow == ()


def test_a_model_server_on_this_machine_keeps_its_url() -> None:
    env = {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:41234",
        "OPENAI_BASE_URL": "https://gw.example/v1",
    }
    routes = egress_routes(AgentSpec(kind="claude-code"), env)
    assert routes.forwards == ((41234, "127.0.0.1:41234"),)
    assert routes.allow == ("api.anthropic.com:443", "127.0.0.1:41234", "gw.example:443")
    assert routes.proxy == 3128 and routes.ports == (3128, 41234)
    # named in the program's own arguments too (codex's provider, aider's --openai-api-base)
    args = ["-c", 'model_providers.s={name="s",base_url="http://127.0.0.1:3128/v1"}']
    routes = egress_routes(AgentSpec(kind="codex", extra_args=tuple(args)), {})
    assert routes.forwards == ((3128, "127.0.0.1:3128"),) and routes.proxy == 3129


def test_an_endpoint_with_a_key_is_served_by_the_reverse_proxy_its_key_held() -> None:
    local = Endpoint(url="http://127.0.0.1:41234/v1", key_env="GATEWAY_KEY")
    claude = AgentSpec(kind="claude-code", endpoint=local)
    routes = egress_routes(claude, {"ANTHROPIC_BASE_URL": local.url})
    assert routes.reverse == ((41234, local.url),) and routes.forwards == ()
    assert routes.hold == ("ANTHROPIC_API_KEY",) and routes.allow == ()  # not its vendor
    assert behind_egress(claude) == claude  # the URL works as it is inside
    codex = egress_routes(AgentSpec(kind="codex", endpoint=local), {})
    assert codex.hold == ("GATEWAY_KEY",)  # codex reads it from that variable itself
    aider = egress_routes(AgentSpec(kind="aider", endpoint=local), {})
    assert aider.hold == ("OPENAI_API_KEY",)


def test_an_endpoint_elsewhere_is_reached_over_a_port_of_the_sandbox() -> None:
    remote = Endpoint(url="https://gateway.example/anthropic", key_env="GATEWAY_KEY")
    spec = AgentSpec(kind="claude-code", endpoint=remote)
    seen = behind_egress(spec)
    assert seen.endpoint == Endpoint(
        url=f"http://127.0.0.1:{ENDPOINT_PORT}/anthropic", key_env="GATEWAY_KEY"
    )
    routes = egress_routes(spec, {"ANTHROPIC_BASE_URL": seen.endpoint.url})  # type: ignore[union-attr]
    assert routes.reverse == ((ENDPOINT_PORT, remote.url),)
    assert routes.forwards == () and routes.allow == ()


# --- The server, on real sockets ---------------------------------------------------------


class Recorder(BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Recorder.seen.append({**dict(self.headers.items()), "body": body.decode()})
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    Recorder.seen.clear()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def serving(tmp_path: Path, upstream: int, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Egress's server on a socket, in a thread of ours (its parent: this process)."""
    monkeypatch.setattr(egress, "HEAD_SECONDS", 0.3)
    served = egress.Egress(
        3128,
        [f"127.0.0.1:{upstream}"],
        {},
        {3127: f"http://127.0.0.1:{upstream}"},
        "sk-real",
    )
    path = str(tmp_path / "e.sock")
    listener = egress._listen(path)
    thread = threading.Thread(target=served.serve, args=(listener, os.getppid()))
    thread.start()
    yield path
    listener.close()
    thread.join()


def ask(path: str, data: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(5)
        client.connect(path)
        client.sendall(data)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
        return answer


def test_the_proxy_refuses_another_port_of_the_allowed_host(serving: str, upstream: int) -> None:
    answer = ask(serving, f"3128\nCONNECT 127.0.0.1:{upstream + 1} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403 Forbidden")
    assert f"allowed: 127.0.0.1:{upstream}".encode() in answer
    answer = ask(serving, b"3128\nGET http://127.0.0.1/ HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403") and b"only CONNECT" in answer
    answer = ask(serving, b"3128\nCONNECT \x1b]2;owned\x07:443 HTTP/1.1\r\n\r\n")
    assert b"kairo egress: ?]2;owned?:443 is not the model endpoint" in answer  # nothing raw


def test_a_tunnel_to_the_allowed_host_carries_the_agent_s_bytes(
    serving: str, upstream: int
) -> None:
    request = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"
    answer = ask(serving, f"3128\nCONNECT 127.0.0.1:{upstream} HTTP/1.1\r\n\r\n".encode() + request)
    assert answer.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.0 200")
    assert Recorder.seen[-1]["body"] == "hi"


def test_the_reverse_proxy_sends_the_key_the_agent_never_had(serving: str, upstream: int) -> None:
    request = (
        f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3127\r\nx-api-key: {KEY_STAND_IN}\r\n"
        f"Content-Length: 12\r\n\r\n{KEY_STAND_IN[:12]}"
    )
    answer = ask(serving, f"3127\n{request}".encode())
    assert answer.endswith(b"ok")
    seen = Recorder.seen[-1]
    assert seen["x-api-key"] == "sk-real" and seen["Host"] == f"127.0.0.1:{upstream}"
    assert seen["body"] == KEY_STAND_IN[:12]  # the body is the agent's, as it sent it


def test_a_client_that_never_asks_is_let_go_and_its_thread_ends(serving: str) -> None:
    before = threading.active_count()
    silent = [socket.socket(socket.AF_UNIX) for _ in range(5)]
    for client in silent:
        client.connect(serving)
        client.send(b"3128\nCONNECT ")  # and nothing more
    time.sleep(0.1)
    assert threading.active_count() == before + 5
    for client in silent:
        client.settimeout(5)
        assert client.recv(100) == b""  # closed by egress, its head timeout past
        client.close()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() == before


def test_a_client_sending_its_request_a_byte_at_a_time_is_let_go_all_the_same(
    serving: str,
) -> None:
    started = time.monotonic()
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(serving)
        client.settimeout(5)
        try:
            for byte in b"3128\nCONNECT api.anthropic.com:443 HTTP/1.1\r\n":
                client.send(bytes([byte]))
                time.sleep(0.05)  # each byte within the head's time, the whole not
        except OSError:
            pass  # closed under it: what the test wants
        assert client.recv(100) == b""
    assert time.monotonic() - started < 2


def test_an_unknown_port_line_is_closed_at_once(serving: str) -> None:
    assert ask(serving, b"22\nSSH-2.0\r\n") == b""
    assert ask(serving, b"not a port\n") == b""


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl to make a certificate")
def test_an_https_endpoint_is_reached_over_tls_its_certificate_checked(
    tmp_path: Path, upstream: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    request_certificate = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes"]
    names = ["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"]
    subprocess.run(
        [*request_certificate, "-days", "1", "-keyout", str(key), "-out", str(cert), *names],
        check=True,
        capture_output=True,
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    port = server.server_address[1]
    served = egress.Egress(3128, [], {}, {3127: f"https://localhost:{port}/v1"}, "sk-real")
    path = str(tmp_path / "e.sock")
    listener = egress._listen(path)
    serving = threading.Thread(target=served.serve, args=(listener, os.getppid()))
    serving.start()
    request = (
        f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3127\r\n"
        f"Authorization: Bearer {KEY_STAND_IN}\r\nContent-Length: 2\r\n\r\nhi"
    )
    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the one authority egress trusts here
        assert ask(path, f"3127\n{request}".encode()).endswith(b"ok")
        assert Recorder.seen[-1]["Authorization"] == "Bearer sk-real"
        assert Recorder.seen[-1]["Host"] == f"localhost:{port}"
        monkeypatch.delenv("SSL_CERT_FILE")  # a certificate no authority signed: refused
        assert ask(path, f"3127\n{request}".encode()) == b""
        assert len(Recorder.seen) == 1
    finally:
        listener.close()
        serving.join()
        server.shutdown()
        server.server_close()
        thread.join()
