"""Turns at the git work that follows an agent's end, by place in the merge queue.

When many agents end together, their commits and worktree releases would all run at once:
on a machine of few cores that finishes none of them sooner, and starves the one merge
step of the CPU that keeps the merge queue short. So they take turns, as many at a time
as half the cores, and the subtask nearest the head of the merge queue goes first: with
`merge_order: plan` an accepted subtask waits for every one before it, so the one the
queue waits for is the one to finish first. Other steps wait on agents, checks or the
user's setup, or gain from company (panes opened together), and go at once.
"""

from __future__ import annotations

import heapq
import itertools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from orchestrator.core import commands as cmd

BOUNDED = (cmd.CommitAttempt, cmd.ReleaseWorkspace)


class Turns:
    def __init__(self, capacity: int | None = None) -> None:
        self._free = capacity or max(1, (os.cpu_count() or 1) // 2)
        self._waiting: list[tuple[int, int, trio.Event]] = []  # a heap: rank, then arrival
        self._arrivals = itertools.count()

    @asynccontextmanager
    async def turn(self, command: cmd.Command, rank: int) -> AsyncIterator[None]:
        """Carry out `command` in its turn (at once, unless it is one of BOUNDED)."""
        if not isinstance(command, BOUNDED):
            yield
            return
        await self._acquire(rank)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, rank: int) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        entry = (rank, next(self._arrivals), trio.Event())
        heapq.heappush(self._waiting, entry)
        try:
            await entry[2].wait()
        except BaseException:
            if entry[2].is_set():
                self._release()  # handed a turn as it was cancelled: pass it on
            else:
                self._waiting.remove(entry)
                heapq.heapify(self._waiting)
            raise

    def _release(self) -> None:
        """The turn goes straight to the first waiting, else back to the pool."""
        if self._waiting:
            heapq.heappop(self._waiting)[2].set()
        else:
            self._free += 1
