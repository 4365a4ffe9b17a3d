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

#: (event type, the version it reads) -> that payload at the next version. None yet:
#: version 1 is the first.
UPCASTERS: Mapping[tuple[str, int], Upcaster] = MappingProxyType({})


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
