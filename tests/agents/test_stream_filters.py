"""The stream filters, run as the adapters run them, against the stand-ins of the real CLIs:
what the pane shows, the one usage line, the exit status, for each way a run ends."""

from __future__ import annotations

import time
from typing import Any

import pytest

from agents.base import AgentAdapter
from agents.claude_code import ClaudeCodeAgent
from agents.claude_stream import ClaudeStream
from agents.codex import CodexAgent
from agents.codex_stream import CodexStream
from agents.stream_filter import AUTHENTICATION_FAILED
from agents.usage import resume_point, resumed
from orchestrator.core import continuation
from orchestrator.core.plan import AgentSpec
from tests.agents.conftest import Attempts, Run

CLAUDE = AgentSpec(kind="claude-code")
CODEX = AgentSpec(kind="codex")


def claude(
    attempts: Attempts,
    spec: AgentSpec = CLAUDE,
    *,
    context: dict[str, Any] | None = None,
    stop_when: str | None = None,
) -> Run:
    return run(ClaudeCodeAgent(), attempts, spec, context, stop_when)


def codex(
    attempts: Attempts,
    spec: AgentSpec = CODEX,
    *,
    context: dict[str, Any] | None = None,
    stop_when: str | None = None,
) -> Run:
    return run(CodexAgent(), attempts, spec, context, stop_when)


def run(
    adapter: AgentAdapter,
    attempts: Attempts,
    spec: AgentSpec,
    context_fields: dict[str, Any] | None,
    stop_when: str | None,
) -> Run:
    context = attempts.context(**(context_fields or {}))
    env = dict(adapter.environment(spec, context))
    return attempts.run(adapter.argv(spec, context), context, env, stop_when=stop_when)


def lines(run: Run) -> list[str]:
    return run.out.splitlines()


# --- claude-code -------------------------------------------------------------------------


def test_claude_success_is_rendered_line_by_line_and_counted(attempts: Attempts) -> None:
    run = claude(attempts)
    assert run.code == 0
    session = run.record["session_id"]
    assert lines(run) == [
        f"── claude-code 2.1.197 · session {session} · model claude-opus-4-8[1m] · "
        "permission mode acceptEdits",
        "Working on: Rename fmt to format",
        "→ Bash: ls",
        "→ Edit: src/a.py",
        "  ✗ <tool_use_error>File has not been read yet.</tool_use_error>",
        "Done.",
        "── claude-code done: success · 3 turns · 2120 in / 7 out tokens (+3000 cache reads)"
        " · $0.0148",
    ]
    assert run.record == {
        "input_tokens": 2120,  # 120 fresh + 2000 written to the cache
        "output_tokens": 7,
        "cache_read_input_tokens": 3000,
        "cache_creation_input_tokens": 2000,
        "cost_usd": 0.014775,
        "session_id": session,
        "result": "success",
        "is_error": False,
        "num_turns": 3,
        "exit_code": 0,
        "api_retries": 0,
        "api_status": None,
        "refusals": [],
        "summary": "Done.",  # its last words, for the commit's body
    }


def test_claude_without_credentials_fails_with_its_message(attempts: Attempts) -> None:
    attempts.scenario = "not_logged_in"
    run = claude(attempts)
    assert run.code == 1
    assert "authentication_failed: Not logged in · Please run /login" in lines(run)
    assert lines(run)[-1].startswith(
        "── claude-code failed: authentication_failed: Not logged in · Please run /login"
    )
    # the subtype says success; is_error decides, and the assistant's error names it
    assert run.record["result"] == "authentication_failed"
    assert run.record["is_error"] is True
    assert run.record["input_tokens"] == run.record["output_tokens"] == 0


def test_claude_max_turns_counts_every_api_call_and_fails(attempts: Attempts) -> None:
    attempts.scenario = "max_turns"
    run = claude(attempts)
    assert run.code == 1
    assert lines(run)[-1] == (
        "── claude-code failed: error_max_turns: Reached maximum number of turns (2) · "
        "3 turns · 6360 in / 126 out tokens (+9000 cache reads) · $0.0470"
    )
    # modelUsage (every call, the one cut off by the limit too), not the result's usage
    assert run.record["input_tokens"] == 360 + 6000
    assert run.record["output_tokens"] == 126
    assert run.record["result"] == "error_max_turns"
    assert run.record["session_id"] is not None  # a continuation resumes it


