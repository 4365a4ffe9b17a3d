"""Whether one finished attempt is accepted: the completion gates, as a pure function.

The order is that of evidence: an agent that says it failed is believed first; an attempt
that changed nothing cannot be "done" (unless the plan allows it); only then does the
`verify` gate speak. Every refusal is a sentence that starts with a stable word of cli.md.
"""

from __future__ import annotations

from orchestrator.core.events import AttemptJudged
from orchestrator.core.plan import ResolvedSubtask
from orchestrator.core.state import AttemptView


def needs_verify(spec: ResolvedSubtask, attempt: AttemptView) -> bool:
    """The verify gate runs only on an attempt that could otherwise be accepted."""
    return (
        spec.verify is not None
        and attempt.committed
        and attempt.exit_code == 0
        and (bool(attempt.changed) or spec.allow_empty)
        and attempt.verify_exit_code is None
    )


def judge_attempt(spec: ResolvedSubtask, attempt: AttemptView) -> AttemptJudged:
    def refuse(reason: str) -> AttemptJudged:
        return AttemptJudged(
            subtask_id=spec.id, attempt=attempt.number, accepted=False, reason=reason
        )

    if attempt.exit_code != 0:
        return refuse(f"agent_failed: the agent exited with status {attempt.exit_code}")
    if not attempt.changed and not spec.allow_empty:
        return refuse("no_changes: the attempt left the worktree as it found it")
    if spec.verify is not None and attempt.verify_exit_code != 0:
        return refuse(
            f"verify_failed: `{spec.verify}` exited with status {attempt.verify_exit_code}"
        )
    return AttemptJudged(subtask_id=spec.id, attempt=attempt.number, accepted=True)
