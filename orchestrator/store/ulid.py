"""ULIDs (github.com/ulid/spec): the ids of executions and of events.

48 bits of milliseconds since the Unix epoch, then 80 random bits, written in Crockford's
base32: 26 characters that sort by creation time, to the millisecond. Ten lines, where the
python-ulid package was a measurable part of every `start` and every supervisor's start-up
(it reads its own version from the installed distribution's metadata when imported).
"""

from __future__ import annotations

import os
import time

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_ulid(*, at: float | None = None) -> str:
    """A new ULID for now, or for the Unix time `at`."""
    milliseconds = int((time.time() if at is None else at) * 1000)
    value = (milliseconds << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))