def test_a_claude_stream_without_a_result_is_truncated_and_estimated(attempts: Attempts) -> None:
    attempts.scenario = "truncated"
    run = claude(attempts)
    assert run.code == 1  # the program said 0; a stream without a result is no success
    assert lines(run)[-1] == (
        "── claude-code ended without a result (exit 0), the stream was cut short"
    )
    record = run.record
    assert (record["result"], record["is_error"], record["estimated"]) == ("truncated", True, True)
    # msg_1 came as two events (text, tool use): counted once
    assert (record["input_tokens"], record["output_tokens"]) == (2120, 1)


def test_a_stopped_claude_still_records_what_it_used(attempts: Attempts) -> None:
    attempts.scenario = "hang"
    run = claude(attempts, stop_when="→ Bash: ls")
    assert run.code == 128 + 15  # the filter passed SIGTERM on; the agent died of it
    assert run.record["result"] == "truncated"
    assert run.record["exit_code"] == 143
    assert run.record["session_id"] is not None


def test_claude_resumes_the_session_an_earlier_attempt_recorded(attempts: Attempts) -> None:
    first = claude(attempts)
    point = resume_point(attempts.usage_files())
    assert point is not None and point.session_id == first.record["session_id"]
    context = resumed(attempts.context(), point)
    adapter = ClaudeCodeAgent()
    second = attempts.run(adapter.argv(CLAUDE, context), context)
    assert second.code == 0
    assert second.argv == [
        [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--permission-mode",
            "acceptEdits",
            "--resume",
            point.session_id,
            "--",
            context.message,  # not the task again: the session has it
        ]
    ]
    assert second.record["session_id"] == point.session_id


def test_a_session_that_cannot_be_resumed_is_not_resumed_again(attempts: Attempts) -> None:
    missing = "0b9c2d4e-1111-4222-8333-444455556666"
    run = claude(attempts, context={"resume_session": missing})
    assert run.code == 1
    assert f"No conversation found with session ID: {missing}" in lines(run)
    assert run.record["result"] == "error_during_execution"
    assert run.record["session_id"] is None  # no session started: the next attempt is cold
    assert resume_point(attempts.usage_files()) is None


def test_a_flag_claude_refuses_is_a_readable_failure(attempts: Attempts) -> None:
    run = claude(attempts, AgentSpec(kind="claude-code", extra_args=("--bogus",)))
    assert run.code == 1
    assert lines(run) == [
        "error: unknown option '--bogus'",
        "── claude-code ended without a result (exit 1), the stream was cut short: "
        "error: unknown option '--bogus'",
    ]
    assert run.record["session_id"] is None


def test_a_missing_claude_program_is_exit_127_with_a_record(attempts: Attempts) -> None:
    run = claude(attempts, AgentSpec(kind="claude-code", binary="/nonexistent/claude"))
    assert run.code == 127
    assert lines(run) == [
        "── claude-code did not start: cannot start /nonexistent/claude: No such file or directory"
    ]
    assert run.record["result"] == "truncated"


# --- codex -------------------------------------------------------------------------------


def test_codex_success_is_rendered_and_counted(attempts: Attempts) -> None:
    run = codex(attempts)
    assert run.code == 0
    thread = run.record["session_id"]
    assert lines(run) == [
        "Reading additional input from stdin...",  # its stderr, passed through
        f"── codex thread {thread}",
        "→ $ bash -lc ls",
        "→ $ bash -lc 'pytest -q'",
        "  ✗ exit 1: 1 failed, 2 passed",
        "→ edit: update a.py, add b.py",
        "Did: Rename fmt to format",
        "── codex done: success · 500 in / 30 out tokens (+1000 cached)",
    ]
    assert run.record == {
        "input_tokens": 500,  # 1500 of which 1000 came from the cache
        "output_tokens": 30,
        "cache_read_input_tokens": 1000,
        "cost_usd": None,
        "session_id": thread,
        "session_totals": {"input_tokens": 1500, "cached_input_tokens": 1000, "output_tokens": 30},
        "result": "success",
        "is_error": False,
        "exit_code": 0,
        "api_retries": 0,
        "api_status": None,
        "refusals": [],
        "summary": "Did: Rename fmt to format",  # its last message
    }


def test_a_resumed_codex_thread_counts_only_its_own_run(attempts: Attempts) -> None:
    codex(attempts)
    point = resume_point(attempts.usage_files())
    assert point is not None
    context = resumed(attempts.context(prompt="Now fix the tests"), point)
    second = attempts.run(CodexAgent().argv(CODEX, context), context)
    assert second.code == 0
    resume = ["exec", "--json", "--sandbox", "workspace-write", "resume", point.session_id]
    assert second.argv[0][:6] == resume
    # codex reported 3000/2000/60 for the thread; the first run's 1500/1000/30 is not ours
    assert second.record["session_totals"]["input_tokens"] == 3000
    assert (second.record["input_tokens"], second.record["output_tokens"]) == (500, 30)
    assert second.record["session_id"] == point.session_id


