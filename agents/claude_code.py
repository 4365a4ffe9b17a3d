"""Kind `claude-code`: Claude Code run headless, its stream rendered and its usage recorded.

    python -I -S agents/claude_stream.py [--token-limit N] -- claude -p
        --output-format stream-json --verbose --include-partial-messages
        --permission-mode MODE [--allowedTools 'Bash(VERIFY:*)'] [--model MODEL]
        [--resume SESSION] [EXTRA ARGS...] -- PROMPT

Every flag is one `claude --help` lists (2.1.197); `stream-json` in `-p` mode requires
`--verbose`; `--include-partial-messages` adds each API call's usage as it streams, which
the filter counts against the attempt's token allowance. The prompt comes after `--`, so a
prompt that starts with '-' stays a prompt.

`permission_mode` defaults to acceptEdits: in `-p` mode nobody is there to approve, and
with `default` every edit would be refused. acceptEdits allows edits in the working
directory and trivial commands, but refuses others ("This command requires approval"),
the subtask's own `verify` among them: it is allowed by name (`--allowedTools`, each simple
command of it), so the agent can run the check its work is judged by. An agent that may
edit what that command runs (a Makefile, a test) may run anything through it: the check
is allowed for the agent to use, not as a boundary. `bypassPermissions` is refused by Claude
Code under root unless IS_SANDBOX=1 (`require_runnable` says so before anything starts;
under the bwrap sandbox kairo-orch sets it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import agents.claude_stream
from agents.base import AttemptContext, Contain, uncontained
from agents.stream_filter import filter_argv
from orchestrator.core.plan import AgentSpec

DEFAULT_BINARY = "claude"
DEFAULT_PERMISSION_MODE = "acceptEdits"
# The modes in which a command not allowed by name is refused.
ASKING_MODES = ("acceptEdits", "default", "dontAsk", "auto")


def simple_commands(line: str) -> list[str]:
    """The simple commands of a shell line, as Claude Code matches a compound command's
    parts against its rules one by one (`ruff check . && pytest -q`: two). Lexical: a
    separator inside quotes splits too, which allows less, never more."""
    return [part.strip() for part in re.split(r"&&|\|\||[;|\n]", line) if part.strip()]


class ClaudeCodeAgent:
    kind = "claude-code"
    supports_resume = True
    reports_usage = True
    claims_usage = False
    install_hint: str | None = "npm install -g @anthropic-ai/claude-code"
    state_variables: tuple[str, ...] = ("CLAUDE_CONFIG_DIR",)

    def binary(self, spec: AgentSpec) -> str:
        return str(Path(spec.binary or DEFAULT_BINARY).expanduser())

    def argv(
        self, spec: AgentSpec, context: AttemptContext, *, contain: Contain = uncontained
    ) -> list[str]:
        command = [self.binary(spec), "-p", "--output-format", "stream-json", "--verbose"]
        command.append("--include-partial-messages")
        mode = spec.permission_mode or DEFAULT_PERMISSION_MODE
        command += ["--permission-mode", mode]
        allowed = [f"Bash({part}:*)" for check in context.checks for part in simple_commands(check)]
        if mode in ASKING_MODES and allowed:
            command += ["--allowedTools", *allowed]
        if spec.model:
            command += ["--model", spec.model]
        if context.resume_session:
            command += ["--resume", context.resume_session]
        command += [*spec.extra_args, "--", context.message]
        allowance = context.token_allowance
        options = [] if allowance is None else ["--token-limit", str(allowance)]
        return filter_argv(agents.claude_stream.__file__, options, contain(command))

    def environment(self, spec: AgentSpec, context: AttemptContext) -> Mapping[str, str]:
        # An update replacing the program under a running attempt helps nobody.
        return {**context.environment(), "DISABLE_AUTOUPDATER": "1"}

    def idempotent(self, spec: AgentSpec) -> bool:
        return spec.idempotent
