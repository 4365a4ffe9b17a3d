"""The supervisor's one door to its log: append events, keep the folded state current.

Appends are serialized (the log has one writer) and run in a worker thread (the store is
blocking). The state is folded forward from each durable append, never changed otherwise.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence

import structlog
import trio

from orchestrator.core import checkpoints
from orchestrator.core import events as ev
from orchestrator.core.state import ExecutionState, apply
from orchestrator.errors import EnvironmentProblem, OwnershipError
from orchestrator.runtime import ownership
from orchestrator.runtime.ownership import lease_deadline
from orchestrator.store.base import ConcurrentUpdate, DurableExecutionStore, NewEvent, StoredEvent

log = structlog.get_logger(__name__)

CRASH_AFTER_VARIABLE = "KAIRO_FAULT_CRASH_AFTER_EVENT"
HEARTBEAT_SECONDS = ownership.HEARTBEAT_SECONDS
LEASE_RETRY_SECONDS = 1.0


class Journal:
    """Appends as the owner of the execution: every write says which version it expects."""

    def __init__(
        self, store: DurableExecutionStore, state: ExecutionState, *, owner: str, version: int
    ) -> None:
        self._store = store
        self._lock = trio.Lock()
        self._appended = 0
        crash_after = os.environ.get(CRASH_AFTER_VARIABLE, "")
        self._crash_after = int(crash_after) if crash_after.isdigit() else None
        self.owner = owner
        self.version = version
        self.state = state
        self.changed = trio.Event()

    @property
    def execution_id(self) -> str:
        return self.state.execution_id

    async def append(self, events: Sequence[ev.ExecutionEvent]) -> ExecutionState:
        if not events:
            return self.state
        records = [
            NewEvent(*ev.to_record(event), schema_version=ev.SCHEMA_VERSION) for event in events
        ]
        async with self._lock:
            status = self._status_after(events)
            stored = await trio.to_thread.run_sync(self._append_sync, records, status)
            state = self.state
            for event, row in zip(events, stored, strict=True):
                state = apply(state, event, row.seq)
                log.info("event", event_type=event.type, seq=row.seq, **_subtask_of(event))
                self._count_for_fault_injection()
            self.state = state
            if any(isinstance(event, checkpoints.SAFE_POINTS) for event in events):
                last = stored[-1]
                snapshot = checkpoints.snapshot(state, last.seq, last.event_hash)
                await trio.to_thread.run_sync(
                    self._store.save_checkpoint, self.execution_id, snapshot
                )
        self._wake()
        return state

    def _append_sync(self, records: list[NewEvent], status: str | None) -> list[StoredEvent]:
        try:
            stored = self._store.append(
                self.execution_id, records, expected_version=self.version, status=status
            )
        except ConcurrentUpdate:
            raise OwnershipError(
                f"execution {self.execution_id} was taken over by another supervisor; "
                "this one stops",
                execution_id=self.execution_id,
            ) from None
        self.version += 1
        return stored

    async def set_status(self, status: str, *, release: bool = False) -> None:
        """Renew the lease (the heartbeat), change the row's status, or let go of it."""
        async with self._lock:

            def update() -> None:
                row = self._store.set_status(
                    self.execution_id,
                    status,
                    owner=None if release else self.owner,
                    lease_expires_at=None if release else lease_deadline(),
                    expected_version=self.version,
                )
                self.version = row.version

            try:
                await trio.to_thread.run_sync(update)
            except ConcurrentUpdate:
                if release or not await self._own_write_went_unanswered():
                    raise OwnershipError(
                        f"execution {self.execution_id} was taken over by another supervisor",
                        execution_id=self.execution_id,
                    ) from None
                await trio.to_thread.run_sync(update)

    async def _own_write_went_unanswered(self) -> bool:
        """Whether the row moved on only by a write of ours whose answer was lost (a
        renewal the server committed as the connection dropped, tried again by
        `keep_lease`): it still names this supervisor, whose token no other process has.
        Then its version is taken as ours."""
        row = await trio.to_thread.run_sync(self._store.get_execution, self.execution_id)
        if row is None or row.owner != self.owner:
            return False
        self.version = row.version
        return True

    async def keep_lease(self, status: str) -> None:
        """Run until cancelled: renew the lease well before it runs out. A renewal the store
        failed (a server restarting, a connection cut) is tried again a second later, not
        fatal: the lease outlasts two missed beats, and nothing else was written."""
        while True:
            await trio.sleep(HEARTBEAT_SECONDS)
            while True:
                try:
                    await self.set_status(status)
                    break
                except EnvironmentProblem as problem:
                    log.warning("lease_renewal_failed", error=problem.message)
                    await trio.sleep(LEASE_RETRY_SECONDS)

    def _status_after(self, events: Sequence[ev.ExecutionEvent]) -> str | None:
        for event in events:
            if isinstance(event, ev.ExecutionEnded):
                return event.status
            if isinstance(event, ev.ExecutionReopened):
                return "RUNNING"
        return None

    def _count_for_fault_injection(self) -> None:
        # A testing aid of cli.md: die right after the Nth durable append of this process.
        self._appended += 1
        if self._crash_after is not None and self._appended >= self._crash_after:
            os.kill(os.getpid(), signal.SIGKILL)

    def _wake(self) -> None:
        self.changed.set()
        self.changed = trio.Event()


def _subtask_of(event: ev.ExecutionEvent) -> dict[str, str]:
    subtask_id = getattr(event, "subtask_id", None)
    return {"subtask_id": subtask_id} if subtask_id else {}
