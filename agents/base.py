"""The one Protocol every agent kind implements, and what an attempt is given (plan.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
    # The one directory of the attempt's that is the agent's to write besides its worktree
    # (its TMPDIR under a sandbox, what its program keeps between its own steps): nothing
    # of the runner's, the stream filter's or the supervisor's is written there.
    scratch: str
    # The agent's own session to continue instead of starting cold (kinds that support it,
    # see `AgentAdapter.supports_resume`): the `session_id` an earlier attempt's usage line
    # recorded; `agents.usage.resume_point` finds it.
    resume_session: str | None = None
    # What that session had used when it was recorded, for agents that report usage summed
    # over the whole session (codex): their stream filter subtracts it. See agents.usage.
    resume_totals: Mapping[str, int] | None = None
    # The commands that check the work (the subtask's `verify`): an agent program that asks
    # before it runs a command may run these unasked.
    checks: tuple[str, ...] = ()
    # What the attempt may still spend (the least of what its subtask's and the execution's
    # token budgets have left), for the stream filters that can stop an agent at once;
    # None: no budget.
    token_allowance: int | None = None

    @property
    def message(self) -> str:
        """What the agent is sent: the whole prompt, or, to a session that has read it
        already, only why its last attempt was not accepted."""
        if not self.resume_session:
            return self.prompt
        if not self.feedback:
            return (
                f"This is attempt {self.attempt} at the same task: the last one was cut short "
                "before it finished. The worktree holds the work so far; go on from there."
            )
        return (
            f"This is attempt {self.attempt} at the same task: the last one was not accepted. "
            "The worktree holds the work so far; fix what the feedback names.\n\n"
            f"## Feedback on your previous attempt\n\n{self.feedback}\n"
        )

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


#: Where the agent program itself is to run (ExecutionSandbox.wrap): its command line in,
#: the command line that runs it in the attempt's sandbox out.
Contain = Callable[[list[str]], list[str]]


def uncontained(argv: list[str]) -> list[str]:
    """The agent program run as it is (no sandbox)."""
    return argv


class AgentAdapter(Protocol):
    """How to start one kind of agent for one attempt, and what it can do besides.

    `supports_resume`: `argv` continues `context.resume_session` when one is given (else
    the re-run relies on its prompt's account of earlier attempts); it sends
    `context.message`, not the whole prompt, to a session it continues. `reports_usage`: the
    attempt appends a usage line to KAIRO_USAGE_FILE by itself (see agents.usage), written
    by its stream filter, which runs outside the sandbox, where the agent cannot reach it.
    `claims_usage`: the agent program may append its own usage lines (a shell command,
    which has no filter to count for it): under a sandbox the usage file, and nothing
    beside it, is writable for it, and what it says there is only its word.
    """

    kind: str
    supports_resume: bool
    reports_usage: bool
    install_hint: str | None  # how to get `binary`, for the message when it is missing
    # The variables that name where the program keeps its sessions and settings: under a
    # sandbox, the subtask's own state directory (runtime/sandbox.py), not the user's.
    state_variables: tuple[str, ...]
    claims_usage: bool

    def argv(
        self, spec: AgentSpec, context: AttemptContext, *, contain: Contain = uncontained
    ) -> list[str]:
        """The attempt's command line; the in-pane runner executes it in the worktree.

        `contain` is applied to the agent program's own command line, and to nothing
        around it: a stream filter that counts its tokens and writes its usage runs
        outside the sandbox, with the runner.
        """
        ...

    def environment(self, spec: AgentSpec, context: AttemptContext) -> Mapping[str, str]:
        """Variables this kind adds to the attempt's environment."""
        ...

    def binary(self, spec: AgentSpec) -> str | None:
        """The program that must exist before anything starts (a name looked up on PATH,
        or a path), or None when there is nothing to check ahead (a shell command line)."""
        ...

    def idempotent(self, spec: AgentSpec) -> bool:
        """Whether an interrupted attempt may simply be run again after a crash."""
        ...
