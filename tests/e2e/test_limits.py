"""Resource constraints and completion gates with real agents: limits end loops, feedback
reaches the next attempt, a timed-out agent is gone with everything it started."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git

pytestmark = pytest.mark.slow


def processes_with(marker: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (cmdline.parent / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if marker in text and state != "Z" and "pytest" not in text:
            found.append(text)
    return found


def test_a_60_second_agent_under_a_3_second_timeout_is_gone_with_nothing_left(
    kairo: Kairo, repo: Path
) -> None:
    marker = f"kairo-slow-{time.monotonic_ns()}"
    plan = kairo.write_plan(
        "version: 1\nname: slow\nagent: {kind: shell, run: 'true'}\n"
        "subtasks:\n  - id: slow\n    limits: {timeout: 3s, max_attempts: 1}\n"
        f"    agent: {{run: 'echo partial > partial.txt; (sleep 60; echo {marker}) & sleep 60 # {marker}'}}\n"
    )
    began = time.monotonic()

    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 1, done.stderr
    assert time.monotonic() - began < 15
    view = kairo.json("status")["subtasks"][0]
    assert view["state"] == "failed"
    assert view["reason"].startswith("timeout: attempt 1 ran longer than its limit of 3 s")
    short = kairo.json("status")["execution_id"][-6:].lower()
    assert f"refs/kairo/stopped/{short}/slow/1" in view["reason"]
    assert git(repo, "show", f"refs/kairo/stopped/{short}/slow/1:partial.txt") == "partial\n"
    assert processes_with(marker) == []


def test_an_agent_told_why_its_first_attempt_failed_succeeds_on_the_second(
    kairo: Kairo, repo: Path
) -> None:
    plan = kairo.write_plan(
        """\
version: 1
name: learn
verify: "test -f greeting.txt || { echo 'greeting.txt is missing'; exit 1; }"
agent:
  kind: shell
  run: |
    if printf '%s' "$KAIRO_FEEDBACK" | grep -q 'greeting.txt is missing'; then
      grep -q 'greeting.txt is missing' "$KAIRO_PROMPT_FILE" && echo hello > greeting.txt
    else
      echo "attempt $KAIRO_ATTEMPT" > notes.txt
    fi
subtasks:
  - id: learn
    prompt: Write a greeting.
"""
    )
    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 0, done.stderr
    view = kairo.json("status")["subtasks"][0]
    assert view["state"] == "merged" and view["attempts"] == 2
    branch = kairo.json("status")["integration_branch"]
    assert git(repo, "show", f"{branch}:greeting.txt") == "hello\n"


LIMITS = """\
version: 1
name: limits
verify: "exit 1"
limits: {{max_attempts: 3}}
agent: {{kind: shell, run: "true"}}
subtasks:
  - id: bounded
    agent: {{run: 'echo $KAIRO_ATTEMPT > try-$KAIRO_ATTEMPT.txt'}}
  - id: idle
    allow_empty: false
    verify: null
  - id: stuck
    agent: {{run: 'echo same > same.txt; echo the same error; exit 1'}}
  - id: spender
    limits: {{token_budget: 1000}}
    agent: {{run: 'echo "{{\\"input_tokens\\": 500, \\"output_tokens\\": 100}}" >> "$KAIRO_USAGE_FILE"; echo $KAIRO_ATTEMPT > t-$KAIRO_ATTEMPT.txt'}}
"""


def test_each_limit_ends_its_subtask_with_the_reason_word_of_cli_md(
    kairo: Kairo, repo: Path
) -> None:
    done = kairo.run("start", str(kairo.write_plan(LIMITS.format())), "--wait")

    assert done.returncode == 1, done.stderr
    subtasks = {s["id"]: s for s in kairo.json("status")["subtasks"]}
    assert {k: v["state"] for k, v in subtasks.items()} == dict.fromkeys(subtasks, "failed")
    assert subtasks["bounded"]["reason"].startswith("max_attempts: 3 attempt(s) were not accepted")
    assert "verify_failed" in subtasks["bounded"]["reason"]
    assert subtasks["bounded"]["attempts"] == 3
    assert subtasks["idle"]["reason"] == "no_changes: attempts 1 and 2 changed nothing"
    assert subtasks["stuck"]["reason"].startswith("no_progress: attempts 1 and 2")
    assert subtasks["spender"]["reason"] == "token_budget: the subtask used 1200 of its 1000 tokens"
    assert subtasks["spender"]["tokens"] == 1200
    violations = [
        json.loads(line)["payload"]
        for line in kairo.run("events", "--json").stdout.splitlines()
        if '"constraint_violated"' in line
    ]
    assert {(v["subtask_id"], v["constraint"], v["action"]) for v in violations} == {
        ("bounded", "max_attempts", "GRACEFUL_EXIT"),
        ("spender", "subtask_token_budget", "GRACEFUL_EXIT"),  # spent between attempts
    }


def test_a_second_attempt_is_told_what_the_first_left_on_the_branch(
    kairo: Kairo, repo: Path
) -> None:
    plan = kairo.write_plan(
        """\
version: 1
name: history
agent:
  kind: shell
  run: |
    if [ "$KAIRO_ATTEMPT" = 1 ]; then echo draft > draft.txt; echo 'tests fail'; exit 3; fi
    cp "$KAIRO_PROMPT_FILE" prompt-2.txt
subtasks:
  - id: history
    prompt: Write the draft.
"""
    )
    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 0, done.stderr
    branch = kairo.json("status")["integration_branch"]
    prompt = git(repo, "show", f"{branch}:prompt-2.txt")
    assert prompt.startswith("Write the draft.\n\n## Earlier attempts at this task\n")
    assert "- Attempt 1 was not accepted: agent_failed: the agent exited with status 3" in prompt
    assert "kairo: history, attempt 1" in prompt  # its commit, on the branch
    assert "1 file changed, 1 insertion(+)" in prompt
    assert "tests fail" in prompt  # and the feedback, after it


def test_usage_reported_by_the_agent_shows_in_status_and_report(kairo: Kairo) -> None:
    plan = kairo.write_plan(
        "version: 1\nname: usage\nagent:\n  kind: shell\n  run: |\n"
        '    echo \'{"input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.5, '
        '"session_id": "s-42"}\' >> "$KAIRO_USAGE_FILE"\n'
        "    echo done > done.txt\n"
        "subtasks:\n  - id: spend\n"
    )
    assert kairo.run("start", str(plan), "--wait").returncode == 0
    (view,) = kairo.json("status")["subtasks"]
    assert (view["tokens"], view["cost_usd"], view["session_id"]) == (1200, 0.5, "s-42")
    assert "- tokens: 1,200 ($0.50): spend 1,200" in kairo.run("report").stdout
