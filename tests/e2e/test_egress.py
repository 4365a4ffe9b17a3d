"""Under bwrap an agent reaches its model endpoint and nothing else (agents/egress.py), and
an endpoint's key is added outside the sandbox: the agent never holds it."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agents.egress import KEY_STAND_IN
from tests.e2e import python_project as shop
from tests.e2e.conftest import Kairo, git
from tests.model_server import Script, serve
from tests.real_agents import AIDER, CLAUDE, CODEX, installed

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("bwrap_runs"),
]


class Recorder(BaseHTTPRequestHandler):
    """A model endpoint on this machine that answers anything and keeps what it was sent."""

    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def _answer(self) -> None:
        Recorder.seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
        self.send_response(200)
        self.send_header("Content-Length", "9")
        self.end_headers()
        self.wfile.write(b"answered\n")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def endpoints() -> Iterator[tuple[int, int]]:
    """Two servers of the host: the agent's endpoint, and another it must not reach (on
    every address of the host, its loopback and the rest)."""
    servers = [ThreadingHTTPServer((host, 0), Recorder) for host in ("127.0.0.1", "0.0.0.0")]
    threads = [
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}) for s in servers
    ]
    for thread in threads:
        thread.start()
    Recorder.seen.clear()
    yield servers[0].server_address[1], servers[1].server_address[1]
    for server in servers:
        server.shutdown()
        server.server_close()
    for thread in threads:
        thread.join()


# What the agent tries, each line's outcome written to reached.txt: through the CONNECT
# proxy to its endpoint and to another port; straight to its endpoint (its URL unchanged),
# to the other server on the loopback and on the host's own address.
PROBE = r"""
import os, socket, sys, urllib.parse
allowed, other = int(sys.argv[1]), int(sys.argv[2])
host_address = sys.argv[3]
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])

def rest(s):
    data = b""
    while chunk := s.recv(1000):
        data += chunk
    return data.decode()

def last_line(text):
    return text.strip().splitlines()[-1]

def tunnel(port):
    with socket.create_connection((proxy.hostname, proxy.port), 5) as s:
        s.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        answer = s.recv(1000).decode()
        if " 200 " not in answer.split("\r\n")[0]:  # refused: the rest is its reason, then EOF
            return answer.split("\r\n")[0] + " | " + last_line(answer + rest(s))
        s.sendall(b"GET /tunnelled HTTP/1.0\r\n\r\n")
        return "tunnel " + last_line(rest(s))

def direct(host, port):
    try:
        with socket.create_connection((host, port), 5) as s:
            s.sendall(b"GET /direct HTTP/1.0\r\n\r\n")
            return "direct " + last_line(rest(s))
    except OSError as exc:
        return f"direct failed: {exc.strerror}"

print("endpoint:", tunnel(allowed))
print("other port:", tunnel(other))
print("endpoint direct:", direct("127.0.0.1", allowed))
print("other direct:", direct("127.0.0.1", other))
print("host address:", direct(host_address, other) if host_address else "direct failed: none")
"""


def host_address() -> str:
    """An address of this machine other than its loopback, '' where it has none."""
    found = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    return next((a for a in found if "." in a and not a.startswith("127.")), "")


def test_a_sandboxed_agent_reaches_its_endpoint_and_nothing_else(
    kairo: Kairo, repo: Path, tmp_path: Path, endpoints: tuple[int, int]
) -> None:
    allowed, other = endpoints
    (repo / "probe.py").write_text(PROBE)  # in its worktree: the sandbox hides the rest
    git(repo, "add", "probe.py")
    git(repo, "commit", "-qm", "probe")
    kairo.env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{allowed}"
    run = f"python3 probe.py {allowed} {other} '{host_address()}' > reached.txt 2>&1"
    plan = (
        "version: 1\nname: egress\nlimits: {max_attempts: 1}\nsandbox: {kind: bwrap}\n"
        f"agent: {{kind: shell, run: {json.dumps(run)}}}\nsubtasks: [{{id: prober}}]\n"
    )
    done = kairo.run("start", str(kairo.write_plan(plan)), "--wait")

    assert done.returncode == 0, kairo.run("report").stdout
    branch = kairo.json("status")["integration_branch"]
    reached = dict(
        line.split(": ", 1) for line in git(repo, "show", f"{branch}:reached.txt").splitlines()
    )
    assert reached["endpoint"] == "tunnel answered"
    assert reached["other port"] == (
        f"HTTP/1.1 403 Forbidden | kairo egress: 127.0.0.1:{other} is not the model endpoint; "
        f"allowed: 127.0.0.1:{allowed}"
    )
    assert reached["endpoint direct"] == "direct answered"
    assert reached["other direct"] == "direct failed: Connection refused"
    assert reached["host address"] in (
        "direct failed: Network is unreachable",
        "direct failed: none",
    )
    assert [seen["path"] for seen in Recorder.seen] == ["/tunnelled", "/direct"]


STAND_IN = r"""#!/usr/bin/env python3
# A claude-code that sends one request to its endpoint with the key it was given, keeps
# what it could find of that key, and ends with the result event Claude Code prints.
import glob, json, os, urllib.request
request = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    data=b"{}",
    headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"]},
)
answer = urllib.request.urlopen(request, timeout=10).read().decode()
seen = []
for path in glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline"):
    try:
        seen.append(open(path, "rb").read().decode("utf-8", "replace"))
    except OSError:
        pass
