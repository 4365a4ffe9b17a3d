"""What a running attempt has used so far, in a file beside its usage file: written by its
stream filter's `Tally` as the agent's stream shows it, read by the supervisor (to hold the
budgets across parallel attempts), `status` and the live view.

    <usage file>.live    {"tokens": int, "api_retries": int, "api_status": int|null}

(`api_status`: what the API answered the last retried request.)

Standard library only, and light: the stream filters import it, and `status`.
"""

# ruff: noqa: PTH105  (os and open: pathlib would only cost startup time here)

from __future__ import annotations

import json
import os

from agents.runner_records import create_new

LIVE_SUFFIX = ".live"


def live_path(usage_file: str | None) -> str | None:
    return usage_file + LIVE_SUFFIX if usage_file else None


class Tally:
    """The tokens an attempt's stream has shown so far (input new to the model, and output,
    as budgets count them), what it went through (API retries), and its allowance.

    Each change is written, whole, to `path`.
    """

    def __init__(self, limit: int | None = None, path: str | None = None) -> None:
        self.limit = limit
        self.path = path
        self.tokens = 0
        self.api_retries = 0
        self.api_status: int | None = None
        self._written: tuple[int, int] | None = None

    @property
    def spent(self) -> bool:
        return self.limit is not None and self.tokens >= self.limit

    def count(self, tokens: int) -> None:
        self.tokens = tokens
        self._write()

    def retried(self, status: int | None) -> None:
        self.api_retries += 1
        self.api_status = status
        self._write()

    def _write(self) -> None:
        now = (self.tokens, self.api_retries)
        if self.path is None or now == self._written:
            return
        self._written = now
        record = {
            "tokens": self.tokens,
            "api_retries": self.api_retries,
            "api_status": self.api_status,
        }
        staged = self.path + ".tmp"
        try:
            # Made anew, never written through a link planted at its name; the rename
            # replaces whatever is at `path`, a link included, without following it.
            with os.fdopen(create_new(staged), "w", encoding="utf-8") as f:
                f.write(json.dumps(record))
            os.replace(staged, self.path)  # read whole or not at all
        except OSError:
            self.path = None  # a full disk stops the live count, never the attempt


def read_live(usage_file: str) -> dict[str, int | None] | None:
    """What a running attempt has used so far and gone through, or None before it says."""
    try:
        fd = os.open(usage_file + LIVE_SUFFIX, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, encoding="utf-8") as f:
            live = json.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(live, dict):
        return None
    return {
        "tokens": count(live.get("tokens")),
        "api_retries": count(live.get("api_retries")),
        "api_status": live["api_status"] if isinstance(live.get("api_status"), int) else None,
    }


def count(value: object) -> int:
    """A count as reported (tokens, retries), or 0 for anything that is not a whole number."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
