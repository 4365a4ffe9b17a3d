"""Kinds `shell` (one command line for /bin/sh -c) and `command` (an argv, no shell).

Neither has a stream filter: the whole command is the agent, and what it appends to
KAIRO_USAGE_FILE is all the usage it has (`claims_usage`). That is its own word, sandboxed
or not: these are kinds for tests and utilities, not a way to hold an untrusted agent to a
token budget (claude-code and codex are counted by their filters, outside its reach).
"""

from __future__ import annotations

from collections.abc import Mapping

from agents.base import AttemptContext, Contain, uncontained
from orchestrator.core.plan import AgentSpec


class ShellAgent:
    kind = "shell"
    supports_resume = False
    reports_usage = False
    claims_usage = True  # the command may append to KAIRO_USAGE_FILE itself: its word
    install_hint: str | None = None
    state_variables: tuple[str, ...] = ()

    def binary(self, spec: AgentSpec) -> str | None:
        return None  # a command line: what it runs is the shell's business

    def idempotent(self, spec: AgentSpec) -> bool:
        return spec.idempotent

    def argv(
        self, spec: AgentSpec, context: AttemptContext, *, contain: Contain = uncontained
    ) -> list[str]:
        assert spec.run is not None, "the plan loader requires `run` for kind shell"
        return contain(["/bin/sh", "-c", spec.run])

    def environment(self, spec: AgentSpec, context: AttemptContext) -> Mapping[str, str]:
        return context.environment()


class CommandAgent:
    """Each argv item expands {prompt}, {prompt_file} and {files}; nothing else is touched."""

    kind = "command"
    supports_resume = False
    reports_usage = False
    claims_usage = True
    install_hint: str | None = None
    state_variables: tuple[str, ...] = ()

    def binary(self, spec: AgentSpec) -> str | None:
        assert spec.command, "the plan loader requires `command` for kind command"
        return spec.command[0]

    def idempotent(self, spec: AgentSpec) -> bool:
        return spec.idempotent

    def argv(
        self, spec: AgentSpec, context: AttemptContext, *, contain: Contain = uncontained
    ) -> list[str]:
        assert spec.command, "the plan loader requires `command` for kind command"
        values = {
            "{prompt}": context.prompt,
            "{prompt_file}": context.prompt_file,
            "{files}": " ".join(context.files),
        }
        return contain([_expand(item, values) for item in spec.command])

    def environment(self, spec: AgentSpec, context: AttemptContext) -> Mapping[str, str]:
        return context.environment()


def _expand(item: str, values: Mapping[str, str]) -> str:
    # Plain replacement, not str.format: argv items may hold braces of their own (JSON, globs).
    for placeholder, value in values.items():
        item = item.replace(placeholder, value)
    return item