with open("found.json", "w") as out:
    json.dump({"env": dict(os.environ), "answer": answer, "processes": seen}, out)
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "done",
                  "session_id": "s", "num_turns": 1, "usage": {"input_tokens": 1, "output_tokens": 1}}))
"""


def test_an_endpoint_s_key_is_added_outside_and_the_agent_never_holds_it(
    kairo: Kairo, repo: Path, tmp_path: Path, endpoints: tuple[int, int]
) -> None:
    allowed, _ = endpoints
    program = tmp_path / "bin" / "claude"  # a folder of its own, bound into the sandbox
    program.parent.mkdir()
    program.write_text(STAND_IN)
    program.chmod(0o755)
    key = "sk-ant-api03-Gq7Lp2Vx9Rt4Kw8Nz3Hy6Bm1Jc5Fd0Se"
    kairo.env["GATEWAY_KEY"] = key
    endpoint = f"{{url: 'http://127.0.0.1:{allowed}', key_env: GATEWAY_KEY}}"
    plan = (
        "version: 1\nname: keyed\nlimits: {max_attempts: 1}\nsandbox: {kind: bwrap}\n"
        f"agent: {{kind: claude-code, binary: {program}, endpoint: {endpoint}}}\n"
        "subtasks: [{id: asker, prompt: ask}]\n"
    )
    done = kairo.run("start", str(kairo.write_plan(plan)), "--wait")

    assert done.returncode == 0, kairo.run("report").stdout
    assert [seen["x-api-key"] for seen in Recorder.seen] == [key]  # the endpoint got it
    branch = kairo.json("status")["integration_branch"]
    found = json.loads(git(repo, "show", f"{branch}:found.json"))
    assert found["answer"] == "answered\n"
    assert found["env"]["ANTHROPIC_API_KEY"] == KEY_STAND_IN
    assert key not in json.dumps(found)  # not in its environment, nor any process it sees


@pytest.mark.parametrize("pointed", ["by its base URL", "by the plan's endpoint and key"])
def test_a_real_claude_code_in_the_sandbox_reaches_its_model_and_finishes(
    kairo: Kairo, repo: Path, tmp_path: Path, pointed: str
) -> None:
    claude = installed(CLAUDE)
    shop.make_project(repo)
    home = tmp_path / "agent-home"
    home.mkdir()
    kairo.env["HOME"] = str(home)
    script = shop.script_for("rename-a", *shop.turns(shop.claude_rename("a")))
    key = "sk-ant-api03-Tz5Qm8Wc1Xv4Bn7Lk2Jh9Gf6Ds3Ap0Ry"
    with serve(script) as server:
        agent = f"kind: claude-code, binary: {claude}"
        if pointed == "by its base URL":
            kairo.env.update(server.claude_env())  # as the other real-agent tests are
        else:
            kairo.env.update(GATEWAY_KEY=key, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
            agent += f", endpoint: {{url: '{server.url}', key_env: GATEWAY_KEY}}"
        plan = (
            f"version: 1\nname: sandboxed\nverify: {json.dumps(shop.SUITE)}\n"
            f"sandbox: {{kind: bwrap}}\nagent: {{{agent}}}\n"
            f"subtasks: [{{id: rename-a, prompt: {json.dumps(shop.prompt('a'))}}}]\n"
        )
        done = kairo.run("start", str(kairo.write_plan(plan)), "--wait", timeout=400)

    assert done.returncode == 0, kairo.run("report").stdout
    view = kairo.json("status")["subtasks"][0]
    assert view["state"] == "merged" and view["attempts"] == 1, view
    assert shop.renamed(repo, kairo.json("status")["integration_branch"], "a")
    keys = {e.headers.get("x-api-key") for e in server.exchanges("rename-a")}
    assert keys == ({"sk-ant-scripted"} if pointed == "by its base URL" else {key}), keys


def test_a_real_aider_in_the_sandbox_reaches_the_plan_s_endpoint_its_key_added_outside(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    aider = installed(AIDER)
    shop.make_project(repo)
    home = tmp_path / "agent-home"
    home.mkdir()
    kairo.env["HOME"] = str(home)
    key = "sk-proj-Vb6Nx2Qc9Lm4Wd7Kf1Hs8Gj3Pt5Ry0Za"
    kairo.env["GATEWAY_KEY"] = key
    script = Script(shop.aider_rename("b"), match=shop.prompt("b"), name="by-aider")
    with serve(script) as server:
        endpoint = f"{{url: '{server.url}/v1', key_env: GATEWAY_KEY}}"
        plan = (
            f"version: 1\nname: sandboxed\nverify: {json.dumps(shop.SUITE)}\n"
            "sandbox: {kind: bwrap}\n"
            f"agent: {{kind: aider, binary: {aider}, model: scripted, endpoint: {endpoint},"
            " extra_args: [--edit-format, diff], env: {LITELLM_LOCAL_MODEL_COST_MAP: 'True'}}\n"
            f"subtasks:\n  - id: by-aider\n    prompt: {json.dumps(shop.prompt('b'))}\n"
            f"    files: [{shop.module('b')}, {shop.test_file('b')}]\n"
        )
        done = kairo.run("start", str(kairo.write_plan(plan)), "--wait", timeout=400)

    assert done.returncode == 0, kairo.run("report").stdout
    assert shop.renamed(repo, kairo.json("status")["integration_branch"], "b")
    keys = {
        value
        for e in server.exchanges("by-aider")
        for name, value in e.headers.items()
        if name.lower() == "authorization"
    }
    assert keys == {f"Bearer {key}"}, keys


def test_a_real_codex_in_the_sandbox_reaches_the_plan_s_endpoint_its_key_added_outside(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    codex = installed(CODEX)
    shop.make_project(repo)
    home = tmp_path / "agent-home"
    home.mkdir()
    kairo.env["HOME"] = str(home)
    key = "sk-proj-Mw3Rt8Yb1Nc6Kq9Zd4Jf7Hx2Lp5Gs0Va"
    kairo.env["GATEWAY_KEY"] = key
    script = shop.script_for("by-codex", *shop.turns(shop.codex_rename("a")))
    with serve(script) as server:
        endpoint = f"{{url: '{server.url}/v1', key_env: GATEWAY_KEY}}"
        # its own sandbox (workspace-write) nested in this one
        plan = (
            f"version: 1\nname: sandboxed\nverify: {json.dumps(shop.SUITE)}\n"
            "sandbox: {kind: bwrap}\n"
            f"agent: {{kind: codex, binary: {codex}, model: gpt-5.5, endpoint: {endpoint}}}\n"
            f"subtasks: [{{id: by-codex, prompt: {json.dumps(shop.prompt('a'))}}}]\n"
        )
        done = kairo.run("start", str(kairo.write_plan(plan)), "--wait", timeout=400)

    assert done.returncode == 0, kairo.run("report").stdout
    assert shop.renamed(repo, kairo.json("status")["integration_branch"], "a")
    keys = {e.headers.get("authorization") for e in server.exchanges("by-codex")}
    assert keys == {f"Bearer {key}"}, keys
