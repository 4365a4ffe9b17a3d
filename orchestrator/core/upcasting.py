"""Events written by earlier versions of kairo-orch, read in the current shape.

Every event carries the schema version it was written at (`events.SCHEMA_VERSION` then).
Reading one, its payload goes through one small function for each version it is behind,
each turning a payload of version N into one of version N + 1 (a field renamed, a default
filled in), so that a log written before an upgrade still folds, and an execution paused
before it still resumes. A log written by a newer kairo-orch is refused, never misread.

Changing an event's shape, or adding an event type, is: bump `events.SCHEMA_VERSION`,
register here the function that brings the older payloads of each event type it touches
along, and test it; the golden logs (tests/golden) must still fold as they did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from orchestrator.errors import LogFromNewerVersion

Payload = dict[str, Any]
Upcaster = Callable[[Payload], Payload]

#: The words version 1 wrote a sentence starting with, each a code since version 2. Spelt
#: out rather than read from ReasonCode: an upcaster reads the past, which a code added
#: or renamed later does not change. ("other" is none of them: a sentence that happens to
#: start with "other: " is some user constraint's own.)
VERSION_1_WORDS = frozenset(
    {
        "timeout",
        "max_attempts",
        "token_budget",
        "no_changes",
        "no_progress",
        "verify_failed",
        "agent_failed",
        "dependency",
        "conflict",
        "stopped",
        "interrupted",
        "integration_verify_failed",
        "setup_failed",
        "merge_failed",
    }
)
OTHER = "other"  # reasons.ReasonCode.OTHER


def reason_of_sentence(text: str) -> dict[str, str]:
    """A version 1 reason, "word: detail", as a version 2 Reason (its JSON form).

    Split once, on the first ": ", and only where the word is one of ours and something
    follows it; anything else (a word this version does not know, a user constraint's
    own sentence) is kept whole as the detail of an OTHER reason. So `reasons.sentence`
    gives back every old sentence exactly as it was written, and nothing is refused.
    """
    word, separator, detail = text.partition(": ")
    if word in VERSION_1_WORDS and separator and detail:
        return {"code": word, "detail": detail}
    if text in VERSION_1_WORDS:
        return {"code": text, "detail": ""}
    return {"code": OTHER, "detail": text}


def _reason_as_data(payload: Payload) -> Payload:
    """Version 1 -> 2 of an event with a `reason`: its sentence becomes code and detail."""
    reason = payload.get("reason")
    if not isinstance(reason, str):
        return payload  # None (an accepted attempt's), or a shape no version 1 wrote
    return {**payload, "reason": reason_of_sentence(reason)}


#: The events whose `reason` was a sentence until version 2.
REASON_EVENTS = (
    "attempt_judged",
    "constraint_violated",
    "subtask_skipped",
    "subtask_failed",
    "subtask_stopped",
)


def _paths_not_recorded(payload: Payload) -> Payload:
    """Version 2 -> 3 of `attempt_committed`: which paths it changed was not recorded, and
    is not guessed (None, not "none"): feedback says nothing of what it does not know."""
    return {"paths": None, "branch_paths": None, **payload}


def _none_written_by_others(payload: Payload) -> Payload:
    """Version 4 -> 5 of `attempt_exited`: no record was checked, none is said changed."""
    return {"written_by_others": [], **payload}


def _previous_heartbeat_unknown(payload: Payload) -> Payload:
    """Version 6 -> 7 of `supervisor_started`: when the supervisor before it was last
    alive was not recorded (None: the last event before it is all there is to go by)."""
    return {"previous_heartbeat_at": None, **payload}


def _network_per_step(payload: Payload) -> Payload:
    """Version 7 -> 8 of `execution_created`: its plan's `sandbox.network`, true or false
    for the agents (and all a check or a setup had, run outside any sandbox), is one value
    per step: every network, or (false) none for any step."""
    plan = payload.get("plan")
    if not isinstance(plan, dict):
        return payload
    sandbox = plan.get("sandbox")
    if not isinstance(sandbox, dict) or not isinstance(sandbox.get("network"), bool):
        return payload
    value = "all" if sandbox["network"] else "none"
    network = {"agent": value, "setup": value, "checks": value}
    return {**payload, "plan": {**plan, "sandbox": {**sandbox, "network": network}}}


#: (event type, the version it reads) -> that payload at the next version.
UPCASTERS: Mapping[tuple[str, int], Upcaster] = MappingProxyType(
    {
        **{(event_type, 1): _reason_as_data for event_type in REASON_EVENTS},
        ("attempt_committed", 2): _paths_not_recorded,
        ("attempt_exited", 4): _none_written_by_others,
        ("supervisor_started", 6): _previous_heartbeat_unknown,
        ("execution_created", 7): _network_per_step,
    }
)


def upcast(
    event_type: str,
    version: int,
    payload: Payload,
    *,
    current: int,
    upcasters: Mapping[tuple[str, int], Upcaster] = UPCASTERS,
) -> Payload:
    """`payload`, written at `version`, in the shape of version `current`."""
    if version > current:
        raise LogFromNewerVersion(
            f"the log holds a {event_type} event of schema version {version}, written by a "
            f"newer kairo-orch (this one reads versions up to {current}): upgrade kairo-orch "
            "to read or resume this execution"
        )
    for step in range(version, current):
        upcaster = upcasters.get((event_type, step))
        if upcaster is not None:
            payload = upcaster(payload)
    return payload
