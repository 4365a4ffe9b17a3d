"""An exit record counts once its runner is gone (runtime/awaiting_exit.py): one another
process writes while the agent runs is said forged and never taken. In-process, against
the in-memory world (tests/world), whose runner is gone once it has written its record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from orchestrator.core import events as ev
from orchestrator.runtime import awaiting_exit
from tests.world import World, running_world, subtask, waits_for

README = {"README.md": "project\n"}
FORGED = {"exit_code": 0, "output_tail": "forged", "runner_signal": None}


@pytest.fixture(autouse=True)
def looks_often(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(awaiting_exit, "LIVENESS_CHECK_S", 0.05)


async def forge_while_it_runs(world: World) -> None:
    await world.until(lambda: "attempt_pane_opened" in world.types("a"))
    record = world.root / "runs" / "a" / "1" / "exit.json"
    await trio.Path(record).write_text(json.dumps(FORGED))
    await trio.sleep(0.5)  # ten of the waiter's looks
    assert "attempt_exited" not in world.types("a")


async def test_a_record_forged_while_the_agent_runs_is_said_and_not_taken(
    tmp_path: Path,
) -> None:
    works = trio.Event()
    agents = {"a": waits_for(works, "a.txt", "A\n")}
    async with running_world(tmp_path, README, agents) as world:
        world.create({"name": "world", "subtasks": [subtask("a")]})
        async with world.supervising() as final:
            await forge_while_it_runs(world)
            works.set()
    assert final[0].status == "COMPLETED"
    [exited] = [e for e in world.events() if isinstance(e, ev.AttemptExited)]
    assert exited.written_by_others == ("exit_record",) and exited.output_tail == ""  # the runner's
    assert world.integration_files()["a.txt"] == "A\n"


async def test_a_forged_record_left_by_a_runner_gone_without_its_own_is_no_exit(
    tmp_path: Path,
) -> None:
    works = trio.Event()
    agents = {"a": waits_for(works, "a.txt", "A\n")}
    async with running_world(tmp_path, README, agents) as world:
        world.create({"name": "world", "subtasks": [subtask("a")]})
        async with world.supervising() as final:
            await forge_while_it_runs(world)
            await world.host.lose("a")  # its runner gone without a record of its own
            await world.until(lambda: "attempt_interrupted" in world.types("a"))
    assert "attempt_exited" not in world.types("a")
    assert final[0].subtask("a").state == "stopped"
