"""How a stop reaches a running supervisor: signals, since it is a process of this host.

    SIGTERM, SIGINT   graceful stop (`kairo-orch stop`, a shutdown, kill PID)
    SIGUSR1           stop now (`kairo-orch stop --now`)
    a second SIGTERM or SIGINT while a graceful stop runs: stop now

Each becomes a `stop_requested` event; the pure core does the rest (decide.py).
"""

from __future__ import annotations

import signal
import time
from collections.abc import AsyncIterator

from orchestrator.core import events as ev
from orchestrator.runtime.journal import Journal

GRACEFUL_SIGNALS = (signal.SIGTERM, signal.SIGINT)
NOW_SIGNAL = signal.SIGUSR1
STOP_SIGNALS = (*GRACEFUL_SIGNALS, NOW_SIGNAL)

_SOURCE = {
    signal.SIGTERM: "kairo-orch stop (SIGTERM)",
    signal.SIGINT: "SIGINT",
    signal.SIGUSR1: "kairo-orch stop --now (SIGUSR1)",
}


def stop_for(signum: int, already: ev.StopMode | None) -> ev.StopRequested:
    """The request a signal makes, given the stop already under way (if any)."""
    if signum == NOW_SIGNAL:
        mode: ev.StopMode = "now"
        source = _SOURCE[signal.SIGUSR1]
    elif already is not None:
        mode, source = "now", f"a second {signal.Signals(signum).name}"
    else:
        mode, source = "graceful", _SOURCE.get(signal.Signals(signum), "a signal")
    return ev.StopRequested(mode=mode, source=source, at=time.time())


async def stop_on_signals(journal: Journal, signals: AsyncIterator[int]) -> None:
    """Run until cancelled: record each stop signal as a request, until the end."""
    async for signum in signals:
        if journal.state.ended is None:
            await journal.append([stop_for(signum, journal.state.stop)])
