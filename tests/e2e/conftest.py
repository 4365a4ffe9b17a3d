"""End to end: the real `kairo-orch` command, real git, a private tmux server, real agents."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

COMMAND_TIMEOUT_S = 120


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


@dataclass
class Kairo:
    """Runs `kairo-orch` in a repository, as a user would from a shell."""

    repo: Path
    env: dict[str, str]
    socket: str

    def run(
        self, *args: str, timeout: float = COMMAND_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orchestrator.cli.main", *args],
            cwd=self.repo,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        """The command started, not waited for (`--wait`): its stderr piped."""
        return subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli.main", *args],
            cwd=self.repo,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )

    def json(self, *args: str) -> Any:
        done = self.run(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], env=self.env, capture_output=True, text=True
        )

    def tmux_sessions(self) -> list[str]:
        done = self.tmux("list-sessions", "-F", "#{session_name}")
        return done.stdout.split() if done.returncode == 0 else []

    def write_plan(self, text: str, name: str = "plan.yaml") -> Path:
        # Outside the repository, so that the plan file is no change of the user's own.
        path = self.repo.parent / name
        path.write_text(text, encoding="utf-8")
        return path


def shared_with_agents(*paths: Path) -> str:
    """The plan line by which a test's agents, sandboxed as by default, reach the test's
    own files outside their worktree: what they wait on, what they report to."""
    return "sandbox: {writable: [" + ", ".join(str(path) for path in paths) + "]}\n"


def snapshot_checkout(repo: Path) -> dict[str, str]:
    """Everything of the user's checkout that kairo-orch must leave alone, byte for byte."""
    digest: dict[str, str] = {}
    for path in sorted(repo.rglob("*")):
        relative = path.relative_to(repo)
        if relative.parts[0] == ".git" or not path.is_file():
            continue
        digest[str(relative)] = hashlib.sha256(path.read_bytes()).hexdigest()
    digest[".git/HEAD"] = (repo / ".git" / "HEAD").read_text()
    digest[".git/index"] = hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest()
    digest["head commit"] = git(repo, "rev-parse", "HEAD")
    digest["status"] = git(repo, "status", "--porcelain=v1", "--untracked-files=all")
    return digest


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return new_repository(tmp_path / "project")


def new_repository(root: Path) -> Path:
    """A git repository at `root` (made here) with one commit on `main`."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test User")
    git(root, "config", "user.email", "test@example.com")
    (root / "README.md").write_text("project\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial")
    return root


@pytest.fixture
def kairo(repo: Path) -> Iterator[Kairo]:
    socket = f"kairo-e2e-{uuid.uuid4().hex[:10]}"
    tmux_dir = tempfile.mkdtemp(prefix="kairo-tmux-", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAIRO_", "TMUX", "GIT_"))}
    env.update({"KAIRO_TMUX_SOCKET": socket, "TMUX_TMPDIR": tmux_dir})
    runner = Kairo(repo=repo, env=env, socket=socket)
    yield runner
    _stop_supervisors(runner)
    runner.tmux("kill-server")
    deadline = time.monotonic() + 5
    while runner.tmux("has-session").returncode == 0 and time.monotonic() < deadline:
        time.sleep(0.02)  # kill-server returns before the server is gone
    shutil.rmtree(tmux_dir, ignore_errors=True)


def _stop_supervisors(runner: Kairo) -> None:
    done = runner.run("list", "--json")
    if done.returncode != 0:
        return
    for item in json.loads(done.stdout):
        if item["status"] == "RUNNING":
            status = runner.json("status", item["execution_id"])
            if status["supervisor_pid"]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(status["supervisor_pid"], signal.SIGKILL)


def live_view(kairo: Kairo, session: str, showing: str, seconds: float = 20) -> list[int]:
    """Once the session's live view shows `showing`: the pids of its pane's processes, the
    gate's shell first. Fails with the pane's text if it never does."""
    deadline = time.monotonic() + seconds
    while True:
        view = kairo.tmux("capture-pane", "-p", "-t", f"={session}:supervisor").stdout
        if showing in view:
            break
        assert time.monotonic() < deadline, f"the live view never showed {showing!r}:\n{view}"
        time.sleep(0.1)
    pane_pid = kairo.tmux("display-message", "-p", "-t", f"={session}:supervisor", "#{pane_pid}")
    return process_tree(int(pane_pid.stdout))


def process_tree(root: int) -> list[int]:
    """`root` and its descendants alive now, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def run_to_its_end(kairo: Kairo, name: str, *subtask_ids: str) -> None:
    """A plan of `subtask_ids` (one, `a`, by default) whose agents write a file each, run to
    its end: the repository's newest execution, ended COMPLETED."""
    ids = subtask_ids or ("a",)
    plan = kairo.write_plan(
        f"version: 1\nname: {name}\nagent: {{kind: shell, run: 'echo x > $KAIRO_SUBTASK_ID'}}\n"
        "subtasks:\n" + "".join(f"  - id: {sid}\n" for sid in ids),
        f"{name}.yaml",
    )
    done = kairo.run("start", str(plan), "--wait")
    assert done.returncode == 0, done.stderr
