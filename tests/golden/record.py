"""Record a golden log: `python -m tests.golden.record NAME`, one of RECORDINGS.

Runs a real execution (shell agents, real git and tmux, the SQLite store) in a scratch
project and keeps its log and what it folds to in tests/golden/NAME/ (logs.py). Record a
log once, when a kind of execution has none yet; never again to make a test pass: a golden
log that no longer folds as it did is an upgrade that breaks users' executions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.runtime.state_reader import read_state
from orchestrator.store.sqlite import SqliteStore
from tests.golden import logs

AGENT = "agent: {kind: shell, run: 'echo $KAIRO_SUBTASK_ID > $KAIRO_SUBTASK_ID.txt'}\n"


class Scratch:
    def __init__(self, root: Path) -> None:
        self.repo = root / "project"
        self.repo.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("KAIRO_", "TMUX"))}
        self.env.update(KAIRO_TMUX_SOCKET=f"kairo-golden-{os.getpid()}", TMUX_TMPDIR=str(root))
        for args in (
            ["init", "-q", "-b", "main"],
            ["config", "user.name", "Golden"],
            ["config", "user.email", "golden@example.com"],
        ):
            self.git(*args)
        (self.repo / "f.txt").write_text("one\ntwo\nthree\n")
        self.git("add", ".")
        self.git("commit", "-q", "-m", "a project")

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.repo, check=True, capture_output=True, text=True
        ).stdout

    def kairo(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orchestrator.cli.main", *args],
            cwd=self.repo, env=self.env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    def plan(self, text: str) -> str:
        path = self.repo.parent / "plan.yaml"
        path.write_text(text)
        return str(path)

    def status(self) -> dict[str, object]:
        return dict(json.loads(self.kairo("status", "--json").stdout))

    def until(self, predicate: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 60
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError("the execution never got there")
            time.sleep(0.1)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.env["KAIRO_TMUX_SOCKET"], "kill-server"],
                       env=self.env, capture_output=True, check=False)  # fmt: skip


def completed(s: Scratch) -> None:
    """Three subtasks, one after another, all merged."""
    plan = s.plan(
        "version: 1\nname: golden-completed\n" + AGENT + "subtasks:\n  - id: a\n"
        "  - id: b\n    depends_on: [a]\n  - id: c\n    depends_on: [b]\n"
    )
    s.kairo("start", plan, "--wait")


def paused(s: Scratch) -> None:
    """Two agents running when their supervisor was killed with -9."""
    plan = s.plan(
        "version: 1\nname: golden-paused\n"
        "agent: {kind: shell, run: 'sleep 60; echo x > $KAIRO_SUBTASK_ID.txt'}\n"
        "subtasks:\n  - id: left\n  - id: right\n"
    )
    s.kairo("start", plan, "--detach")
    runs = s.repo / ".git" / "kairo" / "runs"
    s.until(lambda: len(list(runs.glob("*/*/*/started.json"))) == 2)
    pid = s.status()["supervisor_pid"]
    assert isinstance(pid, int)
    os.kill(pid, signal.SIGKILL)
    s.until(lambda: s.status()["status"] == "PAUSED")


def stopped(s: Scratch) -> None:
    """Stopped gracefully while one subtask ran and another waited for it."""
    plan = s.plan(
        "version: 1\nname: golden-stopped\n"
        "agent: {kind: shell, run: 'sleep 2; echo x > $KAIRO_SUBTASK_ID.txt'}\n"
        "subtasks:\n  - id: first\n  - id: then\n    depends_on: [first]\n"
    )
    s.kairo("start", plan, "--detach")
    runs = s.repo / ".git" / "kairo" / "runs"
    s.until(lambda: len(list(runs.glob("*/*/*/started.json"))) == 1)
    s.kairo("stop", "--wait")


def conflicts_and_retries(s: Scratch) -> None:
    """A conflict between two subtasks, a verify that fails once and then passes, and an
    agent that changes nothing until it has no attempts left."""
    marker = s.repo.parent / "tried"
    plan = s.plan(
        "version: 1\nname: golden-conflicts\nmax_parallel: 1\n" + AGENT + "subtasks:\n"
        "  - id: one\n    agent: {run: \"sed -i 's/^one$/ONE/' f.txt\"}\n"
        "  - id: uno\n    agent: {run: \"sed -i 's/^one$/Uno/' f.txt\"}\n"
        "  - id: twice\n    verify: test -f done.txt\n"
        f"    agent: {{run: 'if [ -e {marker} ]; then echo ok > done.txt;"
        f" else touch {marker}; echo half > half.txt; fi'}}\n"
        "  - id: idle\n    limits: {max_attempts: 2}\n    agent: {run: 'true'}\n"
    )
    s.kairo("start", plan, "--wait")


def reasons_v2(s: Scratch) -> None:
    """Schema version 2, whose reasons are codes with a detail: a verify that always
    fails (max_attempts), the subtask that depends on it (skipped), a conflict, an agent
    that changes nothing (no_changes), and one that fails (agent_failed)."""
    plan = s.plan(
        "version: 1\nname: golden-reasons\nmax_parallel: 1\n" + AGENT + "subtasks:\n"
        "  - id: broken\n    verify: 'false'\n    limits: {max_attempts: 2}\n"
        "    agent: {run: 'echo x > broken.txt'}\n"
        "  - id: after\n    depends_on: [broken]\n"
        "  - id: one\n    agent: {run: \"sed -i 's/^one$/ONE/' f.txt\"}\n"
        "  - id: uno\n    agent: {run: \"sed -i 's/^one$/Uno/' f.txt\"}\n"
        "  - id: idle\n    limits: {max_attempts: 1}\n    agent: {run: 'true'}\n"
        "  - id: crash\n    limits: {max_attempts: 1}\n    agent: {run: 'exit 3'}\n"
    )
    s.kairo("start", plan, "--wait")


def merge_queue(s: Scratch) -> None:
    """Merges checked in a batch and bisected to the one that broke the check (bad), the
    others made again; two running agents warned of editing the same file (a and c), and
    the conflict that followed resolved by c's agent."""
    done = s.repo.parent / "done"
    done.mkdir()
    s.env["KAIRO_OVERLAP_EVERY"] = "0.3"
    plan = s.plan(
        "version: 1\nname: golden-merge-queue\nmax_parallel: 4\n"
        "integration_verify: 'test ! -f bad.txt || { echo bad.txt breaks it; exit 1; }'\n"
        + AGENT
        + "subtasks:\n"
        f"  - id: head\n    agent: {{run: 'until [ $(ls {done} | wc -l) -ge 3 ]; do sleep 0.1;"
        " done; echo head > head.txt'}\n"
        f"  - id: a\n    agent: {{run: 'echo from a > shared.txt; sleep 2; touch {done}/a'}}\n"
        f"  - id: bad\n    agent: {{run: 'echo x > bad.txt; touch {done}/bad'}}\n"
        "  - id: c\n    resolve_conflicts: agent\n"
        '    agent: {run: \'if grep -q "<<<<<<<" shared.txt 2>/dev/null;'
        ' then printf "from a\\nfrom c\\n" > shared.txt;'
        f" else echo from c > shared.txt; sleep 2; touch {done}/c; fi'}}\n"
    )
    s.kairo("start", plan, "--wait")


