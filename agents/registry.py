"""Which adapter runs which agent kind."""

from __future__ import annotations

from agents.base import AgentAdapter
from agents.shell import CommandAgent, ShellAgent
from orchestrator.errors import EnvironmentProblem

_ADAPTERS: dict[str, AgentAdapter] = {"shell": ShellAgent(), "command": CommandAgent()}


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
