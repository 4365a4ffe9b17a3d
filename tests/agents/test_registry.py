"""check_available / require_available: a missing program is a clear error before start."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.registry import check_available, require_available, require_environment
from orchestrator.core.plan import AgentSpec, ResolvedPlan, ResolvedSubtask, SandboxSpec
from orchestrator.errors import EnvironmentProblem


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "bin"
    directory.mkdir()
    for name in ("claude", "codex"):
        program = directory / name
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    (directory / "aider").write_text("not executable")
    return directory


def test_programs_on_path_are_available(bin_dir: Path) -> None:
    for kind in ("claude-code", "codex"):
        assert check_available(AgentSpec(kind=kind), path=str(bin_dir)) is None


def test_a_missing_program_says_how_to_get_it(bin_dir: Path) -> None:
    assert check_available(AgentSpec(kind="aider"), path=str(bin_dir)) == (
        "agent kind 'aider' needs the program 'aider', which is not on PATH: install it "
        "(python -m pip install aider-chat), or give agent.binary its path"
    )
    assert check_available(AgentSpec(kind="claude-code"), path="/nonexistent") == (
        "agent kind 'claude-code' needs the program 'claude', which is not on PATH: install it "
        "(npm install -g @anthropic-ai/claude-code), or give agent.binary its path"
    )


def test_a_binary_path_must_be_an_executable_file(bin_dir: Path) -> None:
    good = AgentSpec(kind="codex", binary=str(bin_dir / "codex"))
    assert check_available(good, path="/nonexistent") is None
    assert check_available(AgentSpec(kind="aider", binary=str(bin_dir / "aider"))) == (
        f"agent kind 'aider': agent.binary {bin_dir / 'aider'} is not an executable file"
    )
    assert check_available(AgentSpec(kind="codex", binary="/no/such/codex")) == (
        "agent kind 'codex': agent.binary /no/such/codex does not exist"
    )
    assert check_available(AgentSpec(kind="codex", binary=str(bin_dir))) == (
        f"agent kind 'codex': agent.binary {bin_dir} is not an executable file"
    )


def test_what_only_the_worktree_can_tell_is_not_checked() -> None:
    assert check_available(AgentSpec(kind="codex", binary="./node_modules/.bin/codex")) is None
    assert check_available(AgentSpec(kind="shell", run="nonexistent-tool --go")) is None


def test_kind_command_checks_its_first_argument(bin_dir: Path) -> None:
    spec = AgentSpec(kind="command", command=("no-such-agent", "--yes"))
    assert check_available(spec, path=str(bin_dir)) == (
        "agent kind 'command' runs 'no-such-agent', which is not on PATH: install it, "
        "or write its path as the first item of agent.command"
    )
    assert check_available(AgentSpec(kind="command", command=("/no/agent",))) == (
        "agent kind 'command': the first item of agent.command /no/agent does not exist"
    )
    assert (
        check_available(AgentSpec(kind="command", command=("claude",)), path=str(bin_dir)) is None
    )


def subtask(sid: str, agent: AgentSpec) -> ResolvedSubtask:
    return ResolvedSubtask(id=sid, title=sid, prompt="", agent=agent)


def test_require_available_names_every_missing_program_and_who_needs_it(bin_dir: Path) -> None:
    plan = ResolvedPlan(
        name="demo",
        subtasks=(
            subtask("a", AgentSpec(kind="aider")),
            subtask("b", AgentSpec(kind="claude-code")),
            subtask("c", AgentSpec(kind="aider")),
            subtask("d", AgentSpec(kind="shell", run="true")),
            subtask("e", AgentSpec(kind="codex", binary="/no/codex")),
        ),
    )
    with pytest.raises(EnvironmentProblem) as caught:
        require_available(plan, path=str(bin_dir))
    assert caught.value.exit_code == 5
    assert str(caught.value).splitlines() == [
        "agent kind 'aider' needs the program 'aider', which is not on PATH: install it "
        "(python -m pip install aider-chat), or give agent.binary its path (subtasks a, c)",
        "agent kind 'codex': agent.binary /no/codex does not exist (subtask e)",
    ]


def test_require_available_is_silent_when_everything_is_there(bin_dir: Path) -> None:
    plan = ResolvedPlan(name="demo", subtasks=(subtask("b", AgentSpec(kind="claude-code")),))
    require_available(plan, path=str(bin_dir))


def test_root_may_not_bypass_claude_code_s_permissions_outside_a_sandbox() -> None:
    bypass = AgentSpec(kind="claude-code", permission_mode="bypassPermissions")
    plan = ResolvedPlan(
        name="p",
        subtasks=(ResolvedSubtask(id="a", title="a", prompt="", agent=bypass),),
    )
    with pytest.raises(EnvironmentProblem, match="refuses permission_mode bypassPermissions"):
        require_environment(plan, {}, root=True)
    require_environment(plan, {}, root=False)
    require_environment(plan, {"IS_SANDBOX": "1"}, root=True)
    sandboxed = plan.model_copy(update={"sandbox": SandboxSpec(kind="bwrap")})
    require_environment(sandboxed, {}, root=True)
