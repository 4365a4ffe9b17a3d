"""Stops asked of a placed execution's supervisor from another host, as the PostgreSQL
store carries them (`kairo_stop_requests`; docs/operations.md, "Workers on several
machines").

A supervisor on this host is asked by a signal (runtime/stopping.py); one on another host
cannot be, so `kairo-orch stop` leaves a request addressed to the owner it found on the
execution's row (`host:pid`), and that owner's supervisor takes it up and records the
usual `stop_requested` event (runtime/placement.py). Addressed to one owner, a request
left untaken by an owner that died is not taken by the `resume` after it: a request is
for the supervisor that was asked, as a signal is.

Each function runs inside a transaction the store opened (`PostgresStore`), on its cursor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from orchestrator.core.events import StopMode
from orchestrator.store.sql_store import Cursor


@dataclass(frozen=True, slots=True)
class StopRequest:
    mode: StopMode
    host: str  # where `kairo-orch stop` ran


@runtime_checkable
class StopRequests(Protocol):
    """The store's part that a stop from another host uses (`PostgresStore` has it)."""

    def request_stop(self, execution_id: str, owner: str, request: StopRequest) -> None: ...

    def take_stop_requests(self, execution_id: str, owner: str) -> list[StopRequest]: ...


def request(cursor: Cursor, execution_id: str, owner: str, stop: StopRequest) -> None:
    cursor.execute(
        "INSERT INTO kairo_stop_requests (execution_id, owner, mode, host, requested_at)"
        " VALUES (%s, %s, %s, %s, now())",
        (execution_id, owner, stop.mode, stop.host),
    )


def take(cursor: Cursor, execution_id: str, owner: str) -> list[StopRequest]:
    """The requests addressed to `owner` not yet taken, oldest first, now taken."""
    cursor.execute(
        "UPDATE kairo_stop_requests SET taken_at = now()"
        " WHERE execution_id = %s AND owner = %s AND taken_at IS NULL"
        " RETURNING request_id, mode, host",
        (execution_id, owner),
    )
    found = sorted(cursor.fetchall())
    return [StopRequest(mode=mode, host=host) for _, mode, host in found]
