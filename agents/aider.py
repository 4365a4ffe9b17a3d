"""Kind `aider`: Aider run on one message, non-interactive, leaving the commits to us.

    aider --message-file PROMPT_FILE --yes-always --no-auto-commits --no-dirty-commits
        --no-gitignore --map-tokens 0 --chat-history-file F --input-history-file F
        --no-restore-chat-history --no-pretty --no-fancy-input --no-check-update
        --no-show-release-notes --no-analytics --no-notifications --no-detect-urls
        --no-show-model-warnings [--model MODEL] [EXTRA ARGS...] [-- FILES...]

Every flag is one `aider --help` lists (0.86.2). What they are for, as measured:
- Aider writes into the git root, which is the worktree, and anything left there would be
  committed as the agent's work: `--no-gitignore` (else it edits .gitignore), the two
  history files go in the attempt's scratch directory (`AttemptContext.scratch`), and
  `--map-tokens 0` turns the repository map off, whose cache (.aider.tags.cache.v4/) has
  no flag to move it. `extra_args: [--map-tokens, '1024']` turns it back on (the last
  flag wins); the supervisor then has to leave that cache out of the commit.
- The owned files (`files`/`split`) are added to the chat, after `--`.
- Without `model` aider picks one from the API keys it finds; with none it waits five
  minutes for a browser login to OpenRouter. Give `model` in a headless plan.

What aider does not give: usage (it prints `Tokens: 2.1k sent, 345 received. Cost: ...`
in rounded text, not a record), so token budgets do not see it; a session to resume (a
re-run relies on its prompt's account of earlier attempts); and a reliable exit status:
an API error such as a missing key ends with status 0 (measured), so such an attempt
fails the gates later, as one that changed nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agents.base import AttemptContext, Contain, uncontained
from orchestrator.core.plan import AgentSpec

DEFAULT_BINARY = "aider"
HEADLESS = (
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
)


class AiderAgent:
    kind = "aider"
    supports_resume = False
    reports_usage = False
    claims_usage = False
    install_hint: str | None = "python -m pip install aider-chat"
    state_variables: tuple[str, ...] = ()

    def binary(self, spec: AgentSpec) -> str:
        return str(Path(spec.binary or DEFAULT_BINARY).expanduser())

    def argv(
        self, spec: AgentSpec, context: AttemptContext, *, contain: Contain = uncontained
    ) -> list[str]:
        scratch = Path(context.scratch)
        command = [self.binary(spec), "--message-file", context.prompt_file, *HEADLESS]
        command += ["--chat-history-file", str(scratch / "aider.chat.history.md")]
        command += ["--input-history-file", str(scratch / "aider.input.history")]
        if spec.model:
            # Through an endpoint, an OpenAI-compatible one: litellm wants that said.
            routed = spec.endpoint is not None and "/" not in spec.model
            command += ["--model", f"openai/{spec.model}" if routed else spec.model]
        command += spec.extra_args
        if context.files:
            command += ["--", *context.files]
        return contain(command)

    def environment(self, spec: AgentSpec, context: AttemptContext) -> Mapping[str, str]:
        return context.environment()

    def idempotent(self, spec: AgentSpec) -> bool:
        return spec.idempotent
