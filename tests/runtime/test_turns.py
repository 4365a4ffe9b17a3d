"""Turns at the git work after an agent's end: bounded, nearest the merge queue's head first."""

from __future__ import annotations

import trio

from orchestrator.core import commands as cmd
from orchestrator.runtime.turns import Turns


def commit(sid: str) -> cmd.CommitAttempt:
    return cmd.CommitAttempt(subtask_id=sid, attempt=1)


async def test_waiting_steps_go_by_rank_not_by_arrival_and_others_go_at_once() -> None:
    turns = Turns(capacity=1)
    order: list[str] = []
    release = trio.Event()

    async def step(command: cmd.Command, rank: int) -> None:
        async with turns.turn(command, rank):
            order.append(command.subtask_id)
            if command.subtask_id == "first":
                await release.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(step, commit("first"), 9)
        await trio.testing.wait_all_tasks_blocked()
        for sid, rank in (("late", 5), ("head", 1), ("middle", 3)):
            nursery.start_soon(step, commit(sid), rank)
            await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(step, cmd.AwaitAttempt(subtask_id="agent", attempt=1), 0)
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["first", "agent"]  # an agent's wait takes no turn
        release.set()
    assert order == ["first", "agent", "head", "middle", "late"]


async def test_a_step_cancelled_while_it_waits_gives_up_its_place() -> None:
    turns = Turns(capacity=1)
    order: list[str] = []
    release = trio.Event()

    async def step(sid: str, rank: int) -> None:
        async with turns.turn(commit(sid), rank):
            order.append(sid)
            if sid == "holder":
                await release.wait()

    gone = trio.CancelScope()

    async def cancelled() -> None:
        with gone:
            await step("cancelled", 1)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(step, "holder", 0)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(step, "kept", 2)
        nursery.start_soon(cancelled)
        await trio.testing.wait_all_tasks_blocked()
        gone.cancel()
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert order == ["holder", "kept"]
