"""Where a chaos run happens: a project of its own, kairo-orch run as its user runs it (the
command, in subprocesses), a tmux server of its own, and the counts of what it left.

A run's plan has `subtasks` agents that each note that they ran (one line in a file) and
write a file of their own, so that the tree every run must end with is known beforehand
(`expected_tree`), and an agent run twice shows as a line written twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
COMMAND_TIMEOUT_S = 120
ENDED = ("COMPLETED", "FAILED", "STOPPED")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout


def plan_text(name: str, subtasks: int, runs: Path, sleep_s: float, parallel: int) -> str:
    run = (
        f"echo $KAIRO_SUBTASK_ID >> {runs}; sleep {sleep_s}; "
        "echo $KAIRO_SUBTASK_ID > $KAIRO_SUBTASK_ID.txt"
    )
    ids = "".join(f"  - id: s{n:03d}\n" for n in range(subtasks))
    # The agents, sandboxed as by default, may write the file that counts their runs.
    return (
        f"version: 1\nname: {name}\nmax_parallel: {parallel}\n"
        f"sandbox: {{writable: [{runs}]}}\n"
        f"agent: {{kind: shell, run: {json.dumps(run)}}}\nsubtasks:\n{ids}"
    )


@dataclass
class Run:
    """One plan run in its own copy of the project."""

    lab: Lab
    repo: Path
    runs: Path
    plan: Path
    subtasks: int
    store: str | None = None

    @property
    def env(self) -> dict[str, str]:
        env = dict(self.lab.env)
        if self.store:
            env["KAIRO_STORE"] = self.store
        return env

    def kairo(
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
        return subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli.main", *args],
            cwd=self.repo,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )

    def status(self) -> dict[str, Any] | None:
        done = self.kairo("status", "--json")
        return json.loads(done.stdout) if done.returncode == 0 else None

    def agents_started(self) -> int:
        return len(self.runs.read_text().split()) if self.runs.exists() else 0

    def double_runs(self) -> int:
        noted = Counter(self.runs.read_text().split()) if self.runs.exists() else Counter()
        return sum(n - 1 for n in noted.values() if n > 1)

    def expected_tree(self) -> str:
        """The base's tree with each subtask's file: what a run must end with, found with
        git alone in a scratch index."""
        index = self.repo / ".git" / "chaos-index"
        env = {**os.environ, "GIT_INDEX_FILE": str(index)}

        def plumbing(*args: str, stdin: str | None = None) -> str:
            return subprocess.run(
                ["git", *args], cwd=self.repo, env=env, input=stdin,
                capture_output=True, text=True, check=True,
            ).stdout.strip()  # fmt: skip

        plumbing("read-tree", "HEAD")
        for n in range(self.subtasks):
            sid = f"s{n:03d}"
            blob = plumbing("hash-object", "-w", "--stdin", stdin=f"{sid}\n")
            plumbing("update-index", "--add", "--cacheinfo", f"100644,{blob},{sid}.txt")
        tree = plumbing("write-tree")
        index.unlink()
        return tree

    def tree_of(self, branch: str) -> str:
        return git(self.repo, "rev-parse", f"{branch}^{{tree}}").strip()

    def wait_until(self, predicate: Any, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not happen within {seconds:.0f} s")
            time.sleep(0.1)


@dataclass
class Lab:
    """A directory, a tmux server and a template project for every run of a campaign."""

    root: Path
    socket: str = field(default_factory=lambda: f"kairo-chaos-{uuid.uuid4().hex[:8]}")
    runs_made: int = 0

    def __post_init__(self) -> None:
        # Not in `root`: a socket's path must fit in 108 bytes, and pytest's are long.
        self.tmux_dir = Path(tempfile.mkdtemp(prefix="kairo-chaos-tmux-", dir="/tmp"))
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("KAIRO_", "TMUX", "GIT_"))}
        self.env = {
            **keep,
            "KAIRO_TMUX_SOCKET": self.socket,
            "TMUX_TMPDIR": str(self.tmux_dir),
            "PYTHONPATH": str(ROOT),
        }
        self.template = self.root / "template"
        self.template.mkdir()
        git(self.template, "init", "-q", "-b", "main")
        git(self.template, "config", "user.name", "Chaos")
        git(self.template, "config", "user.email", "chaos@example.com")
        for n in range(20):
            (self.template / f"module{n}.py").write_text(f"VALUE = {n}\n")
        git(self.template, "add", ".")
        git(self.template, "commit", "-q", "-m", "a project")

    def new_run(
        self,
        *,
        subtasks: int,
        sleep_s: float,
        parallel: int = 8,
        store: str | None = None,
        extra: str = "",
    ) -> Run:
        self.runs_made += 1
        where = self.root / f"run-{self.runs_made}"
        repo = where / "project"
        shutil.copytree(self.template, repo)
        runs = where / "agents-ran"
        runs.touch()
        plan = where / "plan.yaml"
        plan.write_text(
            plan_text(f"chaos{self.runs_made}", subtasks, runs, sleep_s, parallel) + extra
        )
        return Run(self, repo, runs, plan, subtasks, store)

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
        )

    def close(self) -> None:
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.tmux("kill-server")
        shutil.rmtree(self.tmux_dir, ignore_errors=True)

    def server_pid(self) -> int | None:
        """Its tmux server's, while it runs (it ends with its last session)."""
        shown = self.tmux("display-message", "-p", "#{pid}")
        return int(shown.stdout) if shown.returncode == 0 and shown.stdout.strip() else None

    def processes(self) -> list[int]:
        """Processes of this lab still alive: whatever runs in or names its directory (a
        supervisor, an agent, a live view), and its tmux server's clients."""
        mine = {os.getpid(), os.getppid()}
        found = []
        needle = str(self.root).encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) in mine:
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes()
                cwd = bytes((proc / "cwd").readlink())
            except OSError:
                continue
            if not cmdline:
                continue  # a zombie
            if needle in cmdline or cwd.startswith(needle) or self.socket.encode() in cmdline:
                found.append(int(proc.name))
        return found


def leaks(run: Run) -> Counter[str]:
    """What a run's `clean` should have removed and did not, and what still runs."""
    left: Counter[str] = Counter()
    listed = git(run.repo, "worktree", "list", "--porcelain").split("\n\n")
    for entry in listed:
        path = entry.partition("\n")[0].removeprefix("worktree ")
        if path and Path(path) != run.repo and "/.spares/" not in path:
            left["worktrees"] += 1
    left["branches"] = len(git(run.repo, "branch", "--list", "kairo-subtasks/*").split())
    panes = run.lab.tmux("list-panes", "-a", "-F", "#{session_name}")
    left["panes"] = len(panes.stdout.split()) if panes.returncode == 0 else 0
    server = run.lab.server_pid()
    alive = [p for p in run.lab.processes() if p != server]
    waiting = [p for p in alive if b"wait-for" in _cmdline(p)]
    left["wait-for clients"] = len(waiting)
    left["processes"] = len(alive) - len(waiting)
    return +left


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
