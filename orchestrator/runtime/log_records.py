"""An event as the log stores it: one way in, for the Journal's appends and for the first
event of an execution, which creates it before there is a supervisor or a Journal."""

from __future__ import annotations

from orchestrator.core import events as ev
from orchestrator.store.base import DurableExecutionStore, NewEvent


def record_of(event: ev.ExecutionEvent) -> NewEvent:
    return NewEvent(*ev.to_record(event), schema_version=ev.SCHEMA_VERSION)


def create_execution(
    store: DurableExecutionStore,
    execution_id: str,
    created: ev.ExecutionCreated,
    *,
    repository: str,
) -> None:
    """The execution's row and its first event, in one transaction."""
    store.create_execution(
        execution_id, created.plan.name, "RUNNING", [record_of(created)], repository=repository
    )
