"""Which adapter runs which agent kind, and whether the programs they start are there.

`require_available` is meant for `validate` and `start`: a missing program is a clear
EnvironmentProblem (exit 5) before anything is created, not a failed attempt mid-run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from agents.aider import AiderAgent
from agents.base import AgentAdapter
from agents.claude_code import ClaudeCodeAgent
from agents.codex import CodexAgent
from agents.endpoints import unset_references
from agents.shell import CommandAgent, ShellAgent
from orchestrator.core.plan import AgentSpec, ResolvedPlan
from orchestrator.errors import EnvironmentProblem

_ADAPTERS: dict[str, AgentAdapter] = {
    adapter.kind: adapter
    for adapter in (ShellAgent(), CommandAgent(), ClaudeCodeAgent(), CodexAgent(), AiderAgent())
}


def supported_kinds() -> tuple[str, ...]:
    return tuple(_ADAPTERS)


def adapter_for(kind: str) -> AgentAdapter:
    try:
        return _ADAPTERS[kind]
    except KeyError:
        raise EnvironmentProblem(
            f"agent kind '{kind}' is not supported by this kairo-orch yet "
            f"(supported: {', '.join(_ADAPTERS)})"
        ) from None


def check_available(spec: AgentSpec, *, path: str | None = None) -> str | None:
    """Why `spec`'s program cannot be started (a sentence), or None when it can.

    `path` is the PATH to search (default: ours, which the agents inherit). A relative
    path such as `./tools/agent` is found only in the worktree, so it is not checked.
    """
    adapter = adapter_for(spec.kind)
    program = adapter.binary(spec)
    if program is None:
        return None
    if "/" in program:
        file = Path(program)
        if not file.is_absolute():
            return None
        if file.is_file() and os.access(file, os.X_OK):
            return None
        state = "is not an executable file" if file.exists() else "does not exist"
        key = "the first item of agent.command" if spec.kind == "command" else "agent.binary"
        return f"agent kind '{spec.kind}': {key} {program} {state}"
    if shutil.which(program, path=path) is not None:
        return None
    if spec.kind == "command":
        return (
            f"agent kind 'command' runs '{program}', which is not on PATH: install it, "
            "or write its path as the first item of agent.command"
        )
    hint = f" ({adapter.install_hint})" if adapter.install_hint else ""
    return (
        f"agent kind '{spec.kind}' needs the program '{program}', which is not on PATH: "
        f"install it{hint}, or give agent.binary its path"
    )


def require_environment(plan: ResolvedPlan, environment: Mapping[str, str], *, root: bool) -> None:
    """EnvironmentProblem for what the agents' settings need of this environment: each
    variable their `env` and `endpoint` name set; Claude Code's permission to bypass
    permissions as root (it refuses, unless told it runs in a sandbox)."""
    problems: dict[str, list[str]] = {}
    for subtask in plan.subtasks:
        for name in unset_references(subtask.agent, environment):
            problems.setdefault(
                f"the agent's settings (endpoint.key_env, or ${{{name}}} in env) name the "
                f"variable {name}, which is not set in this environment: set it first",
                [],
            ).append(subtask.id)
        bypass = subtask.agent.kind == "claude-code" and (
            subtask.agent.permission_mode == "bypassPermissions"
        )
        sandboxed = plan.sandbox.kind == "bwrap" or environment.get("IS_SANDBOX") == "1"
        if bypass and root and not sandboxed:
            problems.setdefault(
                "Claude Code refuses permission_mode bypassPermissions when run as root: run "
                "kairo-orch as another user, use sandbox: {kind: bwrap} (where kairo-orch "
                "tells Claude Code it runs in a sandbox), or set IS_SANDBOX=1 if this machine "
                "is one",
                [],
            ).append(subtask.id)
    if problems:
        raise EnvironmentProblem(
            "\n".join(
                f"{problem} (subtask{'s' if len(ids) > 1 else ''} {', '.join(ids)})"
                for problem, ids in problems.items()
            )
        )


def require_available(plan: ResolvedPlan, *, path: str | None = None) -> None:
    """EnvironmentProblem naming every missing program and the subtasks that need it."""
    missing: dict[str, list[str]] = {}
    for subtask in plan.subtasks:
        problem = check_available(subtask.agent, path=path)
        if problem is not None:
            missing.setdefault(problem, []).append(subtask.id)
    if missing:
        raise EnvironmentProblem(
            "\n".join(
                f"{problem} (subtask{'s' if len(ids) > 1 else ''} {', '.join(ids)})"
                for problem, ids in missing.items()
            )
        )
