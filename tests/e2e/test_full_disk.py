"""A fan-out onto a disk too small for its worktrees: each subtask fails saying the disk
is full, and nothing is left behind; with room, the same plan runs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git, snapshot_checkout
from tests.faults.small_disk import resize, small_disk

pytestmark = pytest.mark.slow

PLAN = """\
version: 1
name: full
worktree_root: {root}
agent: {{kind: shell, run: "echo $KAIRO_SUBTASK_ID > $KAIRO_SUBTASK_ID.txt"}}
subtasks:
  - id: a
  - id: b
  - id: c
  - id: d
"""


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_disk(tmp_path / "disk", "3m") as mounted:
        yield mounted


def test_a_full_disk_fails_the_fan_out_saying_so_and_leaves_nothing(
    kairo: Kairo, disk: Path
) -> None:
    for n in range(4):  # 4 MiB of files: no worktree fits on the disk
        (kairo.repo / f"big{n}.bin").write_bytes(os.urandom(1024**2))
    git(kairo.repo, "add", ".")
    git(kairo.repo, "commit", "-q", "-m", "big files")
    plan = kairo.write_plan(PLAN.format(root=disk / "wt"))
    before = snapshot_checkout(kairo.repo)

    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 1, done.stderr
    status = kairo.json("status")
    reasons = [s["reason"] for s in status["subtasks"]]
    assert all(r.startswith("setup_failed") for r in reasons), reasons
    assert any("is full" in r for r in reasons), reasons
    assert git(kairo.repo, "branch", "--list", "kairo-subtasks/*") == ""
    assert str(disk) not in git(kairo.repo, "worktree", "list")
    # What an older kairo-orch left (a branch a failed create made), `clean` finds too.
    short = status["execution_id"][-6:].lower()
    git(kairo.repo, "branch", f"kairo-subtasks/full/{short}/a", status["base_commit"])
    cleaned = kairo.run("clean")
    assert f"deleted branch kairo-subtasks/full/{short}/a" in cleaned.stdout, cleaned.stdout

    resize(disk, "64m")
    again = kairo.run("start", str(plan), "--wait")
    assert again.returncode == 0, again.stderr
    assert snapshot_checkout(kairo.repo) == before
