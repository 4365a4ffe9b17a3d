"""Under bwrap an agent writes its own worktree and nothing else; secrets stay home.

The crafted ways out (a remount, host sockets, the objects, other processes, the user's
home and coding agents' settings) are attacks, in tests/attack/test_sandbox_escapes.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git, snapshot_checkout
from tests.sandboxing import require_sandbox

pytestmark = pytest.mark.slow

ESCAPES = """\
version: 1
name: jail
max_parallel: 12
limits: {{max_attempts: 1}}
sandbox: {{kind: bwrap, network: false, pass_env: [PASSED_TOKEN]}}
agent: {{kind: shell, run: 'true'}}
subtasks:
  - id: honest
    agent:
      run: 'sleep 2; echo "token=$PASSED_TOKEN hidden=$HIDDEN_TOKEN" > honest.txt; git status --short > status.txt; mkdir -p "$HOME/.claude" && echo planted > "$HOME/.claude/settings.json"'
  - id: committer
    agent:
      run: 'echo c > c.txt && git add c.txt && git -c user.name=a -c user.email=a@b commit -qm mine && git rev-parse HEAD > agent-commit.txt'
  - id: main-writer
    agent: {{run: 'echo evil > {repo}/evil.txt'}}
  - id: sibling-writer
    agent: {{run: 'sleep 1; echo evil > ../honest/evil.txt'}}
  - id: dialer
    agent: {{run: 'python3 -c "import socket; socket.create_connection((\\"127.0.0.1\\", 5432), 2)"'}}
"""


def test_an_agent_writes_its_own_worktree_and_nothing_else(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    require_sandbox()
    home = tmp_path / "home"
    home.mkdir()
    kairo.env.update({"PASSED_TOKEN": "yes", "HIDDEN_TOKEN": "leaked", "HOME": str(home)})
    before = snapshot_checkout(repo)

    plan = ESCAPES.format(repo=repo)
    done = kairo.run("start", str(kairo.write_plan(plan)), "--wait")

    assert done.returncode == 1, done.stderr
    subtasks = {s["id"]: s for s in kairo.json("status")["subtasks"]}
    branch = kairo.json("status")["integration_branch"]
    for honest in ("honest", "committer"):
        assert subtasks[honest]["state"] == "merged", subtasks[honest]
    assert git(repo, "show", f"{branch}:honest.txt") == "token=yes hidden=\n"
    # Its own git works in its worktree; its commit is its own business, thrown away: the
    # supervisor commits the files it left.
    assert git(repo, "show", f"{branch}:c.txt") == "c\n"
    agent_commit = git(repo, "show", f"{branch}:agent-commit.txt").strip()
    assert len(agent_commit) == 40
    found = subprocess.run(["git", "cat-file", "-e", agent_commit], cwd=repo, check=False)
    assert found.returncode != 0  # not in the repository's objects
    escapers = ("main-writer", "sibling-writer", "dialer")
    for escaper in escapers:
        assert subtasks[escaper]["state"] == "failed", subtasks[escaper]
        assert "agent_failed" in subtasks[escaper]["reason"]
    report = kairo.json("report")
    tails = {item["id"]: item["output_tail"] for item in report["failed"]}
    assert "Read-only file system" in tails["main-writer"]
    assert "Directory nonexistent" in tails["sibling-writer"]  # it sees no other worktree
    assert "evil.txt" not in git(repo, "ls-tree", "-r", "--name-only", branch)
    assert "Network is unreachable" in tails["dialer"] or "Errno" in tails["dialer"]
    # the user's home is not the agent's: not written
    assert not (home / ".claude").exists()
    assert snapshot_checkout(repo) == before

    # its sessions and scratch are kept until `clean`, which removes them
    run_root = Path(kairo.json("status")["run_root"])
    assert (run_root / "honest" / "agent-state").is_dir()
    assert (run_root / "honest" / "1" / "scratch" / "objects").is_dir()
    cleaned = kairo.run("clean", "--force")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not (run_root / "honest" / "agent-state").exists()
    assert not (run_root / "committer" / "1" / "scratch").exists()
    assert (run_root / "honest" / "1" / "output.log").exists()  # the record stays


def test_a_sandboxed_shell_agent_claims_its_usage_and_writes_nothing_beside_it(
    kairo: Kairo,
) -> None:
    # A shell agent has no filter to count for it: its usage file is its to write, as its
    # word, and the rest of its run folder (the live count, the runner's records) is not.
    run = """\
echo '{"input_tokens": 5, "output_tokens": 1}' >> "$KAIRO_USAGE_FILE"
echo '{}' > "$KAIRO_USAGE_FILE.live" || echo live refused
touch "$(dirname "$KAIRO_USAGE_FILE")/exit.json" || echo records refused
echo mine > "$TMPDIR/mine" && echo ok > ok.txt
"""
    script = "".join(f"      {line}\n" for line in run.splitlines())
    plan = (
        "version: 1\nname: claims\nsandbox: {kind: bwrap}\n"
        f"agent:\n  kind: shell\n  run: |\n{script}subtasks:\n  - id: claimer\n"
    )

    done = kairo.run("start", str(kairo.write_plan(plan)), "--wait")

    assert done.returncode == 0, kairo.run("report").stdout
    view = kairo.json("status")["subtasks"][0]
    assert (view["input_tokens"], view["output_tokens"]) == (5, 1)
    log = (Path(kairo.json("status")["run_root"]) / "claimer" / "1" / "output.log").read_text()
    assert "live refused" in log and "records refused" in log, log
