"""What every use case acts on: a repository and its store, an execution id, its state."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator import kairo_dir
from orchestrator.core.events import EndStatus
from orchestrator.core.state import ExecutionState
from orchestrator.core.status import effective_status, status_document
from orchestrator.errors import LogRewritten, UsageError
from orchestrator.git.repo import NotARepository, RepoPaths, discover_repo
from orchestrator.runtime.log_witness import LogWitness, rewritten
from orchestrator.runtime.ownership import owner_alive
from orchestrator.runtime.running_usage import running_usage
from orchestrator.runtime.state_reader import read_state
from orchestrator.store import open_store
from orchestrator.store.base import DurableExecutionStore, ExecutionRow

_END_STATUSES: tuple[str, ...] = typing.get_args(EndStatus)


@dataclass
class Project:
    """A repository and the store its executions are logged in."""

    paths: RepoPaths
    store: DurableExecutionStore
    store_url: str | None

    def resolve(self, id_or_prefix: str | None) -> str:
        """The execution an ID names (of any repository sharing the store), or this
        repository's newest."""
        if id_or_prefix:
            return self.store.resolve_id(id_or_prefix)
        rows = self.executions()
        if not rows:
            raise NoExecutionYet
        return rows[0].execution_id

    def resolve_own(self, id_or_prefix: str | None, *, placed_anywhere: bool = False) -> str:
        """As `resolve`, for a command that acts on the execution's worktrees, tmux or
        supervisor: those are where it was started, so it must be this repository's.
        `placed_anywhere` (resume): a `placement: workers` execution may be another's,
        since its worktrees and panes are on its workers, and the store and the remote
        hold all its owner needs."""
        execution_id = self.resolve(id_or_prefix)
        owner = self.row(execution_id).repository
        if self.shared and owner is not None and owner != self.paths.key:
            if placed_anywhere and self.state(execution_id).plan.placement == "workers":
                return execution_id
            host, _, git_dir = owner.partition(":")
            raise UsageError(
                f"execution {execution_id} belongs to the repository at {git_dir} on {host};"
                " run this there"
            )
        return execution_id

    def resolve_unended(
        self, id_or_prefix: str | None, *, paused: bool = False, placed_anywhere: bool = False
    ) -> str:
        """As `resolve_own`; left out, this repository's newest execution that has not
        ended (and, `paused`, has no live supervisor), else its newest: what `stop` and
        `resume` act on, since an older execution may be going on, or paused with its
        agents running, when a newer one has ended."""
        if not id_or_prefix:
            for row in self.unended():
                if not (paused and owner_alive(row)):
                    return row.execution_id
        return self.resolve_own(id_or_prefix, placed_anywhere=placed_anywhere)

    def executions(self) -> list[ExecutionRow]:
        """This repository's executions, newest first."""
        return self.store.list_executions(repository=self.paths.key if self.shared else None)

    def unended(self) -> Iterator[ExecutionRow]:
        """Those that have not ended, newest first. An ended execution's row says so (the
        end and the row's status are written in one transaction): no log is read. One whose
        log is not what its supervisor wrote (TAMPERED) never goes on: it is left out."""
        return (
            row
            for row in self.executions()
            if row.status not in _END_STATUSES and self.rewritten(row.execution_id) is None
        )

    @property
    def shared(self) -> bool:
        """Whether other repositories may keep executions in this store. The default one,
        inside this repository's git directory, holds only its own, even after the
        repository was moved or the host renamed (a laptop's name changes with its network):
        its rows' keys are not compared."""
        return self.store_url is not None

    def row(self, execution_id: str) -> ExecutionRow:
        row = self.store.get_execution(execution_id)
        if row is None:
            raise UsageError(f"no execution {execution_id}")
        return row

    def state(self, execution_id: str) -> ExecutionState:
        return read_state(self.store, execution_id)

    def rewritten(self, execution_id: str) -> LogRewritten | None:
        """How the log is not the one this repository's supervisors of it wrote, if it is
        not (runtime/log_witness.py: cheap when it is)."""
        witness = LogWitness.of(self.paths.git_common_dir, execution_id)
        return rewritten(self.store, execution_id, witness)

    def verify(self, execution_id: str) -> tuple[int, str]:
        """The log's chain and head, and that it is what its supervisors wrote: the
        verified head, or `LogVerificationError` (exit 3)."""
        head = self.store.verify(execution_id)
        found = self.rewritten(execution_id)
        if found is not None:
            raise found
        return head

    def status_of(self, state: ExecutionState, row: ExecutionRow) -> str:
        tampered = self.rewritten(state.execution_id) is not None
        return effective_status(state, supervisor_alive=owner_alive(row), tampered=tampered)

    def document(self, state: ExecutionState, row: ExecutionRow) -> dict[str, Any]:
        """`status --json`, with what running attempts have used so far."""
        found = self.rewritten(state.execution_id)
        return status_document(
            state,
            status=effective_status(
                state, supervisor_alive=owner_alive(row), tampered=found is not None
            ),
            version=row.version,
            head_seq=row.head_seq,
            head_hash=row.head_hash,
            running=running_usage(state),
            tampered=found.message if found is not None else None,
        )


class NoExecutionYet(UsageError):
    def __init__(self) -> None:
        super().__init__(
            "there is no execution in this repository yet; `kairo-orch start PLAN` starts one"
        )


def repository_at(repo: Path) -> RepoPaths:
    """The repository a command acts on; where there is none, how to name one."""
    try:
        return discover_repo(repo)
    except NotARepository as problem:
        raise NotARepository(
            f"{problem.message}; run kairo-orch in your repository's checkout, or name it "
            "with --repo DIR"
        ) from None


@contextmanager
def open_project(repo: Path, store_url: str | None, *, create: bool = True) -> Iterator[Project]:
    """The repository and its store. Without `create`, for a command that only looks (or
    acts on an execution that must exist), a default store not made yet is not made now:
    `NoExecutionYet` instead, and the repository is left as it was."""
    paths = repository_at(repo)
    if (
        not create
        and store_url is None
        and not kairo_dir.default_store(paths.git_common_dir).exists()
    ):
        raise NoExecutionYet
    with project_at(paths, store_url) as project:
        yield project


@contextmanager
def project_at(paths: RepoPaths, store_url: str | None) -> Iterator[Project]:
    with open_store(store_url, git_common_dir=paths.git_common_dir) as store:
        yield Project(paths=paths, store=store, store_url=store_url)
