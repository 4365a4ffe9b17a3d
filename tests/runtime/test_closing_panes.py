"""The panes of ended attempts are closed (runtime/closing_panes.py): which, and when, in the
in-memory world (tests/world), whose panes say when a running agent's would be closed."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from orchestrator.core.reasons import Reason, ReasonCode
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import AttemptView, SubtaskStateName, SubtaskView
from orchestrator.runtime.closing_panes import PANE_GRACE_S, moved_on, pane_grace
from tests.world import World, running_world, subtask
from tests.world.agents import Agent
from tests.world.repository import Tree


def _attempt(number: int, **fields: object) -> AttemptView:
    return AttemptView(number, f"k{number}", f"/runs/{number}", "c0ffee", f"%{number}", **fields)  # type: ignore[arg-type]


def _view(state: SubtaskStateName, *attempts: AttemptView) -> SubtaskView:
    return SubtaskView("a", state=state, attempts=attempts)


def test_a_pane_whose_agent_may_still_run_is_not_closed() -> None:
    running = _attempt(1)
    assert not moved_on(_view("running", running), running)
    # its subtask failed (a step of ours did), but nothing says its agent ended
    assert not moved_on(_view("failed", running), running)


def test_a_pane_is_closed_once_its_subtask_is_past_its_attempt() -> None:
    ended = _attempt(1, exit_code=0)
    assert not moved_on(_view("verifying", ended), ended)  # still judged on it
    assert moved_on(_view("merged", ended), ended)
    sent_back = _attempt(1, exit_code=0, reason=Reason(code=ReasonCode.NO_CHANGES, detail="x"))
    assert moved_on(_view("running", sent_back, _attempt(2)), sent_back)
    lost = _attempt(1, interrupted=True)
    assert moved_on(_view("stopped", lost), lost)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("", PANE_GRACE_S), ("0", 0.0), (" 2.5 ", 2.5), ("-1", PANE_GRACE_S), ("soon", PANE_GRACE_S)],
)
def test_the_grace_period_is_read_from_the_environment(value: str, seconds: float) -> None:
    assert pane_grace({"KAIRO_PANE_GRACE": value}) == seconds


def _slow(path: str, seconds: float = 0.15) -> Agent:
    async def agent(files: Tree, attempt: int) -> int:
        await trio.sleep(seconds)
        files[path] = "done\n"
        return 0

    return agent


async def _run(
    tmp_path: Path, count: int, max_parallel: int, grace: str
) -> tuple[World, ExecutionState]:
    """`count` subtasks whose agents take a moment, run to their end."""
    ids = [f"s{i}" for i in range(count)]
    async with running_world(tmp_path, {"README.md": "x\n"}, {s: _slow(s) for s in ids}) as world:
        world.environment["KAIRO_PANE_GRACE"] = grace
        plan = {
            "name": "world",
            "max_parallel": max_parallel,
            "subtasks": [subtask(s) for s in ids],
        }
        world.create(plan)
        final = await world.supervise()
    assert final.status == "COMPLETED"
    return world, final


async def test_ended_panes_are_closed_after_the_grace_period(tmp_path: Path) -> None:
    world, final = await _run(tmp_path, 8, max_parallel=2, grace="0")

    panes = {v.id: v.attempts[0].pane_id for v in final.subtasks.values()}
    # the first ones ended well before the run did: their panes were closed (the world
    # asserts, for each, that its agent no longer ran)
    assert {panes["s0"], panes["s1"], panes["s2"]} <= set(world.host.closed_panes)
    assert world.host.most_open <= 3


async def test_at_the_bound_ended_panes_make_room_whatever_the_grace(tmp_path: Path) -> None:
    world, _ = await _run(tmp_path, 10, max_parallel=3, grace="600")

    # a window per pane in the world: three running agents and one more
    assert world.host.most_open == 4
    assert len(world.host.closed_panes) == 10 - 4


async def test_a_pane_whose_subtask_goes_back_to_work_is_given_its_grace_again(
    tmp_path: Path,
) -> None:
    # s1 ends first; its pane is seen ended while it waits for s0 to merge first. Then both
    # are merged and checked, which their panes wait for: neither is over while it runs.
    agents = {"s0": _slow("s0.txt"), "s1": _slow("s1.txt")}
    agents["s0"] = _slow("s0.txt", seconds=0.7)
    async with running_world(tmp_path, {"README.md": "x\n"}, agents) as world:
        # Looks every 0.5 s: s1 is seen ended at the second, s0 merges before the third,
        # which comes while the check runs.
        world.environment["KAIRO_PANE_GRACE"] = "0.5"
        world.host.checks["check"] = lambda files: (0, "")
        world.host.check_seconds = 1.0
        plan = {
            "name": "world",
            "integration_verify": "check",
            "subtasks": [subtask("s0"), subtask("s1")],
        }
        world.create(plan)
        final = await world.supervise()
    assert final.status == "COMPLETED"
    assert final.merged == ("s0", "s1")
