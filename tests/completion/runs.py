"""One execution of the completion scenarios, each a subtask of one plan, run for real
(`kairo-orch start --wait`, its agents the real CLIs against the scripted model server),
and what each subtask came to: its outcome and reason, attempts, tokens, wall time, and
whether what merged passes the hidden reference test.

The gates-on plan has a `verify` (the project's suite) and three attempts; the baseline
is what a plain worktree launcher gives: one attempt, an empty one accepted, no `verify`.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.completion.project import SUITE, correct, make_project
from tests.completion.scenarios import Expected, Scenario
from tests.e2e.conftest import Kairo
from tests.model_server import serve
from tests.real_agents import CLAUDE, CODEX

#: The model codex is told it runs: one it knows, so that it offers `apply_patch`.
CODEX_MODEL = "gpt-5.5"
KEY_ENV = "SCRIPTED_KEY"
#: How long the whole execution may take before the bench gives up on it.
EXECUTION_TIMEOUT_S = 540
SUPERVISOR_DIED = 6  # `--wait`'s exit status (cli.md)
#: Events after which a subtask has ended (merged, or failed by a gate or a limit).
ENDINGS = ("subtask_merged", "subtask_failed", "subtask_conflicted", "attempt_judged")


@dataclass(frozen=True)
class Run:
    """One scenario's run: the figures of bench-completion.json."""

    name: str
    behaviour: str
    program: str
    expected_outcome: str
    expected_reason: str
    expected_attempts: int
    outcome: str
    reason: str
    attempts: int
    tokens: int
    token_budget: int | None
    timeout_s: int
    wall_s: float
    correct: bool
    left_running: int  # processes still at work in its worktree once the execution ended
    baseline: bool

    def problems(self) -> list[str]:
        """How the run missed what its scenario expects ([] when it did not): its outcome,
        reason and attempts; a budget overrun by more than a tenth; a timeout that took
        more than 10 s to end its attempt, or left anything running."""
        said = []
        got = (self.outcome, self.reason, self.attempts)
        wanted = (self.expected_outcome, self.expected_reason, self.expected_attempts)
        if got != wanted:
            said.append(f"ended {_words(got)}, expected {_words(wanted)}")
        budget = self.token_budget
        if self.reason == "token_budget" and budget is not None and self.tokens > 1.1 * budget:
            said.append(f"spent {self.tokens} tokens of a budget of {budget}")
        if self.reason == "timeout" and self.wall_s > self.timeout_s + 10:
            said.append(f"took {self.wall_s} s to end at a timeout of {self.timeout_s} s")
        if self.left_running:
            said.append(f"left {self.left_running} processes running in its worktree")
        return said

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        if not self.baseline:
            del document["baseline"]  # only the baseline's runs say so
        return document


def _words(outcome: tuple[str, str, int]) -> str:
    state, reason, attempts = outcome
    return f"{state} ({reason or 'accepted at once'}) after {attempts} attempt(s)"


def plan_text(scenarios: list[Scenario], *, baseline: bool, server_url: str) -> str:
    lines = [
        "version: 1",
        f"name: completion-{'baseline' if baseline else 'gates'}",
        f"max_parallel: {len(scenarios)}",
        f"agent: {{kind: claude-code, binary: {CLAUDE.binary}}}",
    ]
    if not baseline:
        lines.append(f"verify: {json.dumps(SUITE)}")
    lines.append("subtasks:")
    for scenario in scenarios:
        limits = [f"timeout: {scenario.timeout_s}s"]
        if baseline:
            limits.append("max_attempts: 1")
        if scenario.token_budget is not None:
            limits.append(f"token_budget: {scenario.token_budget}")
        lines += [
            f"  - id: {scenario.name}",
            f"    prompt: {json.dumps(scenario.slot.prompt)}",
            f"    files: {json.dumps(list(scenario.slot.owned))}",
            f"    limits: {{{', '.join(limits)}}}",
        ]
        if baseline:
            lines.append("    allow_empty: true")
        if scenario.program == "codex":
            endpoint = f"{{url: '{server_url}/v1', key_env: {KEY_ENV}}}"
            lines.append(
                f"    agent: {{kind: codex, binary: {CODEX.binary}, model: {CODEX_MODEL}, "
                f"endpoint: {endpoint}}}"
            )
        elif scenario.env:
            lines.append(f"    agent: {{env: {json.dumps(scenario.env)}}}")
    return "\n".join(lines) + "\n"