def test_codex_turn_failed_is_a_failure_with_its_message(attempts: Attempts) -> None:
    attempts.scenario = "turn_failed"
    run = codex(attempts)
    assert run.code == 1
    message = (
        "unexpected status 401 Unauthorized: Incorrect API key provided, "
        "url: https://api.openai.com/v1/responses"
    )
    assert f"codex: {message}" in lines(run)
    assert lines(run)[-1] == f"── codex failed: {message} · 0 in / 0 out tokens (+0 cached)"
    assert (run.record["result"], run.record["is_error"]) == ("authentication_failed", True)


def test_a_codex_stream_without_turn_completed_is_truncated(attempts: Attempts) -> None:
    attempts.scenario = "truncated"
    run = codex(attempts)
    assert run.code == 1
    assert lines(run)[-1] == (
        "── codex ended without completing its turn (exit 0), the stream was cut short: "
        "Reading additional input from stdin..."
    )
    assert run.record["result"] == "truncated"
    assert run.record["session_totals"] is None


def test_a_codex_that_keeps_reconnecting_is_stopped_cleanly(attempts: Attempts) -> None:
    attempts.scenario = "reconnect"
    run = codex(attempts, stop_when="waiting for network")
    assert run.code == 143
    assert "codex: Reconnecting... 2/5 (stream disconnected before completion: failed to " in (
        run.out
    )
    assert lines(run)[-1].startswith(
        "── codex ended without completing its turn (exit 143), the stream was cut short: "
        "Reconnecting... waiting for network"
    )
    assert run.record["result"] == "truncated"
    assert run.record["session_id"] is not None


def test_codex_resuming_an_unknown_thread_starts_cold_next_time(attempts: Attempts) -> None:
    missing = "0b9c2d4e-1111-4222-8333-444455556666"
    run = codex(attempts, context={"resume_session": missing})
    assert run.code == 1
    assert (
        f"Error: thread/resume: thread/resume failed: no rollout found for thread id {missing} "
        "(code -32600)" in lines(run)
    )
    assert run.record["session_id"] is None
    assert resume_point(attempts.usage_files()) is None


def test_a_process_the_agent_leaves_behind_does_not_hold_the_filter(attempts: Attempts) -> None:
    result = (
        '{"type":"result","subtype":"success","is_error":false,"num_turns":1,'
        '"total_cost_usd":0,"usage":{"input_tokens":1,"output_tokens":1}}'
    )
    agent = attempts.root / "claude"
    agent.write_text(f"#!/bin/sh\nsleep 30 &\necho '{result}'\n")  # the sleep keeps our pipes
    agent.chmod(0o755)
    started = time.monotonic()
    run = claude(attempts, AgentSpec(kind="claude-code", binary=str(agent)))
    assert time.monotonic() - started < 10
    assert run.code == 0
    assert run.record["result"] == "success"


@pytest.mark.parametrize(
    ("message", "result"),
    [
        ("unexpected status 401 Unauthorized: Incorrect API key provided", AUTHENTICATION_FAILED),
        (
            "Your access token could not be refreshed because your refresh token has expired. "
            "Please log out and sign in again.",
            AUTHENTICATION_FAILED,
        ),
        ("stream disconnected before completion: error sending request", "turn_failed"),
        ("unexpected status 4010: not an HTTP status", "turn_failed"),
    ],
)
def test_a_codex_turn_failed_for_want_of_a_login_is_authentication_failed(
    message: str, result: str
) -> None:
    stream = CodexStream()
    stream.event({"type": "turn.failed", "error": {"message": message}})
    record, closing = stream.finish(1, [])
    assert (record["result"], record["is_error"]) == (result, True)
    assert closing.startswith(f"── codex failed: {message[:40]}")


def test_a_claude_error_names_the_result_only_when_its_subtype_says_nothing() -> None:
    def finished(subtype: str) -> str:
        stream = ClaudeStream()
        stream.event({"type": "assistant", "error": AUTHENTICATION_FAILED, "message": {}})
        stream.event({"type": "result", "subtype": subtype, "is_error": True, "num_turns": 1})
        record, _ = stream.finish(1, [])
        return str(record["result"])

    assert finished("success") == AUTHENTICATION_FAILED
    assert finished("error_max_turns") == "error_max_turns"  # cut short: sent back, as before


def test_the_result_the_filters_record_is_the_one_continuation_gives_up_on() -> None:
    assert AUTHENTICATION_FAILED == continuation.AUTHENTICATION_FAILED
