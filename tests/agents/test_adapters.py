"""Each adapter's command line and environment, for each configuration (pure: nothing runs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import agents.claude_stream
import agents.codex_stream
from agents.aider import AiderAgent
from agents.base import AttemptContext
from agents.claude_code import ClaudeCodeAgent
from agents.codex import CodexAgent
from agents.endpoints import agent_templates, expand, unset_references
from agents.registry import adapter_for, supported_kinds
from agents.shell import CommandAgent, ShellAgent
from orchestrator.core.plan import AgentSpec, Endpoint

CONTEXT = AttemptContext(
    execution_id="01JEXEC",
    subtask_id="rename",
    attempt=1,
    prompt="- rename fmt to format",  # a prompt may start with a dash
    prompt_file="/runs/rename/1/prompt.txt",
    feedback="",
    files=("src/a.py", "src/b.py"),
    worktree="/wt/rename",
    idempotency_key="k1",
    usage_file="/runs/rename/1/usage.jsonl",
    scratch="/runs/rename/1/scratch",
)
RESUMING = AttemptContext(
    **{
        **CONTEXT.__dict__,
        "attempt": 2,
        "feedback": "The check `pytest` failed: boom",
        "resume_session": "sess-1",
        "resume_totals": {"input_tokens": 9},
    }
)


def test_a_session_continued_is_told_only_what_was_wrong_not_the_task_again() -> None:
    assert RESUMING.message == (
        "This is attempt 2 at the same task: the last one was not accepted. The worktree "
        "holds the work so far; fix what the feedback names.\n\n"
        "## Feedback on your previous attempt\n\nThe check `pytest` failed: boom\n"
    )
    cut_short = AttemptContext(**{**RESUMING.__dict__, "feedback": ""})
    assert "was cut short" in cut_short.message
    assert CONTEXT.message == CONTEXT.prompt  # a cold start gets the whole prompt


def filtered(module: object) -> list[str]:
    path = str(Path(module.__file__).resolve())  # type: ignore[attr-defined]
    return [sys.executable, "-I", "-S", path]


# --- claude-code -------------------------------------------------------------------------


def test_claude_defaults() -> None:
    assert ClaudeCodeAgent().argv(AgentSpec(kind="claude-code"), CONTEXT) == [
        *filtered(agents.claude_stream),
        "--",
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--permission-mode",
        "acceptEdits",
        "--",
        "- rename fmt to format",
    ]


def test_claude_may_run_its_subtask_s_check_and_is_stopped_at_its_allowance() -> None:
    context = AttemptContext(
        **{**CONTEXT.__dict__, "checks": ("python -m pytest -q",), "token_allowance": 5000}
    )
    argv = ClaudeCodeAgent().argv(AgentSpec(kind="claude-code"), context)
    assert argv[4:7] == ["--token-limit", "5000", "--"]
    mode = argv.index("--permission-mode")
    assert argv[mode : mode + 4] == [
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Bash(python -m pytest -q:*)",
    ]
    # bypassing permissions, nothing needs allowing
    bypass = AgentSpec(kind="claude-code", permission_mode="bypassPermissions")
    assert "--allowedTools" not in ClaudeCodeAgent().argv(bypass, context)


def test_claude_with_every_key_and_a_session_to_resume() -> None:
    spec = AgentSpec(
        kind="claude-code",
        binary="~/bin/claude",
        model="sonnet",
        permission_mode="plan",
        extra_args=("--max-turns", "30"),
    )
    argv = ClaudeCodeAgent().argv(spec, RESUMING)
    command = argv[argv.index("--") + 1 :]
    assert command == [
        str(Path("~/bin/claude").expanduser()),
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--permission-mode",
        "plan",
        "--model",
        "sonnet",
        "--resume",
        "sess-1",
        "--max-turns",
        "30",
        "--",
        RESUMING.message,
    ]


def test_claude_environment_is_plan_md_s_and_no_self_update() -> None:
    env = ClaudeCodeAgent().environment(AgentSpec(kind="claude-code"), CONTEXT)
    assert env == {**CONTEXT.environment(), "DISABLE_AUTOUPDATER": "1"}
    assert env["KAIRO_USAGE_FILE"] == "/runs/rename/1/usage.jsonl"  # where the filter writes


# --- codex -------------------------------------------------------------------------------


def test_codex_defaults() -> None:
    assert CodexAgent().argv(AgentSpec(kind="codex"), CONTEXT) == [
        *filtered(agents.codex_stream),
        "--",
        "codex",
        "exec",
        "--json",
        "--sandbox",
        "workspace-write",
        "--",
        "- rename fmt to format",
    ]


def test_codex_resume_keeps_its_flags_before_the_subcommand_and_passes_the_baseline() -> None:
    spec = AgentSpec(
        kind="codex",
        binary="/opt/codex",
        model="gpt-5.5",
        permission_mode="danger-full-access",
        extra_args=("-c", 'model_reasoning_effort="high"'),
    )
    assert CodexAgent().argv(spec, RESUMING) == [
        *filtered(agents.codex_stream),
        "--baseline",
        json.dumps({"input_tokens": 9}),
        "--",
        "/opt/codex",
        "exec",
        "--json",
        "--sandbox",
        "danger-full-access",
        "-m",
        "gpt-5.5",
        "-c",
        'model_reasoning_effort="high"',
        "resume",
        "sess-1",
        "--",
        RESUMING.message,
    ]


def test_codex_resume_without_totals_has_no_baseline() -> None:
    context = AttemptContext(**{**RESUMING.__dict__, "resume_totals": None})
    argv = CodexAgent().argv(AgentSpec(kind="codex"), context)
    assert "--baseline" not in argv
    assert argv[-4:] == ["resume", "sess-1", "--", context.message]


# --- aider -------------------------------------------------------------------------------

HEADLESS = [
    "--yes-always",
    "--no-auto-commits",
    "--no-dirty-commits",
    "--no-gitignore",
    "--map-tokens",
    "0",
    "--no-restore-chat-history",
    "--no-pretty",
    "--no-fancy-input",
    "--no-check-update",
    "--no-show-release-notes",
    "--no-analytics",
    "--no-notifications",
    "--no-detect-urls",
    "--no-show-model-warnings",
]


def test_aider_writes_nothing_of_its_own_into_the_worktree_and_edits_the_owned_files() -> None:
    spec = AgentSpec(kind="aider", model="sonnet", extra_args=("--map-tokens", "1024"))
    assert AiderAgent().argv(spec, CONTEXT) == [
        "aider",
        "--message-file",
        "/runs/rename/1/prompt.txt",
        *HEADLESS,
        "--chat-history-file",
        "/runs/rename/1/scratch/aider.chat.history.md",
        "--input-history-file",
        "/runs/rename/1/scratch/aider.input.history",
        "--model",
        "sonnet",
        "--map-tokens",
        "1024",
        "--",
        "src/a.py",
        "src/b.py",
    ]


def test_aider_without_files_or_model() -> None:
    context = AttemptContext(**{**CONTEXT.__dict__, "files": ()})
    argv = AiderAgent().argv(AgentSpec(kind="aider", binary="/opt/aider"), context)
    assert argv[0] == "/opt/aider"
    assert "--" not in argv
    assert "--model" not in argv
    assert AiderAgent().environment(AgentSpec(kind="aider"), context) == context.environment()


def test_aider_cannot_resume_and_reports_no_usage() -> None:
    adapter = AiderAgent()
    assert (adapter.supports_resume, adapter.reports_usage) == (False, False)
    assert "sess-1" not in adapter.argv(AgentSpec(kind="aider"), RESUMING)


# --- every kind --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "resume", "usage", "program"),
    [
        ("shell", False, False, None),
        ("command", False, False, "aider"),
        ("claude-code", True, True, "claude"),
        ("codex", True, True, "codex"),
        ("aider", False, False, "aider"),
    ],
)
def test_what_each_kind_can_do(kind: str, resume: bool, usage: bool, program: str | None) -> None:
    adapter = adapter_for(kind)
    spec = AgentSpec(kind=kind, run="x", command=("aider", "--yes"))  # type: ignore[arg-type]
    assert adapter.kind == kind
    assert (adapter.supports_resume, adapter.reports_usage) == (resume, usage)
    assert adapter.binary(spec) == program
    assert adapter.idempotent(spec) is False
    assert adapter.idempotent(spec.model_copy(update={"idempotent": True})) is True


def test_every_kind_of_the_plan_has_an_adapter() -> None:
    assert supported_kinds() == ("shell", "command", "claude-code", "codex", "aider")
    assert isinstance(adapter_for("shell"), ShellAgent)
    assert isinstance(adapter_for("command"), CommandAgent)


# --- endpoints and env -------------------------------------------------------------------

GATEWAY = Endpoint(url="http://127.0.0.1:4000/v1", key_env="GW_KEY")


def test_an_endpoint_is_each_kind_s_own_settings_and_names_its_key() -> None:
    claude = AgentSpec(kind="claude-code", endpoint=GATEWAY, env={"X": "${TEAM}-x"})
    assert agent_templates(claude) == {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:4000/v1",
        "ANTHROPIC_API_KEY": "${GW_KEY}",
        "X": "${TEAM}-x",
    }
    assert expand(agent_templates(claude), {"GW_KEY": "sk-1", "TEAM": "red"}) == {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:4000/v1",
        "ANTHROPIC_API_KEY": "sk-1",
        "X": "red-x",
    }
    assert list(unset_references(claude, {"GW_KEY": "sk-1"})) == ["TEAM"]
    literal = AgentSpec(kind="shell", run="true", env={"T": "$${TEAM} is ${TEAM}"})
    assert expand(agent_templates(literal), {"TEAM": "red"}) == {"T": "${TEAM} is red"}
    assert list(unset_references(literal, {"TEAM": "red"})) == []
    aider = AgentSpec(kind="aider", endpoint=GATEWAY, model="qwen")
    assert agent_templates(aider)["OPENAI_API_BASE"] == "http://127.0.0.1:4000/v1"
    argv = AiderAgent().argv(aider, CONTEXT)
    assert argv[argv.index("--model") + 1] == "openai/qwen"  # litellm's word for such a one


def test_codex_gets_a_model_provider_of_the_endpoint_and_reads_the_key_itself() -> None:
    spec = AgentSpec(kind="codex", endpoint=GATEWAY)
    argv = CodexAgent().argv(spec, CONTEXT)
    command = argv[argv.index("--") + 1 :]
    assert command[5:9] == [
        "-c",
        'model_provider="kairo"',
        "-c",
        'model_providers.kairo={name="kairo",base_url="http://127.0.0.1:4000/v1",'
        'env_key="GW_KEY",wire_api="responses"}',
    ]
    assert agent_templates(spec) == {"GW_KEY": "${GW_KEY}"}  # past the secret filter


def test_each_simple_command_of_the_check_is_allowed_as_claude_code_matches_them() -> None:
    context = AttemptContext(**{**CONTEXT.__dict__, "checks": ("ruff check . && pytest -q\nmypy",)})
    argv = ClaudeCodeAgent().argv(AgentSpec(kind="claude-code"), context)
    allowed = argv[argv.index("--allowedTools") + 1 : argv.index("--allowedTools") + 4]
    assert allowed == ["Bash(ruff check .:*)", "Bash(pytest -q:*)", "Bash(mypy:*)"]


def test_codex_with_its_home_in_the_temporary_directory_gets_a_tmpdir_of_its_own(
    tmp_path: Path,
) -> None:
    context = AttemptContext(**{**CONTEXT.__dict__, "scratch": str(tmp_path / "scratch")})
    home_in_tmp = AgentSpec(kind="codex", env={"CODEX_HOME": "/tmp/codex-home"})
    assert CodexAgent().environment(home_in_tmp, context)["TMPDIR"] == str(tmp_path / "scratch")
    elsewhere = AgentSpec(kind="codex", env={"CODEX_HOME": "/var/lib/codex-home"})
    assert "TMPDIR" not in CodexAgent().environment(elsewhere, context)


def jail(argv: list[str]) -> list[str]:
    return ["jail", "--", *argv]


@pytest.mark.parametrize(
    ("spec", "stream"),
    [
        (AgentSpec(kind="claude-code"), agents.claude_stream),
        (AgentSpec(kind="codex"), agents.codex_stream),
        (AgentSpec(kind="aider"), None),
        (AgentSpec(kind="shell", run="make"), None),
        (AgentSpec(kind="command", command=("fix", "{files}")), None),
    ],
)
def test_the_sandbox_holds_the_agent_program_and_never_its_stream_filter(
    spec: AgentSpec, stream: object
) -> None:
    adapter = adapter_for(spec.kind)
    alone = adapter.argv(spec, CONTEXT)
    if stream is None:  # no filter: the whole command is the agent's
        assert adapter.argv(spec, CONTEXT, contain=jail) == jail(alone)
    else:
        cut = len(filtered(stream)) + 1  # the filter's own, then "--"
        assert adapter.argv(spec, CONTEXT, contain=jail) == [*alone[:cut], *jail(alone[cut:])]
    assert adapter.claims_usage == (spec.kind in ("shell", "command"))