def run_all(kairo: Kairo, scenarios: list[Scenario], *, baseline: bool) -> list[Run]:
    """The scenarios as one execution in `kairo.repo` (made here), to its end."""
    make_project(kairo.repo, [s.slot for s in scenarios])
    with serve(*(s.model_script() for s in scenarios)) as server:
        kairo.env.update({**server.claude_env(), KEY_ENV: "sk-scripted"})
        plan = kairo.write_plan(plan_text(scenarios, baseline=baseline, server_url=server.url))
        began = time.monotonic()
        done = kairo.run("start", str(plan), "--wait", timeout=EXECUTION_TIMEOUT_S)
        if done.returncode == SUPERVISOR_DIED:
            _wait_for_end(kairo, done.stderr, began + EXECUTION_TIMEOUT_S)
        elif done.returncode not in (0, 1):
            raise RuntimeError(f"`kairo-orch start` exited {done.returncode}: {done.stderr}")
        status = kairo.json("status")
        left = _left_running(status)
    events = [json.loads(line) for line in kairo.run("events", "--json").stdout.splitlines()]
    views = {view["id"]: view for view in status["subtasks"]}
    scratch = kairo.repo.parent / "checks"
    scratch.mkdir(exist_ok=True)
    runs = []
    for scenario in scenarios:
        view = views[scenario.name]
        mine = [e for e in events if e["payload"].get("subtask_id") == scenario.name]
        expected: Expected = scenario.baseline if baseline else scenario.gates
        merged = view["state"] == "merged"
        runs.append(
            Run(
                name=scenario.name,
                behaviour=scenario.behaviour,
                program=scenario.program,
                expected_outcome=expected.outcome,
                expected_reason=expected.reason,
                expected_attempts=expected.attempts,
                outcome=view["state"],
                reason=_reason(mine, merged),
                attempts=view["attempts"],
                tokens=view["tokens"],
                token_budget=scenario.token_budget,
                timeout_s=scenario.timeout_s,
                wall_s=round(_wall(mine), 1),
                correct=merged
                and correct(kairo.repo, status["integration_branch"], scenario.slot, scratch),
                left_running=left.get(scenario.name, 0),
                baseline=baseline,
            )
        )
        if runs[-1].problems():
            _say_what_it_did(kairo.repo, status["execution_id"], scenario.name)
    return runs


def _say_what_it_did(repo: Path, execution_id: str, subtask: str) -> None:
    """The end of each attempt's output (the agent's tool calls and last words) on stderr,
    for a run that missed what its scenario expects: what a failure is read by."""
    for log in sorted(
        (repo / ".git" / "kairo" / "runs" / execution_id / subtask).glob("*/output.log")
    ):
        text = log.read_bytes().decode("utf-8", "replace")
        tail = [line for line in text.splitlines() if line.strip()][-8:]
        printable = ("".join(c if c.isprintable() else " " for c in line) for line in tail)
        said = "\n  ".join(printable)
        print(f"bench-completion: {subtask} attempt {log.parent.name}:\n  {said}", file=sys.stderr)


def _wait_for_end(kairo: Kairo, said: str, deadline: float) -> None:
    """`start --wait` said the supervisor died: seen once on a loaded machine while it ran
    on, so the bench says so and waits for the execution's end (or for no supervisor)."""
    print(f"bench-completion: `start --wait` exited 6 ({said.strip()})", file=sys.stderr)
    while time.monotonic() < deadline:
        status = kairo.json("status")["status"]
        if status in ("COMPLETED", "FAILED", "STOPPED"):
            print(f"bench-completion: ... and the execution ended {status}", file=sys.stderr)
            return
        if status == "PAUSED":
            raise RuntimeError(f"the supervisor died: {said}")
        time.sleep(0.5)
    raise RuntimeError(f"the execution did not end in {EXECUTION_TIMEOUT_S} s")


def _reason(events: list[dict[str, Any]], merged: bool) -> str:
    """A failed subtask's reason code; a merged one's, the codes of the attempts sent back."""
    judged = [e["payload"] for e in events if e["event_type"] == "attempt_judged"]
    if merged:
        return "+".join(j["reason"]["code"] for j in judged if not j["accepted"] and j["reason"])
    ended = [e["payload"] for e in events if e["event_type"] in ENDINGS]
    reason = ended[-1].get("reason") if ended else None
    return str(reason["code"]) if reason else ""


def _wall(events: list[dict[str, Any]]) -> float:
    """From the subtask's first attempt to the event that ended it."""
    started = [e for e in events if e["event_type"] == "attempt_started"]
    ended = [e for e in events if e["event_type"] in ENDINGS]
    if not started or not ended:
        return 0.0
    at = [datetime.fromisoformat(e["created_at"]).timestamp() for e in (started[0], ended[-1])]
    return at[1] - at[0]


def _left_running(status: dict[str, Any]) -> dict[str, int]:
    """For each subtask, the processes whose working directory is in its worktree."""
    worktrees = {v["id"]: v["worktree"] for v in status["subtasks"] if v["worktree"]}
    left: dict[str, int] = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cwd = str((proc / "cwd").readlink())
        except OSError:
            continue
        for sid, worktree in worktrees.items():
            if cwd == worktree or cwd.startswith(worktree + "/"):
                left[sid] = left.get(sid, 0) + 1
    return left