def guard_breached(s: Scratch) -> None:
    """Schema version 4: the guard of what the user owns. One agent deletes a branch of
    the user's, one writes into the user's checkout, one leaves both alone."""
    s.git("branch", "feature")
    plan = s.plan(
        "version: 1\nname: golden-guard\nmax_parallel: 1\n" + AGENT + "subtasks:\n"
        "  - id: calm\n"
        "  - id: deleter\n    agent: {run: 'git branch -D feature && echo x > x.txt'}\n"
        "  - id: writer\n    agent: {run: 'top=$(git worktree list --porcelain | sed -n "
        '"1s/^worktree //p"); echo planted >> "$top/f.txt" && echo y > y.txt\'}\n'
    )
    s.kairo("start", plan, "--wait")


def paused_integrating(s: Scratch) -> None:
    """Schema version 6: a merge waiting for its integration check when its supervisor was
    killed with -9 (folded then as `verifying`, the state its own `verify` has; since
    schema version 7's code, as `integrating`)."""
    plan = s.plan(
        "version: 1\nname: golden-integrating\nintegration_verify: 'sleep 20'\n"
        + AGENT
        + "subtasks:\n  - id: merged-first\n"
    )
    s.kairo("start", plan, "--detach")

    def checking() -> bool:
        document = s.status()
        subtasks = document["subtasks"]
        assert isinstance(subtasks, list)
        return bool(document["integration_head"] != document["base_commit"]) and all(
            entry["state"] in ("verifying", "integrating") for entry in subtasks
        )

    s.until(checking)
    pid = s.status()["supervisor_pid"]
    assert isinstance(pid, int)
    os.kill(pid, signal.SIGKILL)
    s.until(lambda: s.status()["status"] == "PAUSED")


