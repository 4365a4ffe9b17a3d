"""Hypothesis strategies for JSON values and hash-chained logs (no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from orchestrator.core.canonical import chain_hash, envelope
from orchestrator.store.base import StoredEvent, format_timestamp

EXECUTION_ID = "01JDQ8ZK7M4X2Y9V3T6R5W8NQE"
MAX_SAFE = 2**53 - 1
_START = datetime(2026, 12, 2, 17, 14, 51, 123456, tzinfo=UTC)

# Strings that sit where RFC 8785 and naive JSON writers part ways.
TRICKY_TEXT = st.sampled_from(
    ["", "\x00", "\x1f", "\x7f", '"', "\\", "\b\f\n\r\t", "\u2028", "é", "\ue000", "😀", "\ud800"]
)
TRICKY_NUMBERS = st.sampled_from(
    [0, -0.0, 1.0, 1e20, 1e21, 1e-6, 1e-7, 5e-324, 2**53 - 1, 2**53, -(2**63), 0.1, 1e16]
)

# Values as json.loads gives them (no tuples, no surrogates); floats included.
parsed_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE, MAX_SAFE)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
parsed_values = st.recursive(
    parsed_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
parsed_payloads = st.dictionaries(st.text(max_size=6), parsed_values, max_size=4)

# Anything a caller might hand over, canonicalizable or not.
any_scalars = parsed_scalars | TRICKY_TEXT | TRICKY_NUMBERS | st.integers() | st.just(float("nan"))
any_values = st.recursive(
    any_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(st.text(max_size=3) | TRICKY_TEXT, inner, max_size=3)
    ),
    max_leaves=8,
)


def build_log(
    payloads: list[dict[str, Any]], event_types: list[str] | None = None
) -> list[StoredEvent]:
    """A valid log, hashed with core's reference chain_hash, one microsecond apart."""
    events: list[StoredEvent] = []
    previous: str | None = None
    for seq, payload in enumerate(payloads):
        kind = event_types[seq] if event_types else f"type_{seq % 3}"
        created_at = format_timestamp(_START + timedelta(microseconds=seq))
        value = envelope(
            execution_id=EXECUTION_ID,
            seq=seq,
            event_type=kind,
            schema_version=1,
            created_at=created_at,
            payload=payload,
        )
        previous = chain_hash(previous, value)
        events.append(
            StoredEvent(EXECUTION_ID, seq, f"ev-{seq}", kind, 1, payload, previous, created_at)
        )
    return events


@st.composite
def logs(draw: st.DrawFn, min_size: int = 1, max_size: int = 12) -> list[StoredEvent]:
    payloads = draw(st.lists(parsed_payloads, min_size=min_size, max_size=max_size))
    return build_log(payloads)
