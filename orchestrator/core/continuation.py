"""After each attempt: accept it, send the agent back with specific feedback, or give up.

A chain of strategies, each of which may pass. The order is that of evidence: an attempt
cut short says nothing; an agent that says it failed is believed; an attempt that changed
nothing cannot be "done"; two attempts that leave the same tree and the same failure are
not converging; only then does the `verify` gate speak. Feedback always says what failed
and where, never a bare "keep going", with what else the log knows (specifics.py: the
files the task names that are still unchanged; what an attempt that failed as the last one
did changed), and every loop ends: no_changes after one nudge, no_progress as soon as two
attempts repeat each other (durations and addresses in their output aside), max_attempts
(constraints.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.core.plan import ResolvedSubtask
from orchestrator.core.reasons import Reason, ReasonCode, with_detail
from orchestrator.core.resolution import refusal as resolution_refusal
from orchestrator.core.specifics import (
    failure_signature,
    unchanged_failure_note,
    untouched_note,
)
from orchestrator.core.views import AttemptView

TAIL_LINES = 30


@dataclass(frozen=True)
class ContinuationDecision:
    kind: Literal["accept", "nudge", "escalate"]
    reason: Reason | None = None
    feedback: str = ""


Strategy = Callable[[ResolvedSubtask, AttemptView, AttemptView | None], ContinuationDecision | None]


def needs_verify(spec: ResolvedSubtask, attempt: AttemptView) -> bool:
    """The verify gate runs only on an attempt that could otherwise be accepted."""
    return (
        spec.verify is not None
        and attempt.committed
        and attempt.stopped_by is None
        and attempt.exit_code == 0
        and (bool(attempt.changed) or attempt.after_changes or spec.allow_empty)
        and attempt.verify_exit_code is None
        and (
            attempt.resolution_check is None or resolution_refusal(attempt.resolution_check) is None
        )
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
    return ContinuationDecision("escalate", reason=with_detail(attempt.stopped_by, saved))


#: What the stream filters record for an agent that could not log in (agents/
#: stream_filter.py): every attempt would fail alike, so none follows.
AUTHENTICATION_FAILED = "authentication_failed"
#: ... and for one they stopped at its token allowance: its budget is spent.
TOKEN_BUDGET = "token_budget"
#: Claude Code's word for replies cut at the output limit four times in a row.
MAX_OUTPUT_TOKENS = "max_output_tokens"
#: Claude Code's words for a run that ended on an API error it had retried.
API_ERRORS = frozenset({"server_error", "rate_limit", "api_error", "overloaded"})
HTTP_STATUS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Request Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}


def agent_failure(
    spec: ResolvedSubtask, attempt: AttemptView, _: AttemptView | None
) -> ContinuationDecision | None:
    if attempt.exit_code == 0 and not attempt.is_error:
        return None
    if attempt.result == AUTHENTICATION_FAILED:
        return ContinuationDecision(
            "escalate",
            reason=Reason(
                code=ReasonCode.AGENT_FAILED,
                detail=(
                    f"the {spec.agent.kind} agent could not log in ({AUTHENTICATION_FAILED})"
                    f"{_last_line(attempt.output_tail)}; log it in and start the plan again"
                ),
            ),
        )
    if attempt.result == TOKEN_BUDGET:
        return ContinuationDecision(
            "escalate",
            reason=Reason(
                code=ReasonCode.TOKEN_BUDGET,
                detail=(
                    f"attempt {attempt.number} was stopped when its stream showed "
                    f"{attempt.tokens} tokens, all that the budget had left"
                ),
            ),
        )
    api = api_failure(attempt)
    if api is not None:
        return ContinuationDecision(
            "nudge",
            reason=Reason(code=ReasonCode.AGENT_FAILED, detail=api),
            feedback=(
                f"Attempt {attempt.number} ended because {api}: the model's service failed, "
                "not your work. Go on from where it stopped." + _refused(attempt)
            ),
        )
    cut_short = _cut_short(attempt)
    if cut_short is not None:
        advice = (
            " Make smaller edits (one function, or one file, per edit) and keep replies short."
            if attempt.result == MAX_OUTPUT_TOKENS
            else " Go on from where it stopped."
        )
        return ContinuationDecision(
            "nudge",
            reason=Reason(code=ReasonCode.AGENT_FAILED, detail=f"the agent {cut_short}"),
            feedback=(
                f"Attempt {attempt.number} {cut_short}, so the task is not done.{advice}"
                f"{_refused(attempt)} The last lines of its output:\n{_tail(attempt.output_tail)}"
            ),
        )
    said = (
        f"exited with status {attempt.exit_code}"
        if attempt.exit_code
        else f"reported an error ({attempt.result or 'is_error'}) though it exited 0"
    )
    return ContinuationDecision(
        "nudge",
        reason=Reason(code=ReasonCode.AGENT_FAILED, detail=f"the agent {said}"),
        feedback=(
            f"Attempt {attempt.number} {said}, so it is not done.{_refused(attempt)} "
            f"The last lines of its output:\n{_tail(attempt.output_tail)}"
        ),
    )


def api_failure(attempt: AttemptView) -> str | None:
    """The API error an attempt ended on, in words ("the API answered 529 Overloaded after
    10 retries"), or None when it did not end on one."""
    if attempt.result not in API_ERRORS and not (attempt.api_status and attempt.is_error):
        return None
    status = attempt.api_status
    answered = f"{status} {HTTP_STATUS.get(status, 'error')}" if status else "an error"
    retries = attempt.api_retries
    after = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
    return f"the API answered {answered}{after}"


def _cut_short(attempt: AttemptView) -> str | None:
    """How the agent program said it stopped short of the end, in words, if it did."""
    match attempt.result:
        case "error_max_turns":
            return "stopped at its turn limit before it finished (error_max_turns)"
        case "truncated":
            return "stopped before it finished: its output ended without a result (truncated)"
        case "max_output_tokens":
            return (
                "stopped because its replies were cut off at the model's output token limit, "
                "again and again (max_output_tokens)"
            )
    return None


def refusals_in_words(attempt: AttemptView) -> list[str]:
    """Each tool use the agent program refused, as a sentence to the agent."""
    said = []
    for refusal in attempt.refusals:
        what = (
            f"command `{refusal.target}`"
            if refusal.tool == "Bash"
            else f"{refusal.tool} of {refusal.target}"
        )
        why = f": {refusal.message}" if refusal.message else ""
        said.append(f"your {what} was refused{why}")
    return said


def _submodules(attempt: AttemptView) -> str:
    if not attempt.in_submodules:
        return ""
    paths = ", ".join(attempt.in_submodules)
    return (
        f"\n\nThe files you wrote inside {paths} (a submodule: another repository, not "
        "checked out here) are no change of this one: make the change outside submodules.\n"
    )


def _refused(attempt: AttemptView) -> str:
    refused = refusals_in_words(attempt)
    if not refused:
        return ""
    return (
        "\n\nWhat you were not allowed to do in that attempt:\n"
        + "\n".join(f"- {line[0].upper()}{line[1:]}" for line in refused)
        + "\nDo the work with what you are allowed, or say what you need and why.\n"
    )


def no_changes(
    spec: ResolvedSubtask, attempt: AttemptView, previous: AttemptView | None
) -> ContinuationDecision | None:
    """The subtask's branch is as it found it: no attempt of it changed anything."""
    if attempt.changed or attempt.after_changes or spec.allow_empty:
        return None
    again = previous is not None and _code(previous) is ReasonCode.NO_CHANGES
    refused = refusals_in_words(attempt) + [
        f"what it wrote inside the submodule {path} is no change of this repository's "
        "(kairo-orch commits no submodule)"
        for path in attempt.in_submodules
    ]
    if again and previous is not None:  # either attempt's refusals explain the nothing
        refused = list(dict.fromkeys(refusals_in_words(previous) + refused))
    why = ""
    if refused:
        why = f": {refused[0]}" + (f" (and {len(refused) - 1} more)" if len(refused) > 1 else "")
    if again and previous is not None:
        return ContinuationDecision(
            "escalate",
            reason=Reason(
                code=ReasonCode.NO_CHANGES,
                detail=f"attempts {previous.number} and {attempt.number} changed nothing{why}",
            ),
        )
    return ContinuationDecision(
        "nudge",
        reason=Reason(
            code=ReasonCode.NO_CHANGES, detail=f"the attempt left the worktree as it found it{why}"
        ),
        feedback=(
            f"Attempt {attempt.number} exited 0 but changed no file in the worktree "
            f"({attempt.start_commit[:12]} is still the head), so the task is not done. "
            "Make the change the prompt asks for." + _refused(attempt) + _submodules(attempt)
        ),
    )


def _code(attempt: AttemptView) -> ReasonCode | None:
    return attempt.reason.code if attempt.reason is not None else None


def _failure_output(attempt: AttemptView) -> tuple[int | None, str]:
    if attempt.exit_code:
        return attempt.exit_code, attempt.output_tail
    return attempt.verify_exit_code, attempt.verify_output_tail


def _same_failure(attempt: AttemptView, previous: AttemptView) -> bool:
    (code, output), (earlier_code, earlier) = _failure_output(attempt), _failure_output(previous)
    return code == earlier_code and failure_signature(output) == failure_signature(earlier)


def no_progress(
    spec: ResolvedSubtask, attempt: AttemptView, previous: AttemptView | None
) -> ContinuationDecision | None:
    failing = attempt.exit_code != 0 or bool(attempt.verify_exit_code)
    if previous is None or not failing or not attempt.tree or attempt.tree != previous.tree:
        return None
    if not _same_failure(attempt, previous):
        return None
    exit_code, output = _failure_output(attempt)
    what = "the agent" if attempt.exit_code else f"`{spec.verify}`"
    return ContinuationDecision(
        "escalate",
        reason=Reason(
            code=ReasonCode.NO_PROGRESS,
            detail=(
                f"attempts {previous.number} and {attempt.number} left the same tree "
                f"and failed the same way: {what} exited with status {exit_code}"
                f"{_last_line(output)}"
            ),
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
    spec: ResolvedSubtask, attempt: AttemptView, previous: AttemptView | None
) -> ContinuationDecision | None:
    if spec.verify is None or attempt.verify_exit_code in (None, 0):
        return None
    return ContinuationDecision(
        "nudge",
        reason=Reason(
            code=ReasonCode.VERIFY_FAILED,
            detail=f"`{spec.verify}` exited with status {attempt.verify_exit_code}",
        ),
        feedback=(
            f"The check `{spec.verify}` failed (exit status {attempt.verify_exit_code}) in the "
            f"worktree after attempt {attempt.number}. The end of its output:\n"
            f"{_tail(attempt.verify_output_tail)}{_refused(attempt)}".rstrip("\n")
            + unchanged_failure_note(attempt, previous)
        ),
    )


def resolution_gate(
    spec: ResolvedSubtask, attempt: AttemptView, _: AttemptView | None
) -> ContinuationDecision | None:
    """An attempt at resolving a conflict: one that dropped changed lines it did not explain
    is refused outright; one left unfinished is sent back, its resolution attempts allowing."""
    check = attempt.resolution_check
    why = resolution_refusal(check) if check is not None else None
    if why is None:
        return None
    if why.code is ReasonCode.RESOLUTION_DROPPED_CHANGES:
        return ContinuationDecision("escalate", reason=why)
    return ContinuationDecision(
        "nudge",
        reason=why,
        feedback=f"Attempt {attempt.number} did not finish resolving the merge: "
        f"{why.detail}. Resolve every conflict, remove every marker, and leave the merge "
        "for the supervisor to commit.",
    )


CHAIN: tuple[Strategy, ...] = (
    stopped,
    no_progress,
    agent_failure,
    resolution_gate,
    no_changes,
    verify_gate,
)


def continue_after(
    spec: ResolvedSubtask,
    attempt: AttemptView,
    previous: AttemptView | None,
    chain: Sequence[Strategy] = CHAIN,
) -> ContinuationDecision:
    for strategy in chain:
        decision = strategy(spec, attempt, previous)
        if decision is not None and decision.kind == "nudge":
            # every attempt sent back is told what of the task is still untouched
            feedback = decision.feedback.rstrip("\n") + untouched_note(spec, attempt)
            return ContinuationDecision("nudge", decision.reason, feedback)
        if decision is not None:
            return decision
    return ContinuationDecision("accept")
