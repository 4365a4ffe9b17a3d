"""Snapshots of the folded state at safe points, so recovery need not refold everything.

A checkpoint names the seq and hash of the event it was taken after; it is used only when
the log still holds that very event there, and it is a cache: verification still reads
every event, and a checkpoint that does not fit is simply ignored.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter, ValidationError

from orchestrator.core import events as ev
from orchestrator.core.state import ExecutionState

#: 2: reasons are Reasons (code and detail), and the state holds its lifecycle anomalies.
#: 3: an attempt holds the paths it and its branch changed.
#: 4: an attempt holds which of its runner's records another process changed.
#: 5: the state holds the guard's record and the breaches it found.
#: 6: a merge waiting for its integration check is `integrating`, no longer `verifying`.
FORMAT = 6

# The events after which an attempt's work is on its branch and judged, or merged.
SAFE_POINTS = (ev.AttemptJudged, ev.AttemptInterrupted, ev.SubtaskMerged, ev.SubtaskConflicted)

_STATE: TypeAdapter[ExecutionState] = TypeAdapter(ExecutionState)


def snapshot(state: ExecutionState, seq: int, event_hash: str) -> str:
    document: dict[str, Any] = {
        "format": FORMAT,
        "seq": seq,
        "event_hash": event_hash,
        "state": _STATE.dump_python(state, mode="json", by_alias=True),
    }
    return json.dumps(document, separators=(",", ":"))


def restore(checkpoint_json: str | None) -> tuple[ExecutionState, int, str] | None:
    """(state, seq, event_hash), or None when there is no usable checkpoint."""
    if not checkpoint_json:
        return None
    try:
        document = json.loads(checkpoint_json)
        if document.get("format") != FORMAT:
            return None
        state = _STATE.validate_python(document["state"])
        return state, int(document["seq"]), str(document["event_hash"])
    except (ValueError, KeyError, TypeError, ValidationError):
        return None
