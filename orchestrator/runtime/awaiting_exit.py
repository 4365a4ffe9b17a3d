"""Waiting for an attempt's runner to record how its agent ended.

The runner wakes the supervisor on a `tmux wait-for` channel the moment it has written its
exit record. One client waits on the channel for as long as the attempt runs, not a new
one a second: each would cost two tmux processes (the wait and, on its timeout, the
signal that clears it), and 16 idle agents cost the supervisor and the tmux server 7% of
a core that way. A check once a second finds a runner that died without a word.

The record is a file in the attempt's run folder, which is the user's and any agent's to
write: a sibling agent can write one there while this attempt's agent still works. So a
record is the runner's exit only once its runner is gone (the runner writes it as its
last act), and one found while the runner still runs its agent is a forgery: said so,
never taken, and known again by its file if it is still there when the runner is gone
(the runner's own replaces it, by a rename).
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
import trio

from orchestrator.errors import KairoError
from orchestrator.runtime.attempts import ExitRecord, RunFiles, read_exit_record
from orchestrator.runtime.ports import Panes, Processes

log = structlog.get_logger(__name__)

#: How often a waiting attempt's runner is looked for, in case it died without a word.
LIVENESS_CHECK_S = 1.0
#: How often to look again while a runner that wrote its record exits.
EXITING_CHECK_S = 0.02


@dataclass(frozen=True)
class Awaited:
    """How the wait ended: the runner's record (None: it is gone without one), and whether
    a record was forged meanwhile."""

    record: ExitRecord | None
    forged: bool = False


async def wait_for_exit(
    panes: Panes, processes: Processes, files: RunFiles, channel: str
) -> Awaited:
    """Once the runner is gone: its exit record, or None for a runner gone without one."""
    missing = 0
    forged: set[tuple[int, int]] = set()  # the files of the records found forged
    async with trio.open_nursery() as nursery:
        wake_ups = _WakeUps()
        nursery.start_soon(_listen, panes, channel, wake_ups)
        # The first look is for the record only: the runner was started (or found running)
        # a moment ago, and may not have said its pid yet, which would make finding it a
        # look at every process's command line (once per agent of a fan-out).
        record = await trio.to_thread.run_sync(read_exit_record, files)
        while True:
            if record is not None:
                runner = await processes.runner_state(files)
                if runner == "gone":
                    # Read again: the runner's own record may have replaced the one read
                    # before it ended.
                    record = await trio.to_thread.run_sync(read_exit_record, files)
                    break
                if runner == "with_agent" and record.stamp not in forged:
                    forged.add(record.stamp)
                    log.warning("exit_record_forged", path=str(files.exit))
            if record is not None and runner == "without_agent":
                await trio.sleep(EXITING_CHECK_S)  # it has written its record, and exits
            else:
                with trio.move_on_after(LIVENESS_CHECK_S):
                    await wake_ups.wait()
                # Whether the runner runs, then its exit record: in that order, so that a
                # runner which wrote its record and exited between the two looks is not
                # taken for a lost one.
                alive = await processes.runner_state(files) != "gone"
                # Twice in a row, a check apart: a runner that is just being exec'd is not
                # dead.
                missing = 0 if alive else missing + 1
            record = await trio.to_thread.run_sync(read_exit_record, files)
            if record is None and missing >= 2:
                break
        nursery.cancel_scope.cancel()
    if record is not None and record.stamp in forged:
        record = None  # the runner is gone, and what it leaves is still the forger's file
    return Awaited(record, forged=bool(forged))


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
