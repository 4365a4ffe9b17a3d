"""The one Protocol every agent kind implements, and what an attempt is given (plan.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from orchestrator.core.plan import AgentSpec


@dataclass(frozen=True)
class AttemptContext:
    execution_id: str
    subtask_id: str
    attempt: int
    prompt: str  # with feedback from earlier attempts appended
    prompt_file: str
    feedback: str
    files: tuple[str, ...]
    worktree: str
    idempotency_key: str
    usage_file: str

    def environment(self) -> dict[str, str]:
        """The KAIRO_* variables of plan.md, for every kind."""
        return {
            "KAIRO_EXECUTION_ID": self.execution_id,
            "KAIRO_SUBTASK_ID": self.subtask_id,
            "KAIRO_ATTEMPT": str(self.attempt),
            "KAIRO_PROMPT": self.prompt,
            "KAIRO_PROMPT_FILE": self.prompt_file,
            "KAIRO_FEEDBACK": self.feedback,
            "KAIRO_FILES": "\n".join(self.files),
            "KAIRO_WORKTREE": self.worktree,
            "KAIRO_IDEMPOTENCY_KEY": self.idempotency_key,
            "KAIRO_USAGE_FILE": self.usage_file,
        }


class AgentAdapter(Protocol):
    """How to start one kind of agent for one attempt."""

    kind: str

    def argv(self, spec: AgentSpec, context: AttemptContext) -> list[str]:
        """The agent's command line; the in-pane runner executes it in the worktree."""
        ...

    def environment(self, spec: AgentSpec, context: AttemptContext) -> Mapping[str, str]:
        """Variables this kind adds to the attempt's environment."""
        ...
