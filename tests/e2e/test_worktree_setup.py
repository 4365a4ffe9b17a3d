"""A new worktree gets the main checkout's untracked files, its setup, and ports of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git, snapshot_checkout

pytestmark = pytest.mark.slow

SETUP_PLAN = """\
version: 1
name: setup
worktree:
  copy_files: [.env, "config/*.local"]
  setup: "mkdir -p deps && echo installed > deps/marker && echo $KAIRO_PORT"
  port_base: 31000
  ports: 5
agent:
  kind: shell
  run: 'cat .env config/app.local deps/marker > $KAIRO_SUBTASK_ID.txt; echo $KAIRO_PORT >> $KAIRO_SUBTASK_ID.txt'
subtasks:
  - id: one
  - id: two
"""


def test_copied_files_setup_and_ports_reach_the_agent_and_stay_out_of_its_commits(
    kairo: Kairo, repo: Path
) -> None:
    (repo / ".gitignore").write_text("deps/\n*.local\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore deps")
    (repo / ".env").write_text("SECRET=1\n")  # untracked, not ignored: the hard case
    (repo / "config").mkdir()
    (repo / "config" / "app.local").write_text("local=yes\n")  # ignored: the usual one
    before = snapshot_checkout(repo)

    done = kairo.run("start", str(kairo.write_plan(SETUP_PLAN)), "--wait")

    assert done.returncode == 0, done.stderr
    status = kairo.json("status")
    branch = status["integration_branch"]
    for sid, port in (("one", "31000"), ("two", "31005")):
        seen = git(repo, "show", f"{branch}:{sid}.txt")
        assert seen == f"SECRET=1\nlocal=yes\ninstalled\n{port}\n"
    # the copies are nobody's work: on no branch, in no commit
    assert sorted(git(repo, "ls-tree", "-r", "--name-only", branch).split()) == [
        ".gitignore",
        "README.md",
        "one.txt",
        "two.txt",
    ]
    # setup ran once per worktree (what it printed: it may write nothing outside it)
    run_root = Path(kairo.json("report")["run_root"])
    for sid, port in (("one", "31000"), ("two", "31005")):
        assert (run_root / sid / "setup.log").read_text() == f"{port}\n"
    assert snapshot_checkout(repo) == before


def test_a_failing_setup_fails_its_subtask_with_setup_failed(kairo: Kairo, repo: Path) -> None:
    plan = kairo.write_plan(
        "version: 1\nname: broken\nworktree: {setup: 'echo no package.json here; exit 4'}\n"
        "agent: {kind: shell, run: 'echo x > x.txt'}\nsubtasks:\n  - id: a\n"
    )
    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 1, done.stderr
    (view,) = kairo.json("status")["subtasks"]
    assert view["state"] == "failed" and view["attempts"] == 0
    assert view["reason"].startswith(
        "setup_failed: `echo no package.json here; exit 4` exited with status 4 in the new "
        "worktree of a (no package.json here); its output is in "
    )


def test_a_copy_files_pattern_that_matches_nothing_is_warned_of(kairo: Kairo, repo: Path) -> None:
    (repo / ".env").write_text("SECRET=1\n")
    plan = kairo.write_plan(
        "version: 1\nname: copies\nworktree: {copy_files: [.env, README.md, missing.txt]}\n"
        "agent: {kind: shell, run: 'echo x > x.txt'}\nsubtasks:\n  - id: a\n"
    )

    done = kairo.run("validate", str(plan))

    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stdout.splitlines() if line.startswith("warning:")]
    assert [line.split("'")[1] for line in warned] == ["README.md", "missing.txt"]  # tracked
    assert "matches no file of the checkout" in warned[0]
