"""Waiting for an attempt's runner to record how its agent ended.

The runner wakes the supervisor on a `tmux wait-for` channel the moment it has written its
exit record. One client waits on the channel for as long as the attempt runs, not a new
one a second: each would cost two tmux processes (the wait and, on its timeout, the
signal that clears it), and 16 idle agents cost the supervisor and the tmux server 7% of
a core that way. A check once a second finds a runner that died without a word.
"""

from __future__ import annotations

import trio

from orchestrator.errors import KairoError
from orchestrator.runtime.attempts import ExitRecord, RunFiles, read_exit_record
from orchestrator.runtime.ports import Panes, Processes

#: How often a waiting attempt's runner is looked for, in case it died without a word.
LIVENESS_CHECK_S = 1.0


async def wait_for_exit(
    panes: Panes, processes: Processes, files: RunFiles, channel: str
) -> ExitRecord | None:
    """The runner's exit record, or None for a runner gone without one (interrupted)."""
    missing = 0
    async with trio.open_nursery() as nursery:
        wake_ups = _WakeUps()
        nursery.start_soon(_listen, panes, channel, wake_ups)
        # The first look is for the record only: the runner was started (or found running)
        # a moment ago, and may not have said its pid yet, which would make finding it a
        # look at every process's command line (once per agent of a fan-out).
        record = await trio.to_thread.run_sync(read_exit_record, files)
        while record is None:
            with trio.move_on_after(LIVENESS_CHECK_S):
                await wake_ups.wait()
            # Whether the runner runs, then its exit record: in that order, so that a
            # runner which wrote its record and exited between the two looks is not taken
            # for a lost one.
            alive = await processes.runner_alive(files)
            record = await trio.to_thread.run_sync(read_exit_record, files)
            # Twice in a row, a check apart: a runner that is just being exec'd is not dead.
            missing = 0 if alive else missing + 1
            if missing >= 2:
                break
        nursery.cancel_scope.cancel()
    return record


class _WakeUps:
    """Wake-ups that came since the waiter last looked, kept until it looks again."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def wake(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
        self._event = trio.Event()


async def _listen(panes: Panes, channel: str, wake_ups: _WakeUps) -> None:
    """Keep one `tmux wait-for` client waiting on `channel` until cancelled."""
    while True:
        try:
            await panes.wait_for(channel)
        except KairoError:
            # No tmux server: nothing to wait on, and the runner cannot signal either;
            # the waiter's own check finds what became of it.
            await trio.sleep(LIVENESS_CHECK_S)
            continue
        wake_ups.wake()
