"""Secret values cut out of a stream of bytes as it passes, however it is split.

The in-pane runner passes its agent's output through one, with the agent's own
credentials (what the pane shows, which any client of the tmux server can read, and
what `output.log` keeps); the supervisor passes an attempt's files through one with every
secret it knows, once the attempt has ended. A value split across two reads is found all
the same: the end of what came so far that may begin a secret is held back until the
next read says whether it does (or the stream ends).

Standard library only, and nothing imported: the runner imports it (agents/runner.py).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable


class StreamRedactor:
    """Replaces each of `secrets` (name, value) by `[redacted: NAME]` in what it is fed."""

    def __init__(self, secrets: Iterable[tuple[str, bytes]]) -> None:
        found = {value: name for name, value in secrets if value}
        # The longest first: a value that holds another is cut out whole.
        self._needles = [
            (value, f"[redacted: {name}]".encode())
            for value, name in sorted(found.items(), key=lambda item: -len(item[0]))
        ]
        self._held = b""
        self.redacted = False  # whether anything was cut out so far

    def feed(self, data: bytes) -> bytes:
        """What of the stream so far can be passed on: `data` after what was held back,
        secrets cut out, less an end that may begin one."""
        if not self._needles:
            return data
        buffer = self._held + data
        for value, marker in self._needles:
            if value in buffer:
                buffer = buffer.replace(value, marker)
                self.redacted = True
        keep = self._beginning_of_a_secret(buffer)
        self._held = buffer[len(buffer) - keep :]
        return buffer[: len(buffer) - keep]

    def flush(self) -> bytes:
        """What was held back, at the end of the stream: no secret, as none followed."""
        held, self._held = self._held, b""
        return held

    def _beginning_of_a_secret(self, buffer: bytes) -> int:
        """The length of the longest end of `buffer` that a secret begins with."""
        longest = 0
        for value, _ in self._needles:
            for size in range(min(len(value) - 1, len(buffer)), longest, -1):
                if buffer.endswith(value[:size]):
                    longest = size
                    break
        return longest
