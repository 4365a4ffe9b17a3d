"""Under bwrap an agent writes its own worktree and nothing else; secrets stay home."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git, snapshot_checkout

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

ESCAPES = """\
version: 1
name: jail
max_parallel: 6
limits: {{max_attempts: 1}}
sandbox: {{kind: bwrap, network: false, pass_env: [PASSED_TOKEN]}}
agent: {{kind: shell, run: 'true'}}
subtasks:
  - id: honest
    agent:
      run: 'sleep 2; echo "token=$PASSED_TOKEN hidden=$HIDDEN_TOKEN" > honest.txt; git status --short > status.txt'
  - id: main-writer
    agent: {{run: 'echo evil > {repo}/evil.txt'}}
  - id: sibling-writer
    agent: {{run: 'until [ -d ../honest ]; do sleep 0.1; done; echo evil > ../honest/evil.txt'}}
  - id: dialer
    agent: {{run: 'python3 -c "import socket; socket.create_connection((\\"127.0.0.1\\", 5432), 2)"'}}
  - id: remounter
    agent: {{run: 'mount -o remount,rw / && echo evil > {repo}/remounted.txt'}}
  - id: killer
    agent: {{run: 'kill -0 {outside}'}}
"""


def test_an_agent_writes_its_own_worktree_and_nothing_else(kairo: Kairo, repo: Path) -> None:
    kairo.env.update({"PASSED_TOKEN": "yes", "HIDDEN_TOKEN": "leaked"})
    before = snapshot_checkout(repo)

    plan = ESCAPES.format(repo=repo, outside=os.getpid())  # a process it did not start
    done = kairo.run("start", str(kairo.write_plan(plan)), "--wait")

    assert done.returncode == 1, done.stderr
    subtasks = {s["id"]: s for s in kairo.json("status")["subtasks"]}
    assert subtasks["honest"]["state"] == "merged"
    branch = kairo.json("status")["integration_branch"]
    assert git(repo, "show", f"{branch}:honest.txt") == "token=yes hidden=\n"
    for escaper in ("main-writer", "sibling-writer", "dialer", "remounter", "killer"):
        assert subtasks[escaper]["state"] == "failed"
        assert "agent_failed" in subtasks[escaper]["reason"]
    report = kairo.json("report")
    tails = {item["id"]: item["output_tail"] for item in report["failed"]}
    assert "Read-only file system" in tails["main-writer"]
    assert "Read-only file system" in tails["sibling-writer"]
    assert "evil.txt" not in git(repo, "ls-tree", "-r", "--name-only", branch)
    # as root too: no capability to remount, no process of the machine to see or signal
    assert "permission denied" in tails["remounter"].lower(), tails["remounter"]
    assert not (repo / "remounted.txt").exists()
    assert "No such process" in tails["killer"], tails["killer"]
    assert snapshot_checkout(repo) == before
    assert "Network is unreachable" in tails["dialer"] or "Errno" in tails["dialer"]
