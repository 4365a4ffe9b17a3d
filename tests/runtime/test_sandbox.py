"""Which variables agents see, and the bubblewrap command line around an agent."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.core.plan import SandboxSpec
from orchestrator.errors import EnvironmentProblem
from orchestrator.runtime.sandbox import (
    AgentPlace,
    BwrapSandbox,
    LocalSandbox,
    sandbox_for,
    without_secrets,
)

ENV = {
    "PATH": "/bin",
    "HOME": "/home/u",
    "GITHUB_TOKEN": "t",
    "AWS_SECRET_ACCESS_KEY": "s",
    "DB_PASSWORD": "p",
    "ANTHROPIC_API_KEY": "a",
    "OPENAI_API_KEY": "o",
    "KAIRO_IDEMPOTENCY_KEY": "k",
}


def test_secret_looking_variables_are_withheld_unless_passed() -> None:
    assert without_secrets(ENV, passed=["DB_PASSWORD"], kind="shell") == {
        "PATH": "/bin",
        "HOME": "/home/u",
        "DB_PASSWORD": "p",
        "KAIRO_IDEMPOTENCY_KEY": "k",
    }


def test_an_agent_kind_gets_the_credentials_it_logs_in_with_and_no_others() -> None:
    env = without_secrets(ENV, passed=[], kind="claude-code")
    assert "ANTHROPIC_API_KEY" in env and "OPENAI_API_KEY" not in env
    assert "GITHUB_TOKEN" not in env


def test_an_agent_sent_to_an_endpoint_gets_none_of_its_vendor_s_keys() -> None:
    # The plan's endpoint (a gateway, someone's proxy) must not see the user's own keys:
    # the agent gets the one key_env names instead (agents/endpoints.py).
    env = without_secrets(ENV, passed=[], kind="claude-code", vendor=False)
    assert "ANTHROPIC_API_KEY" not in env and env["PATH"] == "/bin"


def test_the_local_sandbox_runs_the_agent_as_it_is() -> None:
    place = AgentPlace(Path("/w"), Path("/r"), Path("/g"))
    assert LocalSandbox().wrap(["claude", "-p"], place) == ["claude", "-p"]


def linked_worktree(tmp_path: Path) -> AgentPlace:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "i",
        ],
        check=True,
    )
    worktree = tmp_path / "wt"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", str(worktree)], check=True)
    return AgentPlace(worktree, tmp_path / "run", repo / ".git")


def test_bwrap_binds_the_worktree_its_git_dir_objects_and_run_dir_only(tmp_path: Path) -> None:
    place = linked_worktree(tmp_path)
    place.run_dir.mkdir()
    argv = BwrapSandbox(binary="bwrap", network=False).wrap(["sh", "-c", "x"], place)
    binds = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--bind"]
    assert binds == [
        str(place.worktree),
        str((place.git_common_dir / "worktrees" / "wt").resolve()),
        str(place.git_common_dir / "objects"),
        str(place.run_dir),
    ]
    assert argv[:3] == ["bwrap", "--ro-bind", "/"] and "--unshare-net" in argv
    assert argv[-4:] == ["--", "sh", "-c", "x"]


def test_a_missing_bwrap_is_an_environment_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EnvironmentProblem, match="bubblewrap is not installed"):
        sandbox_for(SandboxSpec(kind="bwrap"))
    assert sandbox_for(SandboxSpec()).kind == "local"