def resumed(s: Scratch) -> None:
    """Killed with -9 while its agent ran, resumed a few heartbeats later and completed.
    Recorded at schema version 6 (`resumed`: its `supervisor_started` says nothing of the
    last heartbeat before) and 7 (`resumed_v7`: it does)."""
    plan = s.plan(
        "version: 1\nname: golden-resumed\n"
        "agent: {kind: shell, run: 'sleep 12; echo x > $KAIRO_SUBTASK_ID.txt'}\n"
        "subtasks:\n  - id: across\n"
    )
    s.kairo("start", plan, "--detach")
    runs = s.repo / ".git" / "kairo" / "runs"
    s.until(lambda: len(list(runs.glob("*/*/*/started.json"))) == 1)
    time.sleep(7)  # a heartbeat (every 5 s) after the last event
    pid = s.status()["supervisor_pid"]
    assert isinstance(pid, int)
    os.kill(pid, signal.SIGKILL)
    s.until(lambda: s.status()["status"] == "PAUSED")
    time.sleep(2)
    s.kairo("resume", "--wait")


RECORDINGS: dict[str, Callable[[Scratch], None]] = {
    "completed": completed,
    "paused": paused,
    "stopped": stopped,
    "conflicts_and_retries": conflicts_and_retries,
    "reasons_v2": reasons_v2,
    "merge_queue": merge_queue,
    "guard_breached": guard_breached,
    "paused_integrating": paused_integrating,
    "resumed": resumed,
    "resumed_v7": resumed,
}


def record(name: str) -> Path:
    folder = logs.HERE / name
    if folder.exists():  # a golden log is what an earlier version wrote: never written over
        raise SystemExit(f"{folder} exists; a golden log is recorded once, under a new name")
    with tempfile.TemporaryDirectory(prefix="kairo-golden-", dir="/var/tmp") as root:
        scratch = Scratch(Path(root))
        try:
            RECORDINGS[name](scratch)
            execution_id = str(scratch.status()["execution_id"])
            database = scratch.repo / ".git" / "kairo" / "kairo.db"
            logs.dump(database, execution_id, folder)
            with SqliteStore(database) as store:
                state = read_state(store, execution_id)
                row = store.get_execution(execution_id)
                assert row is not None
        finally:
            scratch.close()
    document, report = logs.folded(state, row)
    (folder / "status.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    (folder / "report.md").write_text(report, encoding="utf-8")
    return folder


if __name__ == "__main__":
    for wanted in sys.argv[1:] or sorted(set(RECORDINGS) - set(logs.golden_names())):
        print(record(wanted))
