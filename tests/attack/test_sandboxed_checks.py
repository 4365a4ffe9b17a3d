"""Under bwrap the plan's checks run in the agents' sandbox: `verify`, `setup` and
`integration_verify` run scripts an agent rewrote, and what those write outside their
worktree fails; an honest check passes, and counts, as before."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git, snapshot_checkout
from tests.e2e.test_limits import processes_with

pytestmark = [
    pytest.mark.slow,
    pytest.mark.reproduces("36.4"),
    pytest.mark.usefixtures("bwrap_runs"),
]

HONEST_CHECK = 'cat README.md > "$TMPDIR/read" && echo checked\n'
HONEST_SETUP = 'echo set up > "$TMPDIR/setup.log"\n'

# `setup-rewriter` changes the setup script, as any agent may change a file of its branch;
# merged, its script is what `after-setup`'s worktree, made from the branch, is set up with.
CHECKS_AND_SETUP = """\
version: 1
name: checked-in-jail
max_parallel: 3
limits: {{max_attempts: 1}}
sandbox: {{kind: bwrap, network: false, pass_env: [PASSED_TOKEN]}}
worktree: {{setup: sh ./setup.sh}}
agent: {{kind: shell, run: 'true'}}
subtasks:
  - id: honest
    verify: 'test -z "$HIDDEN_TOKEN" && test "$PASSED_TOKEN" = yes && sh ./check.sh'
    agent: {{run: 'echo honest > honest.txt'}}
  - id: verify-escape
    verify: sh ./check.sh
    agent: {{run: '{verify}'}}
  - id: setup-rewriter
    verify: sh ./check.sh
    agent: {{run: '{setup}'}}
  - id: after-setup
    depends_on: [setup-rewriter]
    agent: {{run: 'echo after > after.txt'}}
"""

INTEGRATION = """\
version: 1
name: integration-in-jail
max_parallel: 2
limits: {{max_attempts: 1}}
sandbox: {{kind: bwrap, network: false}}
integration_verify: sh ./check.sh
agent: {{kind: shell, run: 'true'}}
subtasks:
  - id: honest
    agent: {{run: 'echo honest > honest.txt'}}
  - id: integration-escape
    agent: {{run: '{integration}'}}
"""


def evil_script(repo: Path, outside: Path, check: str) -> str:
    """What an agent puts in place of a check's script: it writes into the user's checkout
    and marks a folder outside."""
    return f"echo evil > {repo}/evil-{check}.txt; touch {outside}/{check}"


@pytest.fixture
def evil(repo: Path, tmp_path: Path) -> dict[str, str]:
    """The repository's honest scripts committed; the agents' command lines that put evil
    ones in their place, by the check that runs them."""
    (repo / "check.sh").write_text(HONEST_CHECK)
    (repo / "setup.sh").write_text(HONEST_SETUP)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "checks")
    outside = tmp_path / "outside"
    outside.mkdir()
    scripts = {"verify": "check.sh", "setup": "setup.sh", "integration": "check.sh"}
    return {
        check: f'printf "%s\\n" "{evil_script(repo, outside, check)}" > {script}'
        for check, script in scripts.items()
    }


def test_verify_and_setup_run_what_an_agent_wrote_in_the_sandbox(
    kairo: Kairo, repo: Path, tmp_path: Path, evil: dict[str, str]
) -> None:
    outside = tmp_path / "outside"
    kairo.env.update({"PASSED_TOKEN": "yes", "HIDDEN_TOKEN": "leaked-if-seen"})
    before = snapshot_checkout(repo)

    done = kairo.run("start", str(kairo.write_plan(CHECKS_AND_SETUP.format_map(evil))), "--wait")

    assert done.returncode == 1, done.stderr
    status = kairo.json("status")
    subtasks = {s["id"]: s for s in status["subtasks"]}
    # Honest checks pass in the sandbox, the secrets withheld but the one passed.
    assert subtasks["honest"]["state"] == "merged"
    assert subtasks["setup-rewriter"]["state"] == "merged"
    assert subtasks["verify-escape"]["state"] == "failed"
    assert "verify_failed" in subtasks["verify-escape"]["reason"]
    report = kairo.json("report")
    tails = {item["id"]: item["output_tail"] for item in report["failed"]}
    assert "Read-only file system" in tails["verify-escape"], tails
    # The agent's setup script ran in the sandbox, in the next worktree made from the branch.
    assert subtasks["after-setup"]["state"] == "failed"
    assert subtasks["after-setup"]["reason"].startswith("setup_failed: `sh ./setup.sh`")
    run_root = Path(report["run_root"])
    assert "Read-only file system" in (run_root / "after-setup" / "setup.log").read_text()
    # What the honest check wrote in its TMPDIR: its own scratch, in its run folder.
    assert (run_root / "honest" / "verify-check" / "scratch" / "tmp" / "read").is_file()
    branch = status["integration_branch"]
    assert git(repo, "show", f"{branch}:setup.sh") == evil_script(repo, outside, "setup") + "\n"
    assert snapshot_checkout(repo) == before
    assert list(outside.iterdir()) == []


def test_integration_verify_runs_what_an_agent_wrote_in_the_sandbox(
    kairo: Kairo, repo: Path, tmp_path: Path, evil: dict[str, str]
) -> None:
    outside = tmp_path / "outside"
    before = snapshot_checkout(repo)

    done = kairo.run("start", str(kairo.write_plan(INTEGRATION.format_map(evil))), "--wait")

    assert done.returncode == 1, done.stderr
    status = kairo.json("status")
    states = {s["id"]: s["state"] for s in status["subtasks"]}
    assert states == {"honest": "merged", "integration-escape": "failed"}
    logged = [json.loads(line) for line in kairo.run("events", "--json").stdout.splitlines()]
    checked = [e["payload"] for e in logged if e["event_type"] == "integration_checked"]
    failed = [c for c in checked if c["exit_code"] != 0]
    assert failed and all("Read-only file system" in c["output_tail"] for c in failed), checked
    # The honest check passed on the honest merge, which stays.
    assert any(c["exit_code"] == 0 and c["subtask_ids"] == ["honest"] for c in checked), checked
    branch = status["integration_branch"]
    assert git(repo, "show", f"{branch}:check.sh") == HONEST_CHECK
    assert git(repo, "show", f"{branch}:honest.txt") == "honest\n"
    assert snapshot_checkout(repo) == before
    assert list(outside.iterdir()) == []


def test_a_sandboxed_verify_that_hangs_ends_at_its_timeout_with_all_it_started(
    kairo: Kairo,
) -> None:
    marker = f"kairo-jailed-verify-{time.monotonic_ns()}"
    # A daemon of its own session that ignores SIGTERM: the sandbox, and all in it, ends
    # with its check.
    hangs = (
        f'(setsid sh -c "trap \\"\\" TERM; sleep 600; : {marker}" &); '
        f"echo collected 3 tests; sleep 600; : {marker}"
    )
    plan = kairo.write_plan(
        "version: 1\nname: hung\nsandbox: {kind: bwrap}\n"
        "agent: {kind: shell, run: 'echo x > x.txt'}\n"
        f"verify: '{hangs}'\n"
        "subtasks:\n  - id: hung\n    limits: {timeout: 4s, max_attempts: 1}\n"
    )

    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 1, done.stderr
    view = kairo.json("status")["subtasks"][0]
    assert "exited with status 124" in view["reason"], view["reason"]
    report = kairo.run("report").stdout
    assert "collected 3 tests" in report and "ended after its timeout of 4s" in report
    assert processes_with(marker) == []
