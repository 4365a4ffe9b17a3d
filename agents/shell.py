"""Kinds `shell` (one command line for /bin/sh -c) and `command` (an argv, no shell)."""

from __future__ import annotations

from collections.abc import Mapping

from agents.base import AttemptContext
from orchestrator.core.plan import AgentSpec


class ShellAgent:
    kind = "shell"

    def argv(self, spec: AgentSpec, context: AttemptContext) -> list[str]:
        assert spec.run is not None, "the plan loader requires `run` for kind shell"
        return ["/bin/sh", "-c", spec.run]

    def environment(self, spec: AgentSpec, context: AttemptContext) -> Mapping[str, str]:
        return context.environment()


class CommandAgent:
    """Each argv item expands {prompt}, {prompt_file} and {files}; nothing else is touched."""

    kind = "command"

    def argv(self, spec: AgentSpec, context: AttemptContext) -> list[str]:
        assert spec.command, "the plan loader requires `command` for kind command"
        values = {
            "{prompt}": context.prompt,
            "{prompt_file}": context.prompt_file,
            "{files}": " ".join(context.files),
        }
        return [_expand(item, values) for item in spec.command]

    def environment(self, spec: AgentSpec, context: AttemptContext) -> Mapping[str, str]:
        return context.environment()


def _expand(item: str, values: Mapping[str, str]) -> str:
    # Plain replacement, not str.format: argv items may hold braces of their own (JSON, globs).
    for placeholder, value in values.items():
        item = item.replace(placeholder, value)
    return item
