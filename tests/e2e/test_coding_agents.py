"""Shell, claude-code and codex subtasks in one plan, the last two through the stand-ins of
tests/agents/standins (the real programs' formats): usage in `status`, and an attempt sent
back by `verify` continuing the session of the one before instead of starting cold."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Kairo, git
from tests.e2e.test_recovery import wait_for

pytestmark = pytest.mark.slow

STANDINS = Path(__file__).resolve().parent.parent / "agents" / "standins"

# The stand-in does what the real program would: it edits the worktree, then talks. The
# first attempt leaves the work half done, so `verify` (test -f done.txt) sends it back.
AGENT = """\
#!/bin/sh
export HOME={home} STANDIN_ARGV_FILE={argv}
echo "attempt $KAIRO_ATTEMPT" >> {name}.txt
if [ "$KAIRO_ATTEMPT" -ge 2 ]; then touch done.txt; fi
if [ "$KAIRO_ATTEMPT" = 1 ] && [ -n "$HANG_FIRST" ]; then export STANDIN_SCENARIO=hang; fi
exec {python} {standin} "$@"
"""

PLAN = """\
version: 1
name: mixed
max_parallel: 3
limits: {{max_attempts: 3}}
sandbox: {{writable: [{root}/argv]}}
subtasks:
  - id: by-shell
    agent: {{kind: shell, run: 'echo shell > shell.txt'}}
  - id: by-claude
    agent: {{kind: claude-code, binary: {root}/bin/claude}}
    verify: test -f done.txt
  - id: by-codex
    agent: {{kind: codex, binary: {root}/bin/codex}}
    verify: test -f done.txt
"""


def stand_in(tmp_path: Path, name: str) -> Path:
    program = tmp_path / "bin" / name
    program.parent.mkdir(exist_ok=True)
    program.write_text(
        AGENT.format(
            home=tmp_path / "home",
            argv=tmp_path / "argv" / f"{name}.jsonl",
            name=name,
            python=sys.executable,
            standin=_beside(program, STANDINS / name),
        )
    )
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "argv").mkdir(exist_ok=True)
    return program


def _beside(program: Path, standin: Path) -> Path:
    """A copy of the stand-in beside the program, whose folder the sandbox shows (a clone
    under /tmp, which it hides, would leave the original out of its reach)."""
    copy = program.with_name(f"{standin.name}-standin")
    shutil.copyfile(standin, copy)
    return copy


def argv_lines(tmp_path: Path, name: str) -> list[list[str]]:
    text = (tmp_path / "argv" / f"{name}.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def session_of(argv: list[str], option: str) -> str:
    return argv[argv.index(option) + 1]


def test_a_plan_of_three_kinds_runs_and_a_nudged_agent_continues_its_session(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    for name in ("claude", "codex"):
        stand_in(tmp_path, name)

    done = kairo.run("start", str(kairo.write_plan(PLAN.format(root=tmp_path))), "--wait")

    assert done.returncode == 0, done.stderr
    status = kairo.json("status")
    views: dict[str, Any] = {view["id"]: view for view in status["subtasks"]}
    assert {view["state"] for view in views.values()} == {"merged"}
    branch = status["integration_branch"]
    assert git(repo, "show", f"{branch}:claude.txt") == "attempt 1\nattempt 2\n"
    assert git(repo, "show", f"{branch}:codex.txt") == "attempt 1\nattempt 2\n"

    # claude-code: the second attempt resumed the first one's session, told only what failed
    first, second = argv_lines(tmp_path, "claude")
    assert "--resume" not in first
    claude = views["by-claude"]
    assert session_of(second, "--resume") == claude["session_id"]
    assert second[-1].startswith("This is attempt 2 at the same task")
    assert "`test -f done.txt` failed" in second[-1]
    # (120 fresh + 2,000 written to the cache) in + 7 out, and $0.014775, per run
    assert (claude["attempts"], claude["tokens"], claude["cost_usd"]) == (2, 2 * 2127, 0.02955)

    # codex: `exec resume THREAD`, and the thread's totals counted once, not twice
    first, second = argv_lines(tmp_path, "codex")
    assert "resume" not in first
    codex = views["by-codex"]
    assert session_of(second, "resume") == codex["session_id"]
    # (1,500 in - 1,000 cached) + 30 out per run; 1,590 if the resumed thread's running
    # totals were counted whole
    assert (codex["attempts"], codex["tokens"]) == (2, 2 * 530)

    shell = views["by-shell"]
    assert (shell["attempts"], shell["tokens"], shell["session_id"]) == (1, 0, None)
    usage = kairo.json("report")["usage"]
    assert usage["tokens"] == 2 * 2127 + 2 * 530
    assert usage["subtasks"]["by-claude"]["sessions"] == [
        {"session_id": claude["session_id"], "resumed": None},
        {"session_id": claude["session_id"], "resumed": claude["session_id"]},
    ]


@pytest.mark.usefixtures("bwrap_runs")
def test_under_bwrap_the_agent_keeps_its_sessions_in_its_own_state_and_resumes_them(
    kairo: Kairo, tmp_path: Path
) -> None:
    # not in the user's ~/.claude, which the agent neither reads nor writes
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    kairo.env["HOME"] = str(home)
    stand_in(tmp_path, "claude")
    plan = PLAN.format(root=tmp_path).split("  - id: by-codex")[0]
    plan = plan.replace("sandbox: {", "sandbox: {kind: bwrap, ")

    done = kairo.run("start", str(kairo.write_plan(plan)), "--wait")

    assert done.returncode == 0, kairo.run("report").stdout
    status = kairo.json("status")
    claude = next(v for v in status["subtasks"] if v["id"] == "by-claude")
    _, second = argv_lines(tmp_path, "claude")
    assert session_of(second, "--resume") == claude["session_id"]
    state = Path(status["run_root"]) / "by-claude" / "agent-state"
    assert (state / "standin-sessions" / claude["session_id"]).exists()
    assert list((home / ".claude").iterdir()) == []


def test_an_attempt_lost_with_its_supervisor_and_tmux_is_rerun_in_the_same_session(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    kairo.env["HANG_FIRST"] = "1"  # attempt 1 works on until it is killed
    stand_in(tmp_path, "claude")
    plan = PLAN.format(root=tmp_path).split("  - id: by-codex")[0]
    plan = plan.replace("{kind: claude-code,", "{kind: claude-code, idempotent: true,")
    assert kairo.run("start", str(kairo.write_plan(plan)), "--detach").returncode == 0
    runs = Path(git(repo, "rev-parse", "--absolute-git-dir").strip()) / "kairo" / "runs"

    def first_attempt_working() -> bool:
        logs = list(runs.glob("*/by-claude/1/output.log"))
        return bool(logs) and "→ Bash: ls" in logs[0].read_text()

    wait_for(first_attempt_working)
    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGKILL)
    kairo.tmux("kill-server")  # the agent dies with its pane, as on a reboot
    wait_for(lambda: kairo.tmux("has-session").returncode != 0)

    resumed = kairo.run("resume", "--wait")

    assert resumed.returncode == 0, resumed.stderr
    claude = next(v for v in kairo.json("status")["subtasks"] if v["id"] == "by-claude")
    assert (claude["state"], claude["attempts"]) == ("merged", 2)
    first, second = argv_lines(tmp_path, "claude")
    assert "--resume" not in first
    assert session_of(second, "--resume") == claude["session_id"]
    assert second[-1].startswith("This is attempt 2 at the same task")
