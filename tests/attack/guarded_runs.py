"""Running an adversarial plan and reading what the guard said of it, for the attacks on
the user's history (test_user_history.py) and checkout (test_checkout_writes.py)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.attack.sandboxes import Mode
from tests.e2e.conftest import Kairo

#: The short id of the execution, as an agent works it out from its environment.
SHORT_ID = 's=$(printf %s "$KAIRO_EXECUTION_ID" | tail -c 6 | tr A-Z a-z)'
#: The user's checkout, as an agent finds it from its worktree.
CHECKOUT = "top=$(git worktree list --porcelain | sed -n '1s/^worktree //p')"
#: The shared git directory, as an agent finds it from its worktree.
GIT_DIR = "g=$(git rev-parse --path-format=absolute --git-common-dir)"


def run_plan(
    kairo: Kairo,
    name: str,
    agents: Mapping[str, str],
    *,
    mode: Mode,
    extra: str = "",
    depends: Mapping[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """A plan of shell agents (subtask id -> its command line, in plan order; `depends`:
    subtask id -> the one it depends on) run with `start --wait` in `mode`'s sandbox: what
    the command did, and `status --json` after."""
    lines = ["version: 1", f"name: {name}", "agent: {kind: shell, run: 'true'}", mode.plan, extra]
    lines.append("subtasks:")
    for subtask_id, run in agents.items():
        lines += [f"  - id: {subtask_id}", f"    agent: {{run: {json.dumps(run)}}}"]
        if depends and subtask_id in depends:
            lines.append(f"    depends_on: [{depends[subtask_id]}]")
    plan = kairo.write_plan("\n".join(line for line in lines if line) + "\n", f"{name}.yaml")
    done = kairo.run("start", str(plan), "--wait")
    return done, kairo.json("status")


def subtask(status: Mapping[str, Any], subtask_id: str) -> dict[str, Any]:
    return next(s for s in status["subtasks"] if s["id"] == subtask_id)


def agent_said(status: Mapping[str, Any], subtask_id: str) -> str:
    """What the subtask's agent printed, on each of its attempts (their output.log)."""
    attempts = Path(status["run_root"]) / subtask_id
    logs = sorted(attempts.glob("[0-9]*/output.log"), key=lambda log: int(log.parent.name))
    return "".join(log.read_text(errors="replace") for log in logs)


def refused(status: Mapping[str, Any], subtask_id: str, *said: str) -> None:
    """The subtask's agent failed (not the guard: nothing changed for it to see), having
    printed each of `said`."""
    view = subtask(status, subtask_id)
    assert view["state"] == "failed", view
    # Failed as it exited, once or (leaving the same tree each time) on every attempt.
    assert view["reason"].split(":")[0] in ("agent_failed", "no_progress"), view
    printed = agent_said(status, subtask_id)
    for words in said:
        assert words in printed, (words, printed)


def worktree_of(repo: Path, status: Mapping[str, Any], subtask_id: str) -> Path:
    """Where the subtask's worktree is (or was, before it was put aside)."""
    short = status["execution_id"][-6:].lower()
    return repo.parent / f"{repo.name}.kairo-worktrees" / short / subtask_id


def breach_named(status: Mapping[str, Any], kind: str, name: str) -> dict[str, Any]:
    """The one change of `kind` to `name` that `status --json` lists."""
    wanted = (kind, os.fsencode(name))
    found = [b for b in status.get("breaches", []) if (b["kind"], _name(b["name"])) == wanted]
    assert len(found) == 1, status.get("breaches")
    return found[0]


def _name(value: str | Mapping[str, str]) -> bytes:
    """A name's bytes from its JSON form: a string, or `{"base64": ...}` (cli.md)."""
    return value.encode() if isinstance(value, str) else base64.b64decode(value["base64"])


def restore(repo: Path, breach: Mapping[str, Any]) -> None:
    """Run the restoring command as a user would paste it, in their checkout."""
    command = _name(breach["restore"])
    subprocess.run(command, shell=True, cwd=repo, check=True, capture_output=True)


def failed_by_the_guard(status: Mapping[str, Any], subtask_id: str, *named: str) -> None:
    """The subtask failed, its reason naming each of `named` and saying it may be you."""
    view = subtask(status, subtask_id)
    assert view["state"] == "failed", view
    assert view["reason"].startswith("guard_breached: "), view["reason"]
    for name in named:
        assert name in view["reason"], (name, view["reason"])
    assert "if this was you" in view["reason"]
