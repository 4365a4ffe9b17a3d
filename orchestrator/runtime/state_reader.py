"""An execution's state read from its log, for the supervisor and for every command.

Apart from the journal (which logs through structlog) so that the commands that only read,
`status` first, do not import what only the supervisor needs.
"""

from __future__ import annotations

from orchestrator.core import checkpoints
from orchestrator.core import events as ev
from orchestrator.core.state import ExecutionState, apply, fold
from orchestrator.core.timeline import LoggedEvent, unix_time
from orchestrator.store.base import DurableExecutionStore, StoredEvent


def read_state(store: DurableExecutionStore, execution_id: str) -> ExecutionState:
    """The folded state: from the latest checkpoint when it still matches the log."""
    row = store.get_execution(execution_id)
    restored = checkpoints.restore(row.checkpoint_json) if row is not None else None
    if restored is not None:
        state, seq, event_hash = restored
        stored = store.read_events(execution_id, after_seq=seq - 1)
        if stored and stored[0].seq == seq and stored[0].event_hash == event_hash:
            for row_event in stored[1:]:
                state = apply(state, _event(row_event), row_event.seq)
            return state
    stored = store.read_events(execution_id)
    return fold(execution_id, (_event(e) for e in stored))


def advance_state(store: DurableExecutionStore, state: ExecutionState) -> ExecutionState:
    """`state` with the events appended since it was read: what a poll reads, not the log."""
    for stored in store.read_events(state.execution_id, after_seq=state.seq):
        state = apply(state, _event(stored), stored.seq)
    return state


def read_logged(
    store: DurableExecutionStore, execution_id: str
) -> tuple[ExecutionState, tuple[LoggedEvent, ...]]:
    """The whole log, each event with the time it was written, and its fold (the HTML
    report draws both): one read, no checkpoint."""
    logged = tuple(
        LoggedEvent(stored.seq, unix_time(stored.created_at), _event(stored))
        for stored in store.read_events(execution_id)
    )
    return fold(execution_id, (item.event for item in logged)), logged


def _event(stored: StoredEvent) -> ev.ExecutionEvent:
    return ev.from_record(stored.event_type, stored.payload, stored.schema_version)
