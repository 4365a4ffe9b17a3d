"""Recovery and stops of the supervisor loop, in-process against the in-memory world
(tests/world): a supervisor killed mid-run and one that resumes on the same store, a
graceful stop and a stop now. No git, no tmux."""

from __future__ import annotations

from pathlib import Path

import trio

from orchestrator.core import events as ev
from tests.world import World, running_world, subtask, waits_for, writes
from tests.world.agents import Agent

README = {"README.md": "project\n"}
PLAN = {"name": "world", "subtasks": [subtask("a"), subtask("b"), subtask("c", "a", "b")]}


def merges(world: World) -> list[str]:
    return [e.subtask_id for e in world.events() if isinstance(e, ev.SubtaskMerged)]


def b_waits_for(b_works: trio.Event) -> dict[str, Agent]:
    return {
        "a": writes("a.txt", "A\n"),
        "b": waits_for(b_works, "b.txt", "B\n"),
        "c": writes("c.txt", "C\n"),
    }


async def killed_while_b_runs(world: World) -> None:
    """The first supervisor dies once a is merged and b's agent runs: what it appended
    stays in the store, b's agent runs on without it."""
    world.create(PLAN)
    with trio.CancelScope() as killed:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(world.supervise)
            await world.until(
                lambda: (
                    "subtask_merged" in world.types("a")
                    and "attempt_pane_opened" in world.types("b")
                )
            )
            killed.cancel()
    assert world.host.running() == ["b"]
    assert world.types()[-1] != "execution_ended"


def settled_once_each(world: World) -> None:
    """Nothing the log had settled ran again: each agent once, each merge once."""
    assert sorted(world.host.launched) == [("a", 1), ("b", 1), ("c", 1)]
    assert sorted(merges(world)) == ["a", "b", "c"]
    assert "attempt_interrupted" not in world.types()
    assert world.integration_files()["b.txt"] == "B\n"


async def test_a_killed_supervisor_resumed_on_its_store_reattaches_its_agent_and_completes(
    tmp_path: Path,
) -> None:
    b_works = trio.Event()
    async with running_world(tmp_path, README, b_waits_for(b_works)) as world:
        await killed_while_b_runs(world)
        async with world.supervising(resumed=True) as final:
            # Recovery is over (RECOVERING, then RUNNING): b was found running, re-attached.
            await world.until(
                lambda: (
                    world.types().count("supervisor_started") == 2 and world.status() == "RUNNING"
                )
            )
            assert "attempt_exited" not in world.types("b")
            b_works.set()  # b's agent ends while the second supervisor watches it
    assert final[0].status == "COMPLETED"
    settled_once_each(world)


async def test_an_agent_that_ends_between_recoverys_two_looks_is_recovered_not_interrupted(
    tmp_path: Path,
) -> None:
    # Recovery reads the exit record, then looks for the runner: one that writes its
    # record and ends between the two looks was taken for a lost one.
    b_works = trio.Event()
    async with running_world(tmp_path, README, b_waits_for(b_works)) as world:
        await killed_while_b_runs(world)

        async def b_ends() -> None:
            b_works.set()
            await world.host.finished("b")

        world.host.before_alive_check = b_ends
        final = await world.supervise(resumed=True)
    assert final.status == "COMPLETED"
    settled_once_each(world)


async def test_an_agent_gone_while_no_supervisor_watched_is_saved_reset_and_rerun(
    tmp_path: Path,
) -> None:
    a_works = trio.Event()
    agents = {"a": waits_for(a_works, "a.txt", "all of A\n")}
    plan = {"name": "world", "subtasks": [subtask("a", idempotent=True)]}
    async with running_world(tmp_path, README, agents) as world:
        world.create(plan)
        with trio.CancelScope() as killed:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(world.supervise)
                await world.until(lambda: "attempt_pane_opened" in world.types("a"))
                killed.cancel()
        await world.host.lose("a")  # half of a.txt written, no exit record
        a_works.set()
        final = await world.supervise(resumed=True)
    assert final.status == "COMPLETED"
    interrupted = next(e for e in world.events() if isinstance(e, ev.AttemptInterrupted))
    assert interrupted.rerun and interrupted.recovery_ref is not None
    saved = world.repository.tree_at(world.repository.refs[interrupted.recovery_ref])
    assert saved["a.txt"] == "all "  # what it left, kept; its rerun started afresh
    assert world.host.launched == [("a", 1), ("a", 2)]
    assert world.integration_files()["a.txt"] == "all of A\n"


async def test_a_graceful_stop_lets_the_running_attempt_finish_and_starts_nothing_more(
    tmp_path: Path,
) -> None:
    a_works = trio.Event()
    agents = {"a": waits_for(a_works, "a.txt", "A\n"), "b": writes("b.txt", "B\n")}
    plan = {"name": "world", "max_parallel": 1, "subtasks": [subtask("a"), subtask("b")]}
    async with running_world(tmp_path, README, agents) as world:
        world.create(plan)
        async with world.supervising() as final:
            await world.until(lambda: "attempt_pane_opened" in world.types("a"))
            await world.request_stop("graceful")
            a_works.set()
    assert final[0].status == "STOPPED"
    assert world.host.launched == [("a", 1)]  # b never started
    assert "attempt_judged" in world.types("a")  # a's attempt finished and was judged
    assert "attempt_exited" in world.types("a")
    assert world.host.running() == []


async def test_stop_now_kills_the_running_agent_and_keeps_its_partial_work(
    tmp_path: Path,
) -> None:
    never = trio.Event()
    agents = {"a": waits_for(never, "a.txt", "all of A\n")}
    async with running_world(tmp_path, README, agents) as world:
        world.create({"name": "world", "subtasks": [subtask("a")]})
        async with world.supervising() as final:
            await world.until(lambda: "attempt_pane_opened" in world.types("a"))
            await world.request_stop("now")
    assert final[0].status == "STOPPED"
    assert world.host.running() == []
    committed = next(e for e in world.events() if isinstance(e, ev.AttemptCommitted))
    assert committed.recovery_ref is not None and not committed.changed
    # What the agent had written when it was killed is on the ref; the worktree is back
    # at its start.
    saved = world.repository.tree_at(world.repository.refs[committed.recovery_ref])
    assert saved["a.txt"] == "all "
    worktree = world.repository.worktrees[Path(final[0].subtask("a").worktree or "")]
    assert "a.txt" not in worktree.files
