"""A merge that breaks `integration_verify`, bisected out of a batch by real git, real
tmux and shell agents: `merges_undone` names the merges that go back on the branch, and
they do, right after it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git, shared_with_agents

pytestmark = pytest.mark.slow

# `bad` is first in plan order and waits for the two others to finish, so that the three
# merge in one step, are checked together, and `bad` is the culprit of a batch of three.
PLAN = """\
version: 1
name: bisected
max_parallel: 3
integration_verify: 'test ! -f bad.txt || {{ echo bad.txt breaks it; exit 1; }}'
agent: {{kind: shell, run: "true"}}
subtasks:
  - id: bad
    agent: {{run: 'until [ -e {done}/x ] && [ -e {done}/y ]; do sleep 0.1; done; sleep 1; echo bad > bad.txt'}}
  - id: x
    agent: {{run: 'echo x > x.txt; touch {done}/x'}}
  - id: y
    agent: {{run: 'echo y > y.txt; touch {done}/y'}}
"""


def test_merges_undone_names_the_merges_made_again_and_they_are(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    done = tmp_path / "done"
    done.mkdir()
    plan = kairo.write_plan(PLAN.format(done=done) + shared_with_agents(done))
    finished = kairo.run("start", str(plan), "--wait")
    assert finished.returncode == 1, finished.stderr  # bad failed

    logged = [json.loads(line) for line in kairo.run("events", "--json").stdout.splitlines()]
    (undone,) = [e for e in logged if e["event_type"] == "merges_undone"]
    payload = undone["payload"]
    assert (payload["subtask_ids"], payload["culprit"]) == (["bad", "x", "y"], "bad"), payload
    assert payload["merge_again"] == ["x", "y"]
    merged_after = [
        e["payload"]["subtask_id"]
        for e in logged
        if e["event_type"] == "subtask_merged" and e["seq"] > undone["seq"]
    ]
    assert merged_after == ["x", "y"]
    status = kairo.json("status")
    assert {s["id"]: s["state"] for s in status["subtasks"]} == {
        "bad": "failed",
        "x": "merged",
        "y": "merged",
    }
    branch = status["integration_branch"]
    assert git(repo, "ls-tree", "--name-only", branch).split() == ["README.md", "x.txt", "y.txt"]
