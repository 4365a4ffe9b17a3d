"""Why a subtask (or an attempt) ended as it did: a code, a stable word, and a detail.

The code is data: what the supervisor, the gates and the pane titles act on, compared as
an enum, never read back out of a sentence. The detail is the rest, in English for a
person. `sentence` is the one place the two become the text that `status`, `report` and
an agent's feedback show: "verify_failed: `pytest` exited with status 1", the wording
cli.md promises (a sentence starting with a stable word).
"""

from __future__ import annotations

import enum

from pydantic import BaseModel, ConfigDict

from orchestrator.core.event_base import Printed


class ReasonCode(enum.StrEnum):
    """The stable words of cli.md, each the start of a reason's sentence."""

    TIMEOUT = "timeout"
    MAX_ATTEMPTS = "max_attempts"
    TOKEN_BUDGET = "token_budget"
    NO_CHANGES = "no_changes"
    NO_PROGRESS = "no_progress"
    VERIFY_FAILED = "verify_failed"
    AGENT_FAILED = "agent_failed"
    DEPENDENCY = "dependency"
    CONFLICT = "conflict"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"
    INTEGRATION_VERIFY_FAILED = "integration_verify_failed"
    SETUP_FAILED = "setup_failed"
    MERGE_FAILED = "merge_failed"
    #: An agent's resolution of a merge conflict dropped lines one side added, and did not
    #: say why (core/resolution.py).
    RESOLUTION_DROPPED_CHANGES = "resolution_dropped_changes"
    #: ... or left conflict markers, unmerged paths, or the merge itself unfinished.
    RESOLUTION_UNFINISHED = "resolution_unfinished"
    #: The guard found a change to what the user owns (a ref, the git directory, the
    #: checkout) while the subtask's agent or check ran (core/guard.py).
    GUARD_BREACHED = "guard_breached"
    #: None of the words above: a user's constraint's own sentence, or one an old log holds
    #: that starts with a word this version does not know. The detail is the whole sentence.
    OTHER = "other"


class Reason(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    code: ReasonCode
    detail: Printed = ""  # may quote a check's output (a setup's last line)


def sentence(reason: Reason) -> str:
    """The reason as status, report and feedback say it: its word, then its detail."""
    if reason.code is ReasonCode.OTHER:
        return reason.detail
    return f"{reason.code.value}: {reason.detail}" if reason.detail else reason.code.value


def sentence_or_none(reason: Reason | None) -> str | None:
    return None if reason is None else sentence(reason)


def as_reason(reason: Reason | str) -> Reason:
    """A user constraint may answer with a plain sentence (docs/operations.md): it is kept
    whole, as the detail of an OTHER reason, never parsed for a word."""
    return reason if isinstance(reason, Reason) else Reason(code=ReasonCode.OTHER, detail=reason)


def with_detail(reason: Reason, more: str) -> Reason:
    """The same reason, its detail followed by `more` ("; its partial work is on ...")."""
    return reason.model_copy(update={"detail": reason.detail + more})
