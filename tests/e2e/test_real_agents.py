"""The real Claude Code, Codex CLI and Aider, each in its tmux pane, doing real work on a
real Python project through their own tools, against the scripted model server
(tests/model_server): what a user of this tool comes for.

Each test runs a plan whose subtasks are scenarios, side by side, as a user's would be.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import python_project as shop
from tests.e2e.conftest import Kairo, git
from tests.e2e.test_recovery import wait_for
from tests.model_server import ModelServer, Reply, Rule, Script, Usage, bash, read, serve
from tests.real_agents import AIDER, CLAUDE, CODEX, installed

pytestmark = pytest.mark.slow

# What Claude Code's price table says of its default model (claude-opus-4-8), in dollars a
# million tokens: fresh input, cache writes, cache reads, output.
OPUS_PRICES = (5.0, 6.25, 0.5, 25.0)
FEEDBACK = "Feedback on your previous attempt"


@pytest.fixture
def project(kairo: Kairo, repo: Path, tmp_path: Path) -> Kairo:
    """The shop project in the repository; agents with an empty HOME of their own."""
    shop.make_project(repo)
    home = tmp_path / "agent-home"
    home.mkdir()
    kairo.env["HOME"] = str(home)
    return kairo


@pytest.fixture
def claude() -> Path:
    return installed(CLAUDE)


def plan(name: str, agent: str, subtasks: dict[str, str], *lines: str) -> str:
    head = f"version: 1\nname: {name}\nmax_parallel: 6\nverify: {json.dumps(shop.SUITE)}\n"
    body = "".join(
        f"  - id: {sid}\n    prompt: {json.dumps(text)}\n" for sid, text in subtasks.items()
    )
    return head + "".join(f"{line}\n" for line in lines) + f"agent: {agent}\nsubtasks:\n" + body


def run_plan(kairo: Kairo, server: ModelServer, text: str) -> subprocess.CompletedProcess[str]:
    kairo.env.update(server.claude_env())
    return kairo.run("start", str(kairo.write_plan(text)), "--wait", timeout=400)


def views(kairo: Kairo) -> dict[str, dict[str, Any]]:
    return {view["id"]: view for view in kairo.json("status")["subtasks"]}


def cost(usages: list[Usage]) -> float:
    fresh, write, read_, out = OPUS_PRICES
    return (
        sum(
            u.input_tokens * fresh
            + u.cache_creation_input_tokens * write
            + u.cache_read_input_tokens * read_
            + u.output_tokens * out
            for u in usages
        )
        / 1e6
    )


def suite_passes(repo: Path, branch: str) -> subprocess.CompletedProcess[str]:
    checkout = repo.parent / "check"
    git(repo, "worktree", "add", "-q", "--detach", str(checkout), branch)
    return subprocess.run(shop.SUITE.split(), cwd=checkout, capture_output=True, text=True)


def test_six_claude_code_agents_read_edit_run_the_tests_and_all_merge(
    project: Kairo, repo: Path, claude: Path
) -> None:
    ids = {f"rename-{m}": m for m in shop.MODULES}
    scripts = [shop.script_for(sid, *shop.turns(shop.claude_rename(m))) for sid, m in ids.items()]
    with serve(*scripts) as server:
        text = plan(
            "renames",
            f"{{kind: claude-code, binary: {claude}}}",
            {sid: shop.prompt(m) for sid, m in ids.items()},
        )
        done = run_plan(project, server, text)

    assert done.returncode == 0, project.run("report").stdout
    status = project.json("status")
    branch = status["integration_branch"]
    found = views(project)
    for sid, name in ids.items():
        view = found[sid]
        assert view["state"] == "merged" and view["attempts"] == 1, view
        assert shop.renamed(repo, branch, name), sid
        # every request the server answered for it, counted once: no more, no less
        answered = [e.reply.usage for e in server.exchanges(sid) if e.answered]
        fresh, output = server.usage(sid)
        assert (view["input_tokens"], view["output_tokens"]) == (fresh, output), sid
        assert view["cost_usd"] == pytest.approx(cost(answered), abs=1e-6), sid
        # it ran the suite itself (the plan's verify is allowed it), and said so
        bash_results = [e.conversation.last_text for e in server.exchanges(sid)][3]
        assert "6 passed" in bash_results, bash_results
        body = git(repo, "log", "-1", "--format=%B", view["head_commit"])
        assert f"Renamed price_{name} to total_{name}; the tests pass." in body
    checked = suite_passes(repo, branch)
    assert checked.returncode == 0, checked.stdout
    assert project.json("report")["attempts"]["rename-a"][0]["refusals"] == []


def test_agents_sent_back_continue_their_own_session_and_finish(
    project: Kairo, repo: Path, claude: Path
) -> None:
    """Each a way a real agent stops short, and the feedback that ends it."""
    a, b, c, d, e = shop.MODULES[:5]
    half_done = [shop.read_both(a), Reply(tools=(shop.edit_module(a),)), Reply(text="Done.")]
    scripts = [
        # edits the module, not its test: the suite fails, and says so
        shop.script_for(
            "verify-fails",
            *shop.turns(half_done),
            *shop.turns([Reply(tools=(shop.edit_test(a),)), shop.done(a)], since=FEEDBACK),
        ),
        # gives up at once, then works when sent back
        shop.script_for(
            "early-stop",
            Rule(Reply(text="I need more context before I can do this."), turn=1),
            *shop.turns(shop.claude_rename(b), since=FEEDBACK),
        ),
        # stops at its turn limit (--max-turns 2), resumed to finish
        shop.script_for(
            "turn-limit",
            *shop.turns(shop.claude_rename(c)[:2]),
            *shop.turns(shop.claude_rename(c)[2:], since=FEEDBACK),
        ),
        # every reply cut at max_tokens: Claude Code continues it three times, then gives up
        shop.script_for(
            "max-tokens",
            *shop.turns(shop.claude_rename(d), since=FEEDBACK),
            Rule(Reply(text="Here is my long plan", stop="max_tokens")),
        ),
        # a 529 storm longer than its retries (CLAUDE_CODE_MAX_RETRIES=1), then fine
        shop.script_for(
            "overloaded",
            Rule(Reply(status=529), times=3),
            *shop.turns(shop.claude_rename(e), since=FEEDBACK),
        ),
    ]
    subtasks = {
        "verify-fails": shop.prompt(a),
        "early-stop": shop.prompt(b),
        "turn-limit": shop.prompt(c),
        "max-tokens": shop.prompt(d),
        "overloaded": shop.prompt(e),
    }
    agent = f"{{kind: claude-code, binary: {claude}, env: {{CLAUDE_CODE_MAX_RETRIES: '1'}}}}"
    text = plan("sent-back", agent, subtasks).replace(
        "  - id: turn-limit\n",
        "  - id: turn-limit\n    agent: {extra_args: [--max-turns, '2']}\n",
    )
    with serve(*scripts) as server:
        done = run_plan(project, server, text)

    assert done.returncode == 0, project.run("report").stdout
    found = views(project)
    assert {sid: (v["state"], v["attempts"]) for sid, v in found.items()} == {
        sid: ("merged", 2) for sid in subtasks
    }
    branch = project.json("status")["integration_branch"]
    assert all(shop.renamed(repo, branch, m) for m in (a, b, c, d, e))
    attempts = project.json("report")["attempts"]
    first = {sid: attempts[sid][0]["reason"] for sid in subtasks}
    assert first["verify-fails"].startswith("verify_failed: `")
    assert first["early-stop"] == "no_changes: the attempt left the worktree as it found it"
    assert "its turn limit" in first["turn-limit"]
    assert "output token limit" in first["max-tokens"]
    assert first["overloaded"] == "agent_failed: the API answered 529 Overloaded after 1 retry"

    for sid in subtasks:
        # attempt 2 continued attempt 1's session: the same conversation, told what failed
        sessions = {e.conversation.session for e in server.exchanges(sid) if e.answered}
        assert len(sessions) == 1 and found[sid]["session_id"] in sessions, sid
        told = next(
            e.conversation for e in server.exchanges(sid) if FEEDBACK in e.conversation.last_text
        )
        assert shop.prompt(subtasks_module(sid, subtasks)) in told.messages_text, sid
    told = next(
        e.conversation
        for e in server.exchanges("verify-fails")
        if FEEDBACK in e.conversation.last_text
    )
    assert "cannot import name 'price_a'" in told.last_text  # the suite's own words
    told = next(
        e.conversation
        for e in server.exchanges("max-tokens")
        if FEEDBACK in e.conversation.last_text
    )
    assert "Make smaller edits" in told.last_text
    report = project.run("report", "--markdown").stdout
    assert "**overloaded** attempt 1: not accepted: agent_failed: the API answered 529" in report


def subtasks_module(sid: str, subtasks: dict[str, str]) -> str:
    return subtasks[sid].split("price_")[1].split(" ")[0]


@pytest.fixture
def codex() -> Path:
    return installed(CODEX)


@pytest.fixture
def aider() -> Path:
    return installed(AIDER)


def test_codex_and_aider_through_an_endpoint_each_rename_and_merge(
    project: Kairo, repo: Path, codex: Path, aider: Path
) -> None:
    scripts = [
        shop.script_for("by-codex", *shop.turns(shop.codex_rename("a"))),
        Script(shop.aider_rename("b"), match=shop.prompt("b"), name="by-aider"),
    ]
    with serve(*scripts) as server:
        project.env["SCRIPTED_KEY"] = "sk-scripted"  # the key, named by the plan, not in it
        endpoint = f"{{url: '{server.url}/v1', key_env: SCRIPTED_KEY}}"
        text = plan(
            "two-programs",
            "{kind: shell, run: 'true'}",
            {"by-codex": shop.prompt("a"), "by-aider": shop.prompt("b")},
        )
        text = text.replace(
            "  - id: by-codex\n",
            f"  - id: by-codex\n    agent: {{kind: codex, binary: {codex}, model: gpt-5.5, "
            f"endpoint: {endpoint}}}\n",
        ).replace(
            "  - id: by-aider\n",
            f"  - id: by-aider\n    files: [{shop.module('b')}, {shop.test_file('b')}]\n"
            f"    agent: {{kind: aider, binary: {aider}, model: scripted, endpoint: {endpoint},"
            " extra_args: [--edit-format, diff], env: {LITELLM_LOCAL_MODEL_COST_MAP: 'True'}}\n",
        )
        done = run_plan(project, server, text)

    assert done.returncode == 0, project.run("report").stdout
    branch = project.json("status")["integration_branch"]
    assert shop.renamed(repo, branch, "a") and shop.renamed(repo, branch, "b")
    found = views(project)
    assert (found["by-codex"]["attempts"], found["by-aider"]["attempts"]) == (1, 1)
    # codex counted as the server answered, through its own provider
    assert found["by-codex"]["tokens"] == sum(server.usage("by-codex"))
    patched = [
        e for e in server.exchanges("by-codex") if "Success. Updated" in e.conversation.last_text
    ]
    assert patched, "codex applied no patch"
    keys = {e.headers.get("authorization") for e in server.exchanges("by-codex")}
    assert keys == {"Bearer sk-scripted"}, keys
    assert server.exchanges("by-aider"), "aider never asked the endpoint"


def test_an_agent_that_cannot_log_in_fails_at_once_and_its_program_is_not_started_again(
    project: Kairo, claude: Path
) -> None:
    with serve(Script(default=Reply(status=401))) as server:
        agent = f"{{kind: claude-code, binary: {claude}, env: {{CLAUDE_CODE_MAX_RETRIES: '0'}}}}"
        text = plan("logged-out", agent, {"first": shop.prompt("a"), "second": shop.prompt("b")})
        done = run_plan(project, server, text.replace("max_parallel: 6", "max_parallel: 1"))

    assert done.returncode == 1
    found = views(project)
    assert (found["first"]["state"], found["first"]["attempts"]) == ("failed", 1)
    assert "could not log in (authentication_failed)" in found["first"]["reason"]
    assert found["second"]["state"] == "skipped" and found["second"]["attempts"] == 0


def test_an_agent_reading_for_ever_is_stopped_at_its_budget_its_work_kept(
    project: Kairo, repo: Path, claude: Path
) -> None:
    a = "a"
    forever = Reply(tools=(read(shop.module(a)),), usage=Usage(input_tokens=5000, output_tokens=0))
    script = shop.script_for(
        "reader",
        Rule(Reply(tools=(shop.edit_module(a),), usage=forever.usage), turn=2),
        default=forever,
    )
    with serve(script) as server:
        text = plan(
            "budget", f"{{kind: claude-code, binary: {claude}}}", {"reader": shop.prompt(a)}
        )
        done = run_plan(project, server, text + "    limits: {token_budget: 100000}\n")

    assert done.returncode == 1
    view = views(project)["reader"]
    assert (view["state"], view["attempts"]) == ("failed", 1)
    assert view["reason"].startswith("token_budget: ")
    assert 100_000 <= view["tokens"] <= 110_000, view["tokens"]
    ref = view["reason"].rsplit(" ", 1)[-1]
    assert ref.startswith("refs/kairo/stopped/")
    assert "total_a" in git(repo, "show", f"{ref}:{shop.module(a)}")  # the edit it made


def test_a_command_the_agent_was_refused_is_named_in_its_feedback_and_reason(
    project: Kairo, claude: Path
) -> None:
    script = shop.script_for(
        "deployer",
        Rule(Reply(tools=(bash("make deploy"),)), turn=1),
        Rule(Reply(tools=(bash("make deploy"),)), last_contains=FEEDBACK),
        default=Reply(text="I could not deploy."),
    )
    with serve(script) as server:
        done = run_plan(
            project,
            server,
            plan("refused", f"{{kind: claude-code, binary: {claude}}}", {"deployer": "Deploy it."}),
        )
    assert done.returncode == 1
    view = views(project)["deployer"]
    assert view["reason"] == (
        "no_changes: attempts 1 and 2 changed nothing: your command `make deploy` was refused: "
        "This command requires approval"
    )
    told = next(
        e.conversation for e in server.exchanges("deployer") if FEEDBACK in e.conversation.last_text
    )
    assert (
        "- Your command `make deploy` was refused: This command requires approval" in told.last_text
    )


def test_real_agents_outlive_a_killed_supervisor_and_none_runs_twice(
    project: Kairo, repo: Path, claude: Path
) -> None:
    ids = {f"slow-{m}": m for m in shop.MODULES[:3]}
    scripts = []
    for sid, name in ids.items():
        steps = shop.claude_rename(name)
        steps[1] = replace(steps[1], delay_s=4.0)  # the agents are mid-run for a while
        scripts.append(shop.script_for(sid, *shop.turns(steps)))
    with serve(*scripts) as server:
        project.env.update(server.claude_env())
        text = plan(
            "killed",
            f"{{kind: claude-code, binary: {claude}}}",
            {s: shop.prompt(m) for s, m in ids.items()},
        )
        assert project.run("start", str(project.write_plan(text)), "--detach").returncode == 0
        # every agent is waiting on its second turn: mid-run
        wait_for(
            lambda: all(any(e.conversation.turn == 2 for e in server.exchanges(s)) for s in ids), 60
        )
        os.kill(project.json("status")["supervisor_pid"], signal.SIGKILL)
        resumed = project.run("resume", "--wait", timeout=300)

    assert resumed.returncode == 0, resumed.stderr
    found = views(project)
    branch = project.json("status")["integration_branch"]
    for sid, name in ids.items():
        assert (found[sid]["state"], found[sid]["attempts"]) == ("merged", 1), sid
        assert shop.renamed(repo, branch, name)
        started = [e for e in server.exchanges(sid) if e.conversation.turn == 1]
        assert len(started) == 1, f"{sid}'s agent was started {len(started)} times"


def test_what_an_agent_goes_through_shows_while_it_runs(project: Kairo, claude: Path) -> None:
    script = shop.script_for(
        "retrying", Rule(Reply(status=529), times=3), *shop.turns(shop.claude_rename("a"))
    )
    with serve(script) as server:
        project.env.update(server.claude_env())
        text = plan(
            "live", f"{{kind: claude-code, binary: {claude}}}", {"retrying": shop.prompt("a")}
        )
        assert project.run("start", str(project.write_plan(text)), "--detach").returncode == 0
        seen: list[dict[str, Any]] = []

        def retrying() -> bool:
            running = views(project)["retrying"]["running"]
            seen.append(running or {})
            return bool(running and running["api_retries"] >= 2)

        wait_for(retrying, 60)
        assert seen[-1]["api_status"] == 529
        table = project.run("status").stdout
        # the third retry may come between the view above and this table
        retries = re.search(r"API 529: (\d) retries so far", table)
        assert retries is not None and int(retries[1]) in (2, 3), table
        session = project.json("status")["tmux_session"]
        pane = project.tmux("capture-pane", "-p", "-t", f"={session}:agents-1.0").stdout
        assert "⟳ the API answered 529 (overloaded): retry 2 of 10" in pane
        assert project.run("stop", "--wait", timeout=120).returncode in (0, 1)
