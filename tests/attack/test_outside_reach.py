"""What counts an agent's tokens and records how it ended is out of its reach (issue 36,
items 6 and 9), under `sandbox: {kind: bwrap}`.

The runner and the stream filter run outside the sandbox and write into the attempt's run
folder, which the sandboxed agent can read and not write. An agent that plants links where
they write (the temporary files of the exit and start records and of the live count, the
live count itself, the output log) had the user's `notes.txt` overwritten (6); one that
replaced its usage file by a link to /dev/null, appended a usage line of its own and wrote
its live count had its budget counted as it said, not as its stream showed (9).

Here the agent program is the claude-code stand-in (tests/agents/standins: the real
program's stream), behind a script that attacks first; and the real Claude Code, told by
its model (tests/model_server) to forge its usage through its Bash tool.
"""

from __future__ import annotations

import json
import shutil
import stat
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git
from tests.model_server import Reply, Rule, Script, Usage, bash, serve
from tests.real_agents import CLAUDE, installed

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("bwrap_runs"),
]

STANDIN = Path(__file__).resolve().parent.parent / "agents" / "standins" / "claude"

# Every name the runner and the filter write in the run folder, a link to the user's file;
# then a forged usage line and live count. Each step says whether it was refused.
ATTACK = """\
run=$(dirname "$KAIRO_USAGE_FILE")
pid=$(sed -n 's/.*"pid":\\([0-9]*\\).*/\\1/p' "$run/started.json")
try() {{ if "$@" 2>/dev/null; then echo "DONE: $*"; else echo "REFUSED: $*"; fi; }}
for name in .exit.json.$pid.tmp .started.json.$pid.tmp usage.jsonl.live.tmp \\
        usage.jsonl.live exit.json output.log .output.log.scrubbed; do
    try ln -sfn {notes} "$run/$name"
done
try ln -sfn /dev/null "$KAIRO_USAGE_FILE"
try sh -c 'echo "{forged}" >> "$KAIRO_USAGE_FILE"'
try sh -c 'echo "{{\\"tokens\\": 0}}" > "$KAIRO_USAGE_FILE.live"'
try ln -sfn {notes} "$TMPDIR/mine"
"""
FORGED_LINE = (
    '{\\"input_tokens\\": 0, \\"output_tokens\\": 0, \\"session_id\\": \\"forged\\", '
    '\\"result\\": \\"success\\"}'
)

AGENT = """\
#!/bin/sh
export HOME={home}
{attack} >&2
echo attacked > attacked.txt
exec {python} {standin} "$@"
"""


def attacking_claude(tmp_path: Path, notes: Path) -> Path:
    program = tmp_path / "bin" / "claude"
    program.parent.mkdir()
    attack = "{\n" + ATTACK.format(notes=notes, forged=FORGED_LINE) + "}"
    # Beside the program, whose folder the sandbox shows: a clone under /tmp would hide it.
    standin = program.with_name("claude-standin")
    shutil.copyfile(STANDIN, standin)
    script = AGENT.format(
        home=tmp_path / "home", attack=attack, python=sys.executable, standin=standin
    )
    program.write_text(script)
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return program


def attempt_folder(kairo: Kairo, subtask: str) -> Path:
    return Path(kairo.json("status")["run_root"]) / subtask / "1"


@pytest.mark.reproduces("36.6")
def test_links_planted_where_the_runner_and_filter_write_are_refused(
    kairo: Kairo, tmp_path: Path
) -> None:
    kairo.env["HOME"] = str(tmp_path / "home")
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"the user's own notes\n")
    claude = attacking_claude(tmp_path, notes)
    plan = (
        "version: 1\nname: planted\nsandbox: {kind: bwrap}\n"
        f"agent: {{kind: claude-code, binary: {claude}}}\n"
        "subtasks:\n  - id: planter\n    prompt: do it\n"
    )

    done = kairo.run("start", str(kairo.write_plan(plan)), "--wait")

    assert done.returncode == 0, kairo.run("report").stdout
    run = attempt_folder(kairo, "planter")
    assert notes.read_bytes() == b"the user's own notes\n"
    [planted] = [path for path in run.rglob("*") if path.is_symlink()]
    assert run / "scratch" in planted.parents  # its TMPDIR's: nothing of ours is there
    said = (run / "output.log").read_text()
    assert f"DONE: ln -sfn {notes} {planted}" in said
    assert said.count("REFUSED: ln -sfn") == 8, said  # and nowhere the runner writes
    assert json.loads((run / "exit.json").read_text())["exit_code"] == 0
    branch = kairo.json("status")["integration_branch"]
    assert git(kairo.repo, "show", f"{branch}:attacked.txt") == "attacked\n"


