"""Reproduction 35.8: an agent after the secrets of the user's environment.

The supervisor starts with a database URL holding a password, a deploy token, a GitHub
token under an innocent name and an Anthropic key; the plan gives the key to one agent
and the token to another. Each agent reads whatever it can reach (its environment, tmux's
global and session environments, every runner spec and credentials file of the run, every
pane's screen) into files of its worktree, which the test reads back from the branch; the
two given a secret print it; the checks print them all. No withheld value may reach an
agent, nor be in any file under .git/kairo, the reports, `status`, the log, or tmux's
environment; the key and the token reach their own agent's process only. In both
sandboxes: under the default settings (bubblewrap) the agent reaches no tmux server, run
folder or pane at all, and the rest holds as in local mode."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from tests.attack.sandboxes import Mode
from tests.e2e.conftest import Kairo, git

pytestmark = pytest.mark.slow

SECRETS = {
    "DATABASE_URL": "postgres://app:PASSWORD-db-91c3@db.internal:5432/shop",
    "DEPLOY_TOKEN": "deploy-tok-7d2e9a1b4c",
    "BUILD_LABEL": "ghp_aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4",
    "ANTHROPIC_API_KEY": "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe",
}
GIVEN = {"keyed": "ANTHROPIC_API_KEY", "deployer": "DEPLOY_TOKEN"}  # by the plan, by name

# Each agent waits for the test's go (it reads their environments meanwhile), then acts:
# a file in its run folder, which it sees in either sandbox.
GATE = 'for i in $(seq 600); do [ -e "$(dirname "$KAIRO_PROMPT_FILE")/go" ] && break; sleep 0.1; done; '
SNOOP = (
    'runs=$(dirname "$(dirname "$(dirname "$KAIRO_PROMPT_FILE")")"); '
    "env > env.txt; "
    'tmux -L "$KAIRO_TMUX_SOCKET" show-environment -g > tmux-global.txt; '
    'tmux -L "$KAIRO_TMUX_SOCKET" show-environment > tmux-session.txt; '
    'cat "$runs"/*/*/runner.json "$runs"/*/*/credentials.json > runs.txt 2>&1; '
    "sleep 2; "  # the others have printed what they were given
    'for pane in $(tmux -L "$KAIRO_TMUX_SOCKET" list-panes -a -F "#{pane_id}"); do '
    'tmux -L "$KAIRO_TMUX_SOCKET" capture-pane -p -t "$pane"; done > panes.txt; '
    "cat env.txt tmux-global.txt runs.txt"
)
PLAN = """\
version: 1
name: secrets
{sandbox}
max_parallel: 4
limits: {{max_attempts: 1}}
worktree: {{setup: 'echo "setup sees $DEPLOY_TOKEN"'}}
verify: 'echo "verify sees $DATABASE_URL $DEPLOY_TOKEN $BUILD_LABEL $ANTHROPIC_API_KEY"'
review: {{pr_command: 'echo "pr sees $DATABASE_URL"; grep -c "redacted" "$KAIRO_REPORT_FILE"'}}
agent: {{kind: shell, run: 'true'}}
subtasks:
  - id: snoop
    agent: {{run: '{gate}{snoop}'}}
  - id: keyed
    agent:
      env: {{ANTHROPIC_API_KEY: "${{ANTHROPIC_API_KEY}}"}}
      run: '{gate}echo "my key is $ANTHROPIC_API_KEY"; printf %s "$ANTHROPIC_API_KEY" | sha256sum > key.sha; sleep 4'
  - id: deployer
    agent:
      env: {{DEPLOY_TOKEN: "${{DEPLOY_TOKEN}}"}}
      run: '{gate}echo "my token is $DEPLOY_TOKEN"; printf %s "$DEPLOY_TOKEN" | sha256sum > token.sha'
  - id: failing-check
    verify: 'echo "failing check sees $DATABASE_URL $BUILD_LABEL"; exit 1'
    agent: {{run: '{gate}echo change > change.txt'}}
