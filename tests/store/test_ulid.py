"""The ids of executions and events: ULIDs as the spec writes them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.store.ulid import CROCKFORD, new_ulid

# The reference implementation's example (github.com/ulid/javascript): ulid(1469918176385)
# gives 01ARYZ6S41TSV4RRFFQ69G5FAV, its first ten characters the time.
SPEC_EXAMPLE_MS = 1469918176385


def _milliseconds(ulid: str) -> int:
    value = 0
    for character in ulid:
        value = value * 32 + CROCKFORD.index(character)
    return value >> 80


def test_a_ulid_writes_its_time_as_the_spec_does() -> None:
    ulid = new_ulid(at=SPEC_EXAMPLE_MS / 1000)
    assert ulid[:10] == "01ARYZ6S41"
    assert len(ulid) == 26 and set(ulid) <= set(CROCKFORD)
    assert _milliseconds(ulid) == SPEC_EXAMPLE_MS


@given(st.integers(min_value=0, max_value=2**48 - 2), st.integers(min_value=1, max_value=10**6))
def test_ulids_sort_by_the_millisecond_they_were_made(earlier_ms: int, later_by: int) -> None:
    later_ms = min(earlier_ms + later_by, 2**48 - 1)
    # Each in the middle of its millisecond: 1132 / 1000 is 1.1319999... in binary, which
    # is a moment of millisecond 1131.
    earlier, later = new_ulid(at=(earlier_ms + 0.5) / 1000), new_ulid(at=(later_ms + 0.5) / 1000)
    assert earlier < later
    assert earlier[0] <= "7"  # 128 bits in 26 characters: the first holds 3 of them


def test_ulids_made_in_the_same_millisecond_differ() -> None:
    made = {new_ulid(at=1.0) for _ in range(1000)}
    assert len(made) == 1000