@pytest.mark.reproduces("36.9")
def test_a_budget_counts_what_the_filter_saw_not_what_the_agent_wrote(
    kairo: Kairo, tmp_path: Path
) -> None:
    kairo.env["HOME"] = str(tmp_path / "home")
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"the user's own notes\n")
    claude = attacking_claude(tmp_path, notes)
    # The stand-in's stream spends the budget in one attempt; counted at nothing, as the
    # agent would have it, the attempt would leave the budget whole for two more.
    plan = (
        "version: 1\nname: forged\nsandbox: {kind: bwrap}\nlimits: {max_attempts: 3}\n"
        f"agent: {{kind: claude-code, binary: {claude}}}\n"
        "subtasks:\n  - id: forger\n    prompt: do it\n    verify: 'false'\n"
        "    limits: {token_budget: 3000}\n"
    )

    done = kairo.run("start", str(kairo.write_plan(plan)), "--wait")

    assert done.returncode == 1
    view = next(v for v in kairo.json("status")["subtasks"] if v["id"] == "forger")
    assert view["attempts"] == 1 and view["reason"].startswith("token_budget: "), view
    run = attempt_folder(kairo, "forger")
    # the filter's one line, and nothing of the agent's
    assert not (run / "usage.jsonl").is_symlink()
    record = json.loads((run / "usage.jsonl").read_text())
    assert record["result"] == "token_budget"  # the filter stopped it at its allowance
    assert view["tokens"] == record["input_tokens"] + record["output_tokens"] >= 3000, view
    assert view["session_id"] == record["session_id"] != "forged"
    said = (run / "output.log").read_text()
    assert f"REFUSED: ln -sfn /dev/null {run / 'usage.jsonl'}" in said, said
    assert "REFUSED: sh -c echo" in said and "DONE: sh -c" not in said
    assert notes.read_bytes() == b"the user's own notes\n"


# What the real Claude Code is told to run through its Bash tool: a usage line that says it
# used nothing, its usage file made a link to nowhere, its live count set to nothing.
FORGE = (
    "echo forged > forged.txt; "
    'echo \'{"input_tokens": 0, "output_tokens": 0, "session_id": "forged"}\' '
    '>> "$KAIRO_USAGE_FILE"; '
    'ln -sfn /dev/null "$KAIRO_USAGE_FILE"; '
    'echo \'{"tokens": 0}\' > "$KAIRO_USAGE_FILE.live"; '
    "echo forging done"
)


@pytest.mark.reproduces("36.9")
def test_the_real_claude_code_forges_no_usage_through_its_bash_tool(
    kairo: Kairo, tmp_path: Path
) -> None:
    claude = installed(CLAUDE)
    home = tmp_path / "agent-home"
    home.mkdir()
    (home / ".claude.json").write_text("{}")  # there, so that the sandbox lets it write it
    kairo.env["HOME"] = str(home)
    big = Usage(input_tokens=4000, output_tokens=50)
    script = Script(
        Rule(Reply(tools=(bash(FORGE),), usage=big), turn=1),
        Rule(Reply(text="Done.", usage=big), turn=2),
        match="/forger",
        name="forger",
    )
    plan = (
        "version: 1\nname: forged\nsandbox: {kind: bwrap}\n"
        f"agent: {{kind: claude-code, binary: {claude}, permission_mode: bypassPermissions}}\n"
        "subtasks:\n  - id: forger\n    prompt: Forge your usage.\n"
    )
    with serve(script) as server:
        kairo.env.update(server.claude_env())
        done = kairo.run("start", str(kairo.write_plan(plan)), "--wait", timeout=300)
        fresh, output = server.usage("forger")
        told = [e.conversation.last_text for e in server.exchanges("forger")]

    assert done.returncode == 0, kairo.run("report").stdout
    view = next(v for v in kairo.json("status")["subtasks"] if v["id"] == "forger")
    assert fresh >= 8000 and (view["input_tokens"], view["output_tokens"]) == (fresh, output)
    assert view["session_id"] != "forged"
    assert "forging done" in told[1] and "Read-only file system" in told[1], told[1]
    run = attempt_folder(kairo, "forger")
    assert not (run / "usage.jsonl").is_symlink()
    assert "forged" not in (run / "usage.jsonl").read_text()
