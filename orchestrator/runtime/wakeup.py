"""Wake the supervisor when a runner says an agent exited, or at the latest on a tick.

Runners signal one `tmux wait-for` channel per execution; one listener task turns each
signal into a broadcast. tmux remembers a signal sent while nobody waits, so a runner that
exits between two waits is not missed; the tick covers a runner that could not signal.
"""

from __future__ import annotations

import structlog
import trio

from orchestrator.errors import KairoError
from orchestrator.tmux.server import TmuxServer

log = structlog.get_logger(__name__)


class Wakeup:
    def __init__(self) -> None:
        self._event = trio.Event()

    def fire(self) -> None:
        self._event.set()
        self._event = trio.Event()

    async def wait(self, *, at_most: float) -> None:
        with trio.move_on_after(at_most):
            await self._event.wait()

    async def listen(self, tmux: TmuxServer, channel: str) -> None:
        """Run until cancelled: every signal on `channel` wakes every waiter."""
        while True:
            try:
                await tmux.wait_for(channel)
            except KairoError as error:
                # The tmux server may be gone for a moment; the tick still wakes waiters.
                log.warning("wait_for_failed", channel=channel, error=error.message)
                await trio.sleep(1.0)
            self.fire()
