"""Kind `claude-code`: Claude Code run headless, its stream rendered and its usage recorded.

    python -I -S agents/claude_stream.py -- claude -p --output-format stream-json --verbose
        --permission-mode MODE [--model MODEL] [--resume SESSION] [EXTRA ARGS...] -- PROMPT

Every flag is one `claude --help` lists (2.1.197); `stream-json` in `-p` mode requires
`--verbose`. The prompt comes after `--`, so a prompt that starts with '-' stays a prompt.
`permission_mode` defaults to acceptEdits: in `-p` mode nobody is there to approve, and
with `default` every edit would be refused (`bypassPermissions` is refused under root).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import agents.claude_stream
from agents.base import AttemptContext
from agents.stream_filter import filter_argv
from orchestrator.core.plan import AgentSpec

DEFAULT_BINARY = "claude"
DEFAULT_PERMISSION_MODE = "acceptEdits"


class ClaudeCodeAgent:
    kind = "claude-code"
    supports_resume = True
    reports_usage = True
    install_hint: str | None = "npm install -g @anthropic-ai/claude-code"
    state_paths: tuple[str, ...] = ("~/.claude", "~/.claude.json")

    def binary(self, spec: AgentSpec) -> str:
        return str(Path(spec.binary or DEFAULT_BINARY).expanduser())

    def argv(self, spec: AgentSpec, context: AttemptContext) -> list[str]:
        command = [self.binary(spec), "-p", "--output-format", "stream-json", "--verbose"]
        command += ["--permission-mode", spec.permission_mode or DEFAULT_PERMISSION_MODE]
        if spec.model:
            command += ["--model", spec.model]
        if context.resume_session:
            command += ["--resume", context.resume_session]
        command += [*spec.extra_args, "--", context.message]
        return filter_argv(agents.claude_stream.__file__, [], command)

    def environment(self, spec: AgentSpec, context: AttemptContext) -> Mapping[str, str]:
        # An update replacing the program under a running attempt helps nobody.
        return {**context.environment(), "DISABLE_AUTOUPDATER": "1"}

    def idempotent(self, spec: AgentSpec) -> bool:
        return spec.idempotent
