"""The adapters against the REAL programs: every flag they pass is accepted, a run without
credentials ends as a clean failure the filter reports, and (against the scripted model
server, tests/model_server) whole sessions parse, resume and count as the stand-in
executables claim.

The programs are the pinned versions tests/real_agents.py installs (`make test` does);
each runs with an empty HOME and no credentials in its environment.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from agents.aider import AiderAgent
from agents.base import AttemptContext
from agents.claude_code import ClaudeCodeAgent
from agents.codex import CodexAgent
from agents.usage import resume_point, resumed
from orchestrator.core.plan import AgentSpec
from tests.agents.conftest import Attempts, Run
from tests.model_server import Reply, Rule, Script, Usage, bash, edit, read, serve
from tests.real_agents import AIDER, CLAUDE, CODEX, installed

pytestmark = pytest.mark.slow

REFUSED = ("unknown option", "is invalid", "unexpected argument", "error: invalid value")
PROMPT = "- rename fmt to format"  # starts with a dash: must stay the prompt
# What the scripted model says each call used (disjoint, as the real API's are).
CLAUDE_CALL = Usage(
    input_tokens=120,
    output_tokens=7,
    cache_creation_input_tokens=2000,
    cache_read_input_tokens=3000,
)
CODEX_CALL = Usage(input_tokens=500, output_tokens=30, cache_read_input_tokens=1000)
HELLO = "Hello from the scripted model."


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    return installed(CLAUDE)


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    return installed(CODEX)


def real(binary: Path, **keys: object) -> AgentSpec:
    kind = {"claude": "claude-code", "codex": "codex", "aider": "aider"}[binary.name]
    return AgentSpec(kind=kind, binary=str(binary), **keys)  # type: ignore[arg-type]


def run_claude(
    attempts: Attempts, spec: AgentSpec, context: AttemptContext, env: dict[str, str] | None = None
) -> Run:
    adapter = ClaudeCodeAgent()
    full_env = {**adapter.environment(spec, context), **(env or {})}
    return attempts.run(adapter.argv(spec, context), context, full_env, timeout=90)


def assert_accepted(run: Run) -> None:
    lowered = run.out.lower()
    assert not [word for word in REFUSED if word in lowered], run.out


# --- claude, no credentials --------------------------------------------------------------


@pytest.mark.parametrize(
    "keys",
    [
        {},
        {
            "model": "sonnet",
            "permission_mode": "plan",
            "extra_args": ("--max-turns", "3", "--append-system-prompt", "Be brief."),
        },
        {"permission_mode": "dontAsk", "extra_args": ("--max-budget-usd", "1")},
    ],
    ids=["defaults", "every-key", "other-mode"],
)
def test_claude_without_credentials_is_a_clean_reported_failure(
    claude_bin: Path, attempts: Attempts, keys: dict[str, object]
) -> None:
    run = run_claude(attempts, real(claude_bin, **keys), attempts.context(PROMPT))
    assert_accepted(run)
    assert run.code == 1
    assert "Not logged in · Please run /login" in run.out
    last = run.out.splitlines()[-1]
    assert last.startswith("── claude-code failed: authentication_failed: Not logged in")
    record = run.record  # decided: one usage line for every run, failed ones too
    assert (record["result"], record["is_error"], record["input_tokens"]) == (
        "authentication_failed",
        True,
        0,
    )
    assert record["session_id"]
    if "model" in keys:
        assert "· model claude-sonnet" in run.out  # the alias, resolved


def test_claude_resuming_a_session_it_does_not_have(claude_bin: Path, attempts: Attempts) -> None:
    missing = str(uuid.uuid4())
    context = attempts.context(PROMPT, resume_session=missing)
    run = run_claude(attempts, real(claude_bin), context)
    assert_accepted(run)
    assert run.code == 1
    assert f"No conversation found with session ID: {missing}" in run.out
    assert (run.record["result"], run.record["session_id"]) == ("error_during_execution", None)


# --- claude against a local Messages API -------------------------------------------------


def test_real_claude_session_counts_and_resumes(claude_bin: Path, attempts: Attempts) -> None:
    spec = real(claude_bin, model="sonnet")
    with serve(Script(default=Reply(text=HELLO, usage=CLAUDE_CALL))) as api:
        first = run_claude(attempts, spec, attempts.context(PROMPT), api.claude_env())
        assert first.code == 0, first.out
        assert HELLO in first.out
        # Every API call is counted (a session may make more than one)
        fresh, output = api.usage()
        assert (first.record["input_tokens"], first.record["output_tokens"]) == (fresh, output)
        calls = len(api.exchanges())
        assert (
            first.record["cache_read_input_tokens"] == calls * CLAUDE_CALL.cache_read_input_tokens
        )
        assert first.record["cost_usd"] > 0
        assert PROMPT in api.exchanges()[-1].conversation.messages_text
        point = resume_point(attempts.usage_files())
        assert point is not None
        # a resumed session is sent the feedback alone (AttemptContext.message)
        second_context = resumed(attempts.context(PROMPT, feedback="Now the tests"), point)
        second = run_claude(attempts, spec, second_context, api.claude_env())
    assert second.code == 0, second.out
    assert second.record["session_id"] == point.session_id
    # the conversation went on: the second call carries the first prompt and reply
    last = api.exchanges()[-1].conversation
    assert PROMPT in last.messages_text and HELLO in last.messages_text
    assert "Now the tests" in last.last_text and last.turn == 2


def test_real_claude_max_turns_is_a_failure_that_can_resume(
    claude_bin: Path, attempts: Attempts
) -> None:
    spec = real(
        claude_bin,
        permission_mode="acceptEdits",
        extra_args=("--max-turns", "1", "--allowedTools", "Bash"),
    )
    with serve(Script(default=Reply(tools=(bash("ls"),)))) as api:
        run = run_claude(attempts, spec, attempts.context(PROMPT), api.claude_env())
    assert run.code == 1
    assert "→ Bash: ls" in run.out
    assert run.out.splitlines()[-1].startswith(
        "── claude-code failed: error_max_turns: Reached maximum number of turns (1)"
    )
    assert run.record["result"] == "error_max_turns"
    assert run.record["output_tokens"] > 0 and run.record["session_id"]


def test_real_claude_is_counted_call_by_call_and_stopped_at_its_allowance(
    claude_bin: Path, attempts: Attempts
) -> None:
    (attempts.worktree / "calc.py").write_text("x = 1\n")
    reading = Reply(tools=(read("calc.py"),), usage=Usage(input_tokens=5000, output_tokens=50))
    with serve(Script(default=reading)) as api:
        context = attempts.context(PROMPT, token_allowance=20_000)
        run = run_claude(attempts, real(claude_bin), context, api.claude_env())
    record = run.record
    assert (record["result"], record["is_error"]) == ("token_budget", True)
    assert run.code != 0
    # what the stream showed of each answered call, the last one's output included
    used = record["input_tokens"] + record["output_tokens"]
    assert 20_000 <= used <= 20_000 + 5050, record
    assert used <= sum(sum(e.reply.usage.counted) for e in api.exchanges())
    assert "── claude-code stopped: token_budget: its stream showed" in run.out
    # a run cut short reports no cost: it is its model's list price (opus: $5 / $25 per M)
    expected = (record["input_tokens"] * 5 + record["output_tokens"] * 25) / 1e6
    assert record["cost_usd"] == pytest.approx(expected) and record["estimated"] is True
    live = json.loads(Path(context.usage_file + ".live").read_text())
    assert live["tokens"] == used


def test_real_claude_asks_count_tokens_after_a_large_read_and_is_answered(
    claude_bin: Path, attempts: Attempts
) -> None:
    """Besides `HEAD /` and `POST /v1/messages`, Claude Code asks `POST
    /v1/messages/count_tokens` after a large read (docs/agents.md): an endpoint answers it,
    and the scripted one too, with no turn of its script spent."""
    lines = [f"def f{i}(x):\n    return x * {i}  # {'word ' * 12}" for i in range(950)]
    (attempts.worktree / "big.py").write_text("\n".join(lines))
    script = Script(
        Rule(Reply(text="Reading.", tools=(read("big.py"),)), turn=1), default=Reply(text=HELLO)
    )
    with serve(script) as api:
        run = run_claude(attempts, real(claude_bin), attempts.context(PROMPT), api.claude_env())
    assert run.code == 0, run.out
    assert api.count_token_requests, "no count_tokens request"
    assert all(20_000 < counted < 30_000 for counted in api.count_token_requests)
    assert [e.conversation.turn for e in api.exchanges()] == [1, 2]
    assert "def f949" in api.exchanges()[1].conversation.tool_results[0].text


def test_real_claude_retries_an_overloaded_api_and_the_pane_says_so(
    claude_bin: Path, attempts: Attempts
) -> None:
    storm = (Rule(Reply(status=429), times=1), Rule(Reply(status=529), times=1))
    with serve(Script(*storm, default=Reply(text=HELLO))) as api:
        run = run_claude(attempts, real(claude_bin), attempts.context(PROMPT), api.claude_env())
    assert run.code == 0, run.out
    assert "  ⟳ the API answered 429 (rate_limit): retry 1 of 10 in" in run.out
    assert "  ⟳ the API answered 529 (overloaded): retry 2 of 10 in" in run.out
    # retried, then fine: it did not end on an API error
    assert (run.record["api_retries"], run.record["api_status"]) == (2, None)


def test_real_claude_past_its_retries_ends_on_the_api_s_error(
    claude_bin: Path, attempts: Attempts
) -> None:
    with serve(Script(default=Reply(status=529))) as api:
        env = {**api.claude_env(), "CLAUDE_CODE_MAX_RETRIES": "1"}
        run = run_claude(attempts, real(claude_bin), attempts.context(PROMPT), env)
    assert run.code == 1
    record = run.record
    assert (record["result"], record["api_status"], record["api_retries"]) == (
        "server_error",
        529,
        1,
    )
    assert run.out.splitlines()[-1].startswith("── claude-code failed: server_error: API Error")


def test_real_claude_with_a_key_refused_ends_as_one_that_cannot_log_in(
    claude_bin: Path, attempts: Attempts
) -> None:
    with serve(Script(default=Reply(status=401))) as api:
        env = {**api.claude_env(), "CLAUDE_CODE_MAX_RETRIES": "0"}
        run = run_claude(attempts, real(claude_bin), attempts.context(PROMPT), env)
    assert (run.code, run.record["result"], run.record["api_status"]) == (
        1,
        "authentication_failed",
        401,
    )


def test_real_claude_replies_cut_at_the_output_limit_again_and_again(
    claude_bin: Path, attempts: Attempts
) -> None:
    with serve(Script(default=Reply(text="A long answer, cut", stop="max_tokens"))) as api:
        run = run_claude(attempts, real(claude_bin), attempts.context(PROMPT), api.claude_env())
        continued = [e.conversation.last_text for e in api.exchanges()[1:]]
    # Claude Code continues a cut reply itself, three times, then gives up
    assert continued and all("Output token limit hit" in text for text in continued)
    assert (run.code, run.record["result"]) == (1, "max_output_tokens")


def test_real_claude_names_each_edit_it_refused_and_what_it_said(
    claude_bin: Path, attempts: Attempts
) -> None:
    # A worktree inside a .git directory, where Claude Code edits nothing.
    inside = attempts.worktree / ".git" / "kairo" / "worktrees" / "x"
    inside.mkdir(parents=True)
    (inside / "calc.py").write_text("x = 1\n")
    script = Script(
        Rule(Reply(tools=(read("calc.py"),)), turn=1),
        Rule(Reply(tools=(edit("calc.py", "x = 1", "x = 2"),)), turn=2),
        default=Reply(text="I could not edit it."),
    )
    with serve(script) as api:
        context = attempts.context(PROMPT, worktree=str(inside))
        adapter = ClaudeCodeAgent()
        env = {**adapter.environment(real(claude_bin), context), **api.claude_env()}
        run = attempts.run(adapter.argv(real(claude_bin), context), context, env, cwd=inside)
    assert run.code == 0, run.out
    [refusal] = run.record["refusals"]
    assert refusal["tool"] == "Edit" and refusal["target"] == str(inside / "calc.py")
    assert refusal["message"].endswith("which is a sensitive file.")
    assert (inside / "calc.py").read_text() == "x = 1\n"
    assert run.record["summary"] == "I could not edit it."


# --- codex -------------------------------------------------------------------------------


def run_codex(attempts: Attempts, spec: AgentSpec, context: AttemptContext, **how: float) -> Run:
    adapter = CodexAgent()
    env = dict(adapter.environment(spec, context))
    return attempts.run(adapter.argv(spec, context), context, env, timeout=90, **how)  # type: ignore[arg-type]


def test_codex_without_credentials_is_stopped_cleanly(codex_bin: Path, attempts: Attempts) -> None:
    spec = real(
        codex_bin,
        model="gpt-5.5",
        permission_mode="workspace-write",
        extra_args=("--skip-git-repo-check",),
    )
    # Offline it reconnects for ever; online it is refused. Either way the attempt's timeout
    # ends it, as the runner would: SIGTERM after a few seconds.
    run = run_codex(attempts, spec, attempts.context(PROMPT), stop_after=6.0)
    assert_accepted(run)
    assert run.code != 0
    assert "── codex thread " in run.out
    assert run.out.splitlines()[-1].startswith(("── codex ended without", "── codex failed"))
    assert run.record["result"] in ("truncated", "turn_failed", "authentication_failed")
    assert run.record["session_id"]


def test_codex_resuming_a_thread_it_does_not_have(codex_bin: Path, attempts: Attempts) -> None:
    missing = str(uuid.uuid4())
    context = attempts.context(PROMPT, resume_session=missing, resume_totals={"input_tokens": 1})
    run = run_codex(attempts, real(codex_bin, model="gpt-5.5"), context)
    assert_accepted(run)
    assert run.code == 1
    assert f"no rollout found for thread id {missing}" in run.out
    assert (run.record["result"], run.record["session_id"]) == ("truncated", None)


def test_real_codex_thread_counts_each_run_once_and_resumes_writable(
    codex_bin: Path, attempts: Attempts
) -> None:
    with serve(Script(default=Reply(text=HELLO, usage=CODEX_CALL))) as api:
        spec = real(codex_bin, extra_args=tuple(api.codex_args()))
        first = run_codex(attempts, spec, attempts.context(PROMPT))
        assert first.code == 0, first.out
        assert HELLO in first.out
        assert (first.record["input_tokens"], first.record["cache_read_input_tokens"]) == (
            500,
            1000,
        )
        point = resume_point(attempts.usage_files())
        assert point is not None and point.totals == first.record["session_totals"]
        second = run_codex(attempts, spec, resumed(attempts.context("Now the tests"), point))
    assert second.code == 0, second.out
    assert second.record["session_id"] == point.session_id
    assert second.record["session_totals"]["input_tokens"] == 3000  # codex sums the thread
    assert (second.record["input_tokens"], second.record["output_tokens"]) == (500, 30)
    # the flags before `resume` still apply to the resumed thread: it is not read-only
    metadata = [e.headers.get("x-codex-turn-metadata", "") for e in api.exchanges()]
    assert all('"sandbox_mode":"workspace-write"' in m for m in metadata), metadata


# --- aider -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def aider_bin() -> Path:
    return installed(AIDER)


def test_aider_without_credentials_exits_0_and_leaves_the_worktree_alone(
    aider_bin: Path, attempts: Attempts
) -> None:
    (attempts.worktree / "a.py").write_text("x = 1\n")
    context = attempts.context(PROMPT, files=("a.py",))
    adapter = AiderAgent()
    spec = real(aider_bin, model="sonnet")
    run = attempts.run(
        adapter.argv(spec, context), context, dict(adapter.environment(spec, context)), timeout=120
    )
    assert_accepted(run)
    assert run.code == 0  # sic: aider reports an API error with status 0 (see agents/aider.py)
    assert "AuthenticationError" in run.out
    assert "Added a.py to the chat." in run.out
    status = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"],
        cwd=attempts.worktree,
        capture_output=True,
        text=True,
        check=True,
    )
    assert status.stdout == "?? a.py\n"  # no .aider* file, no .gitignore edit
    assert (Path(context.scratch) / "aider.chat.history.md").exists()
    assert run.usage == []  # aider reports no usage
