"""Durations as a plan writes them: `30m`, `10s`, `4h`, `1.5h`, `1h30m`, or bare seconds.

Kept apart from the plan loader because the CLI and the constraints take the same spelling.
"""

from __future__ import annotations

import math
import re

_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}
_NUMBER = r"\d+(?:\.\d+)?"
# Units in falling order, each at most once: `1h30m` reads as a person writes it; `30m1h`
# is more likely a typo than an intent.
_DURATION = re.compile(rf"^(?:({_NUMBER})h)?(?:({_NUMBER})m)?(?:({_NUMBER})s)?$")
_BARE = re.compile(rf"^{_NUMBER}$")

EXPECTED = "must be a duration such as 30m, 90s, 4h or 1h30m, or a number of seconds"


def parse_duration(value: object) -> float:
    """Seconds in `value`; ValueError (with EXPECTED as its text) if it is not a duration > 0.

    Bare numbers are seconds, so `timeout: 90` and `timeout: 90s` agree.
    """
    if isinstance(value, str):
        seconds = _parse_text(value.strip().lower())
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:  # YAML `true` is an int to Python, and never a duration
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(EXPECTED)
    return seconds


def _parse_text(text: str) -> float:
    if _BARE.fullmatch(text):
        return float(text)
    match = _DURATION.fullmatch(text)
    if match is None or not any(match.groups()):
        return math.nan
    return sum(
        float(amount) * _UNIT_SECONDS[unit]
        for amount, unit in zip(match.groups(), "hms", strict=True)
        if amount is not None
    )


def format_duration(seconds: float) -> str:
    """The short spelling of `seconds` (`1h30m`, `45s`), for `validate` output and logs."""
    whole = round(seconds)
    if whole != seconds or whole == 0:
        return f"{seconds:g}s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n]
    return "".join(parts)
