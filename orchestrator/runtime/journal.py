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

from orchestrator.core import events as ev
from orchestrator.core.state import ExecutionState, apply, fold
from orchestrator.store.base import DurableExecutionStore, NewEvent

log = structlog.get_logger(__name__)

CRASH_AFTER_VARIABLE = "KAIRO_FAULT_CRASH_AFTER_EVENT"


def read_state(store: DurableExecutionStore, execution_id: str) -> ExecutionState:
    stored = store.read_events(execution_id)
    return fold(execution_id, (ev.from_record(e.event_type, e.payload) for e in stored))


class Journal:
    def __init__(self, store: DurableExecutionStore, state: ExecutionState) -> None:
        self._store = store
        self._lock = trio.Lock()
        self._appended = 0
        crash_after = os.environ.get(CRASH_AFTER_VARIABLE, "")
        self._crash_after = int(crash_after) if crash_after.isdigit() else None
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
            stored = await trio.to_thread.run_sync(
                lambda: self._store.append(self.execution_id, records, status=status)
            )
            state = self.state
            for event, row in zip(events, stored, strict=True):
                state = apply(state, event, row.seq)
                log.info("event", event_type=event.type, seq=row.seq, **_subtask_of(event))
                self._count_for_fault_injection()
            self.state = state
        self._wake()
        return state

    def _status_after(self, events: Sequence[ev.ExecutionEvent]) -> str | None:
        for event in events:
            if isinstance(event, ev.ExecutionEnded):
                return event.status
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
