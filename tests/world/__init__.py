"""An in-memory world for the supervisor: a repository, worktrees, panes and processes
behind the runtime's ports (orchestrator/runtime/ports.py), so that the supervisor loop,
its effects, recovery and stops run in-process, in milliseconds. The store is a real
SQLite file: it is no edge, and what the tests assert on is the log it keeps.

    async with running_world(tmp_path, files, agents) as world:
        final = await world.supervise()
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from orchestrator.core import events as ev
from orchestrator.core.plan import ResolvedPlan
from orchestrator.core.state import ExecutionState
from orchestrator.runtime.edges import Edges
from orchestrator.runtime.journal import Journal
from orchestrator.runtime.log_records import create_execution
from orchestrator.runtime.ownership import claim
from orchestrator.runtime.state_reader import read_state
from orchestrator.runtime.supervisor import supervise
from orchestrator.store.sqlite import SqliteStore
from tests.world.agents import Agent, MemoryHost
from tests.world.repository import MemoryRepository, MemoryWorkspaces, Tree

EXECUTION_ID = "01WORLD"
INTEGRATION_BRANCH = "kairo/world/int"
OWNER = "world-host:1"


class World:
    def __init__(self, root: Path, files: Tree, agents: Mapping[str, Agent]) -> None:
        self.root = root
        self.repository = MemoryRepository(files)
        self.workspaces = MemoryWorkspaces(self.repository)
        self.host = MemoryHost(self.repository, agents)
        self.store = SqliteStore(root / "kairo.db")
        self._kept: list[ev.ExecutionEvent] | None = None  # the log, once the store closed
        #: The running supervisor's journal: a stop request goes in through it, as
        #: runtime/stopping.py appends one for a signal.
        self.journal_now: Journal | None = None
        #: The supervisor's environment (KAIRO_PANE_GRACE, say).
        self.environment: dict[str, str] = {}

    def edges(self) -> Edges:
        return Edges(
            repo_root=self.root / "repo",
            workspaces=self.workspaces,
            repository=self.repository,
            panes=self.host,
            processes=self.host,
            environment=self.environment,
        )

    def create(self, plan: dict[str, Any]) -> None:
        """The execution as `start` records it, before its supervisor runs."""
        created = ev.ExecutionCreated(
            plan=ResolvedPlan.model_validate(plan),
            plan_path=str(self.root / "plan.yaml"),
            repo_root=str(self.root / "repo"),
            git_common_dir=str(self.root / "repo" / ".git"),
            base_commit=self.repository.base,
            integration_branch=INTEGRATION_BRANCH,
            tmux_socket=None,
            tmux_session="kairo-world",
            worktree_root=str(self.root / "worktrees"),
            run_root=str(self.root / "runs"),
        )
        create_execution(self.store, EXECUTION_ID, created, repository=str(self.root))

    def journal(self, *, resumed: bool) -> Journal:
        """The log as a supervisor (a first, or one that resumes) takes it over."""
        row = claim(
            self.store, EXECUTION_ID, owner=OWNER, status="RECOVERING" if resumed else "RUNNING"
        )
        state = read_state(self.store, EXECUTION_ID)
        return Journal(self.store, state, owner=OWNER, version=row.version)

    async def supervise(
        self, *, resumed: bool = False, stop: ev.StopMode | None = None
    ) -> ExecutionState:
        self.journal_now = self.journal(resumed=resumed)
        return await supervise(self.journal_now, self.edges(), resumed=resumed, stop=stop)

    @asynccontextmanager
    async def supervising(self, *, resumed: bool = False) -> AsyncIterator[list[ExecutionState]]:
        """A supervisor running beside the block; the list it yields holds its final state
        once both have ended."""
        final: list[ExecutionState] = []

        async def run() -> None:
            final.append(await self.supervise(resumed=resumed))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            yield final

    async def request_stop(self, mode: ev.StopMode) -> None:
        assert self.journal_now is not None
        await self.journal_now.append([ev.StopRequested(mode=mode, source="test", at=time.time())])

    async def until(self, condition: Callable[[], bool]) -> None:
        """Once `condition` holds: it reads the log, which the supervisor appends to."""
        with trio.fail_after(10):
            # Looked at: the store tells nobody of an append, as for `kairo-orch wait`.
            while not condition():  # noqa: ASYNC110
                await trio.sleep(0.002)

    def status(self) -> str:
        row = self.store.get_execution(EXECUTION_ID)
        assert row is not None
        return row.status

    def events(self) -> list[ev.ExecutionEvent]:
        if self._kept is not None:
            return self._kept
        return [
            ev.from_record(e.event_type, e.payload, e.schema_version)
            for e in self.store.read_events(EXECUTION_ID)
        ]

    def types(self, subtask_id: str | None = None) -> list[str]:
        """The log's event types, those of one subtask when given."""
        return [
            e.type
            for e in self.events()
            if subtask_id is None or getattr(e, "subtask_id", None) == subtask_id
        ]

    def close(self) -> None:
        """Close the store, keeping its log for the assertions that follow."""
        self._kept = self.events()
        self.store.close()

    def integration_files(self) -> Tree:
        return self.repository.tree_at(INTEGRATION_BRANCH)


@asynccontextmanager
async def running_world(
    root: Path, files: Tree, agents: Mapping[str, Agent]
) -> AsyncIterator[World]:
    """The world, its agents' runners running in a nursery of its own until the end."""
    world = World(root, files, agents)
    try:
        async with trio.open_nursery() as nursery:
            world.host.nursery = nursery
            yield world
            nursery.cancel_scope.cancel()  # agents left hanging: the test is over
    finally:
        world.close()


def subtask(
    sid: str, *depends_on: str, verify: str | None = None, idempotent: bool = False
) -> dict[str, Any]:
    return {
        "id": sid,
        "title": sid,
        "prompt": f"do {sid}",
        "depends_on": list(depends_on),
        "agent": {"kind": "shell", "run": "true", "idempotent": idempotent},
        "verify": verify,
    }


def writes(path: str, text: str, *, code: int = 0) -> Agent:
    """An agent that writes `path` and exits with `code`."""

    async def agent(files: Tree, attempt: int) -> int:
        files[path] = text
        return code

    return agent


def waits_for(gate: trio.Event, path: str, text: str) -> Agent:
    """An agent that works until `gate` is set, then writes `path` and exits 0; or, if
    its group is stopped first, leaves `path` half written."""

    async def agent(files: Tree, attempt: int) -> int:
        files[path] = text[: len(text) // 2]
        await gate.wait()
        files[path] = text
        return 0

    return agent
