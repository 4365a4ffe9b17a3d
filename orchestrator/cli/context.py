"""What every command needs: the repository, the store, an execution id, its state."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.state import ExecutionState
from orchestrator.core.status import effective_status
from orchestrator.errors import UsageError
from orchestrator.git.repo import RepoPaths, discover_repo
from orchestrator.runtime.ownership import owner_alive
from orchestrator.runtime.state_reader import read_state
from orchestrator.store import open_store
from orchestrator.store.base import DurableExecutionStore, ExecutionRow


@dataclass
class Workspace:
    paths: RepoPaths
    store: DurableExecutionStore
    store_url: str | None

    def resolve(self, id_or_prefix: str | None) -> str:
        if id_or_prefix:
            return self.store.resolve_id(id_or_prefix)
        rows = self.store.list_executions()
        if not rows:
            raise UsageError("there is no execution in this repository yet")
        return rows[0].execution_id

    def row(self, execution_id: str) -> ExecutionRow:
        row = self.store.get_execution(execution_id)
        if row is None:
            raise UsageError(f"no execution {execution_id}")
        return row

    def state(self, execution_id: str) -> ExecutionState:
        return read_state(self.store, execution_id)

    def status_of(self, state: ExecutionState, row: ExecutionRow) -> str:
        return effective_status(state, supervisor_alive=owner_alive(row))


@contextmanager
def open_workspace(repo: Path, store_url: str | None) -> Iterator[Workspace]:
    paths = discover_repo(repo)
    with open_store(store_url, git_common_dir=paths.git_common_dir) as store:
        yield Workspace(paths=paths, store=store, store_url=store_url)
