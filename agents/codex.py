"""Kind `codex`: Codex CLI's `codex exec`, its JSON events rendered and its usage recorded.

    python -I -S agents/codex_stream.py [--baseline TOTALS] -- codex exec --json
        --sandbox MODE [-m MODEL] [EXTRA ARGS...] [resume SESSION] -- PROMPT

Every flag is one `codex exec --help` lists (0.171.0). `resume` is a subcommand of `exec`
that does not take `--sandbox` itself, but the options written before it apply to it
(measured: without them a resumed thread runs read-only again), so the adapter's flags and
`extra_args` always come first. `permission_mode` is the sandbox, default workspace-write:
`codex exec` alone is read-only and could change nothing.

An `endpoint` becomes a model provider of codex's own (agents/endpoints.py). Where codex's
home (CODEX_HOME, else ~/.codex) lies in the temporary directory, codex refuses to make the
helper its sandbox runs commands and patches through ("Refusing to create helper binaries
under temporary dir"), and every one of them fails: such an attempt gets its scratch
directory (`AttemptContext.scratch`) as its TMPDIR.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import agents.codex_stream
from agents.base import AttemptContext, Contain, uncontained
from agents.endpoints import agent_templates, codex_provider_args, expand
from agents.stream_filter import filter_argv
from orchestrator.core.plan import AgentSpec

DEFAULT_BINARY = "codex"
DEFAULT_SANDBOX = "workspace-write"


class CodexAgent:
    kind = "codex"
    supports_resume = True
    reports_usage = True
    claims_usage = False
    install_hint: str | None = "npm install -g @openai/codex"
    state_variables: tuple[str, ...] = ("CODEX_HOME",)

    def binary(self, spec: AgentSpec) -> str:
        return str(Path(spec.binary or DEFAULT_BINARY).expanduser())

    def argv(
        self, spec: AgentSpec, context: AttemptContext, *, contain: Contain = uncontained
    ) -> list[str]:
        command = [self.binary(spec), "exec", "--json"]
        command += ["--sandbox", spec.permission_mode or DEFAULT_SANDBOX]
        if spec.model:
            command += ["-m", spec.model]
        command += [*codex_provider_args(spec), *spec.extra_args]
        options: list[str] = []
        if context.resume_session:
            command += ["resume", context.resume_session]
            if context.resume_totals:
                options = ["--baseline", json.dumps(dict(context.resume_totals), sort_keys=True)]
        command += ["--", context.message]
        return filter_argv(agents.codex_stream.__file__, options, contain(command))

    def environment(self, spec: AgentSpec, context: AttemptContext) -> Mapping[str, str]:
        env = context.environment()
        if _home_in_temporary_directory(spec):
            env["TMPDIR"] = context.scratch
        return env

    def idempotent(self, spec: AgentSpec) -> bool:
        return spec.idempotent


def _home_in_temporary_directory(spec: AgentSpec) -> bool:
    """Whether codex's home, as the agent will see it (the plan's `env` first), lies in the
    temporary directory."""
    named = expand(agent_templates(spec), os.environ).get("CODEX_HOME")
    home = Path(named or os.environ.get("CODEX_HOME") or Path.home() / ".codex").resolve()
    return home.is_relative_to(Path(tempfile.gettempdir()).resolve())