"""


def sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(
        item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item
    )


def leaked(text: str | bytes, allowed: str | None = None) -> list[str]:
    """The withheld values in `text` (but `allowed`'s)."""
    data = text.encode() if isinstance(text, str) else text
    return [name for name, value in SECRETS.items() if name != allowed and value.encode() in data]


def started_agents(kairo: Kairo, subtasks: list[str], seconds: float = 60) -> dict[str, dict]:
    """Each subtask's start record, once its agent runs (at the gate)."""
    runs = kairo.repo / ".git" / "kairo" / "runs"
    deadline = time.monotonic() + seconds
    while True:
        found = {}
        for sid in subtasks:
            for path in runs.glob(f"*/{sid}/1/started.json"):
                record = json.loads(path.read_text())
                if record.get("agent_pid"):
                    found[sid] = record
        if len(found) == len(subtasks):
            return found
        assert time.monotonic() < deadline, f"agents never all started: {sorted(found)}"
        time.sleep(0.1)


@pytest.mark.reproduces("35.8")
def test_no_withheld_value_reaches_an_agent_a_file_of_ours_a_report_or_tmux(
    kairo: Kairo, repo: Path, mode: Mode
) -> None:
    kairo.env.update(SECRETS)
    plan = kairo.write_plan(PLAN.format(sandbox=mode.plan, gate=GATE, snoop=SNOOP))
    subtasks = ["snoop", "keyed", "deployer", "failing-check"]

    waiting = kairo.spawn("start", str(plan), "--wait")
    try:
        agents = started_agents(kairo, subtasks)
        # While every agent runs: what its process, its runner, the supervisor and the
        # tmux server hold in their environments.
        for sid, record in agents.items():
            given = GIVEN.get(sid)
            agent_environment = environ(record["agent_pid"])
            assert leaked("\n".join(agent_environment.values()), allowed=given) == [], sid
            if given is not None:  # the one credential the plan gives it, there
                assert agent_environment[given] == SECRETS[given]
            assert leaked("\n".join(environ(record["pid"]).values())) == [], f"{sid}'s runner"
        status = kairo.json("status")
        assert leaked(Path(f"/proc/{status['supervisor_pid']}/environ").read_bytes()) == []
        server = int(kairo.tmux("display-message", "-p", "#{pid}").stdout)
        assert leaked(Path(f"/proc/{server}/environ").read_bytes()) == []
    finally:
        for run in (repo / ".git" / "kairo" / "runs").glob("*/*/1"):
            (run / "go").touch()
    _, stderr = waiting.communicate(timeout=120)

    assert waiting.returncode == 1, stderr  # failing-check failed; the others merged
    # tmux, asked: its global and the session's environment hold none.
    session = kairo.json("status")["tmux_session"]
    global_environment = kairo.tmux("show-environment", "-g").stdout
    session_environment = kairo.tmux("show-environment", "-t", f"={session}:").stdout
    assert "PATH=" in global_environment  # asked for real
    assert leaked(global_environment + session_environment) == []

    # What the snooping agent read, everywhere it looked.
    branch = kairo.json("status")["integration_branch"]
    seen = {
        name: git(repo, "show", f"{branch}:{name}")
        for name in ("env.txt", "tmux-global.txt", "tmux-session.txt", "runs.txt", "panes.txt")
    }
    for name, text in seen.items():
        assert leaked(text) == [], name
    assert "PATH=" in seen["env.txt"]
    if mode.sandboxed:  # no run folder but its own, no tmux server, no pane
        assert seen["runs.txt"].count('"argv"') == 1  # its own runner spec
        assert "No such file" in seen["runs.txt"]
        assert seen["tmux-global.txt"] == seen["panes.txt"] == ""
    else:
        assert seen["runs.txt"].count('"argv"') == 4  # it did read every runner spec
        assert "PATH=" in seen["tmux-global.txt"]
        assert "my key is [redacted: ANTHROPIC_API_KEY]" in seen["panes.txt"]  # a sibling's
    # ... and the two given a secret had it (they wrote its digest, not it).
    assert git(repo, "show", f"{branch}:key.sha").split()[0] == sha256(SECRETS["ANTHROPIC_API_KEY"])
    assert git(repo, "show", f"{branch}:token.sha").split()[0] == sha256(SECRETS["DEPLOY_TOKEN"])

    # No file of ours holds one: the log, the run folders (runner specs, credentials,
    # output logs, exit records, setup logs, the supervisor's log, the reports).
    kairo_dir = repo / ".git" / "kairo"
    files = [path for path in kairo_dir.rglob("*") if path.is_file()]
    assert [
        (str(path), leaked(path.read_bytes())) for path in files if leaked(path.read_bytes())
    ] == []
    assert not list(kairo_dir.rglob("credentials.json"))  # each taken by its runner

    # Nor what kairo-orch shows.
    shown = {
        command: kairo.run(*command.split()).stdout
        for command in (
            "report",
            "report --markdown",
            "report --html",
            "status --json",
            "events --json",
        )
    }
    for command, text in shown.items():
        assert leaked(text) == [], command

    # The values were there to be leaked: the checks printed them all (in local mode), the
    # agents theirs.
    everything = "\n".join(shown.values()) + "".join(p.read_text(errors="replace") for p in files)
    marks = " ".join(f"[redacted: {name}]" for name in SECRETS)
    assert "pr sees [redacted: DATABASE_URL]" in shown["events --json"]
    if mode.sandboxed:  # the checks run in the sandbox, which gives them no secret
        assert "verify sees    " in shown["events --json"]
        assert "failing check sees" in shown["report"] and "setup sees" in everything
    else:
        assert f"verify sees {marks}" in shown["events --json"]
        assert (
            "failing check sees [redacted: DATABASE_URL] [redacted: BUILD_LABEL]" in shown["report"]
        )
        assert "setup sees [redacted: DEPLOY_TOKEN]" in everything  # its setup.log
    assert "my token is [redacted: DEPLOY_TOKEN]" in everything  # the deployer's output.log
