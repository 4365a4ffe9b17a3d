"""After each attempt: accept it, send the agent back with specific feedback, or give up.

A chain of strategies, each of which may pass. The order is that of evidence: an attempt
cut short says nothing; an agent that says it failed is believed; an attempt that changed
nothing cannot be "done"; two attempts that leave the same tree and the same failure are
not converging; only then does the `verify` gate speak. Feedback always says what failed
and where, never a bare "keep going", and every loop ends: no_changes after one nudge,
no_progress as soon as two attempts repeat each other, max_attempts (constraints.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.core.plan import ResolvedSubtask
from orchestrator.core.views import AttemptView

TAIL_LINES = 30


@dataclass(frozen=True)
class ContinuationDecision:
    kind: Literal["accept", "nudge", "escalate"]
    reason: str | None = None  # a sentence starting with a stable word of cli.md
    feedback: str = ""


Strategy = Callable[[ResolvedSubtask, AttemptView, AttemptView | None], ContinuationDecision | None]


def needs_verify(spec: ResolvedSubtask, attempt: AttemptView) -> bool:
    """The verify gate runs only on an attempt that could otherwise be accepted."""
    return (
        spec.verify is not None
        and attempt.committed
        and attempt.stopped_by is None
        and attempt.exit_code == 0
        and (bool(attempt.changed) or spec.allow_empty)
        and attempt.verify_exit_code is None
    )


def _tail(text: str) -> str:
    lines = text.rstrip().splitlines()[-TAIL_LINES:]
    return "\n".join(lines) if lines else "(no output)"


def stopped(
    spec: ResolvedSubtask, attempt: AttemptView, _: AttemptView | None
) -> ContinuationDecision | None:
    if attempt.stopped_by is None:
        return None
    saved = f"; its partial work is on {attempt.recovery_ref}" if attempt.recovery_ref else ""
    return ContinuationDecision("escalate", reason=f"{attempt.stopped_by}{saved}")


#: What the stream filters record for an agent that could not log in (agents/
#: stream_filter.py): every attempt would fail alike, so none follows.
AUTHENTICATION_FAILED = "authentication_failed"


def agent_failure(
    spec: ResolvedSubtask, attempt: AttemptView, _: AttemptView | None
) -> ContinuationDecision | None:
    if attempt.exit_code == 0 and not attempt.is_error:
        return None
    if attempt.result == AUTHENTICATION_FAILED:
        return ContinuationDecision(
            "escalate",
            reason=(
                f"agent_failed: the {spec.agent.kind} agent could not log in "
                f"({AUTHENTICATION_FAILED}){_last_line(attempt.output_tail)}; log it in and "
                "start the plan again"
            ),
        )
    cut_short = _cut_short(attempt)
    if cut_short is not None:
        return ContinuationDecision(
            "nudge",
            reason=f"agent_failed: the agent {cut_short}",
            feedback=(
                f"Attempt {attempt.number} {cut_short}, so the task is not done. Go on from "
                "where it stopped. The last lines of its output:\n"
                f"{_tail(attempt.output_tail)}"
            ),
        )
    said = (
        f"exited with status {attempt.exit_code}"
        if attempt.exit_code
        else f"reported an error ({attempt.result or 'is_error'}) though it exited 0"
    )
    return ContinuationDecision(
        "nudge",
        reason=f"agent_failed: the agent {said}",
        feedback=(
            f"Attempt {attempt.number} {said}, so it is not done. "
            f"The last lines of its output:\n{_tail(attempt.output_tail)}"
        ),
    )


def _cut_short(attempt: AttemptView) -> str | None:
    """How the agent program said it stopped short of the end, in words, if it did."""
    match attempt.result:
        case "error_max_turns":
            return "stopped at its turn limit before it finished (error_max_turns)"
        case "truncated":
            return "stopped before it finished: its output ended without a result (truncated)"
    return None


def no_changes(
    spec: ResolvedSubtask, attempt: AttemptView, previous: AttemptView | None
) -> ContinuationDecision | None:
    if attempt.changed or spec.allow_empty:
        return None
    if previous is not None and (previous.reason or "").startswith("no_changes"):
        return ContinuationDecision(
            "escalate",
            reason=f"no_changes: attempts {previous.number} and {attempt.number} changed nothing",
        )
    return ContinuationDecision(
        "nudge",
        reason="no_changes: the attempt left the worktree as it found it",
        feedback=(
            f"Attempt {attempt.number} exited 0 but changed no file in the worktree "
            f"({attempt.start_commit[:12]} is still the head), so the task is not done. "
            "Make the change the prompt asks for."
        ),
    )


def _failure_output(attempt: AttemptView) -> tuple[int | None, str]:
    if attempt.exit_code:
        return attempt.exit_code, attempt.output_tail
    return attempt.verify_exit_code, attempt.verify_output_tail


def no_progress(
    spec: ResolvedSubtask, attempt: AttemptView, previous: AttemptView | None
) -> ContinuationDecision | None:
    failing = attempt.exit_code != 0 or bool(attempt.verify_exit_code)
    if previous is None or not failing or not attempt.tree or attempt.tree != previous.tree:
        return None
    exit_code, output = _failure_output(attempt)
    if (exit_code, output) != _failure_output(previous):
        return None
    what = "the agent" if attempt.exit_code else f"`{spec.verify}`"
    return ContinuationDecision(
        "escalate",
        reason=(
            f"no_progress: attempts {previous.number} and {attempt.number} left the same tree "
            f"and failed the same way: {what} exited with status {exit_code}"
            f"{_last_line(output)}"
        ),
    )


def _last_line(output: str, width: int = 160) -> str:
    """`: ` and the output's last line (where a failure is most often named: `sh: 1: sedd:
    not found`), printable and cut to `width`; empty for no output."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if not lines:
        return ""
    line = "".join(c if c.isprintable() else " " for c in lines[-1])  # no terminal codes
    return f": {line if len(line) <= width else line[: width - 1] + '…'}"


def verify_gate(
    spec: ResolvedSubtask, attempt: AttemptView, _: AttemptView | None
) -> ContinuationDecision | None:
    if spec.verify is None or attempt.verify_exit_code in (None, 0):
        return None
    return ContinuationDecision(
        "nudge",
        reason=f"verify_failed: `{spec.verify}` exited with status {attempt.verify_exit_code}",
        feedback=(
            f"The check `{spec.verify}` failed (exit status {attempt.verify_exit_code}) in the "
            f"worktree after attempt {attempt.number}. The end of its output:\n"
            f"{_tail(attempt.verify_output_tail)}"
        ),
    )


CHAIN: tuple[Strategy, ...] = (stopped, no_progress, agent_failure, no_changes, verify_gate)


def continue_after(
    spec: ResolvedSubtask,
    attempt: AttemptView,
    previous: AttemptView | None,
    chain: Sequence[Strategy] = CHAIN,
) -> ContinuationDecision:
    for strategy in chain:
        decision = strategy(spec, attempt, previous)
        if decision is not None:
            return decision
    return ContinuationDecision("accept")
