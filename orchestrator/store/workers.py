"""Workers on several hosts, as the PostgreSQL store keeps them: one row each, with a
heartbeat lease (docs/operations.md, "Workers on several machines").

A worker registers itself (host, address, slots), renews its lease every few seconds and
deletes its row when it stops. Every time here is the database's (`now()`): the hosts'
clocks may disagree, and whether a lease has lapsed is a question for one clock. A
worker that comes back after its lease lapsed (a host stopped, a network cut) counts it
in `lapses` as it renews; one whose row was removed meanwhile registers again.

The SQL is PostgreSQL's; each function runs inside a transaction the store opened
(`PostgresStore`), on its cursor. SQLite keeps no workers: one machine needs none.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from orchestrator.store.sql_store import Cursor


@dataclass(frozen=True, slots=True)
class Registration:
    """What a worker says of itself."""

    host: str
    address: str | None  # None: the address the database sees it connect from
    pid: int
    slots: int
    lease_seconds: float
    #: The git remote whose plans it carries out (`worker --remote`); None: it takes none.
    remote: str | None = None


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """One row of `kairo_workers`, with what the database's clock said of it when read."""

    worker_id: str
    host: str
    address: str
    pid: int
    slots: int
    lease_seconds: float
    started_at: datetime
    heartbeat_at: datetime
    lease_expires_at: datetime
    lapses: int  # how often it came back after its lease had lapsed
    alive: bool  # its lease had not expired when read
    heartbeat_age_s: float  # seconds since its last heartbeat, when read
    remote: str | None = None  # the git remote whose plans it carries out
    running: int = 0  # the agents it runs now (`_RUNNING`)


class WorkerRegistry(Protocol):
    """The store's part that workers use (`PostgresStore` has it; `SqliteStore` not)."""

    def register_worker(self, worker_id: str, registration: Registration) -> WorkerRow:
        """Insert the row with a fresh lease, forgetting this host's lapsed workers."""
        ...

    def renew_worker(self, worker_id: str, registration: Registration) -> WorkerRow:
        """Extend the lease by `lease_seconds` from now; registers again if the row is gone."""
        ...

    def deregister_worker(self, worker_id: str) -> None: ...

    def list_workers(self) -> list[WorkerRow]:
        """Every worker, alive or lapsed, by host, then oldest first."""
        ...


#: The agents a worker runs now: the subtasks whose AwaitAttempt it has taken and not
#: finished (store/commands.py; its agent ends, the command is done). Counted by subtask:
#: an owner that took over queues the await anew while the old one is still taken.
_RUNNING = (
    "(SELECT count(DISTINCT (c.execution_id, c.subtask_id)) FROM kairo_commands c"
    " WHERE c.worker_id = kairo_workers.worker_id AND c.state = 'taken'"
    " AND c.command::jsonb ->> 'type' = 'AwaitAttempt')"
)
_COLUMNS = (
    "worker_id, host, address, pid, slots, lease_seconds, started_at, heartbeat_at,"
    " lease_expires_at, lapses, lease_expires_at > now(),"
    f" EXTRACT(EPOCH FROM now() - heartbeat_at), remote, {_RUNNING}"
)
_LEASE = "now() + make_interval(secs => %s)"


def _row(found: Any) -> WorkerRow:
    worker_id, host, address, pid, slots, lease_s, started, beat, expires, lapses, alive, age = (
        found[:12]
    )
    return WorkerRow(
        worker_id=worker_id,
        host=host,
        address=address,
        pid=pid,
        slots=slots,
        lease_seconds=float(lease_s),
        started_at=started,
        heartbeat_at=beat,
        lease_expires_at=expires,
        lapses=lapses,
        alive=bool(alive),
        heartbeat_age_s=max(0.0, float(age)),
        remote=found[12],
        running=int(found[13]),
    )


def register(
    cursor: Cursor, worker_id: str, registration: Registration, *, lapses: int = 0
) -> WorkerRow:
    # A lapsed worker of this host is one that ended without deregistering (killed, its
    # host restarted): the new one replaces it. One merely stalled registers again when
    # it comes back (`renew`).
    cursor.execute(
        "DELETE FROM kairo_workers WHERE host = %s AND lease_expires_at < now()",
        (registration.host,),
    )
    cursor.execute(
        "INSERT INTO kairo_workers (worker_id, host, address, pid, slots, lease_seconds,"
        " started_at, heartbeat_at, lease_expires_at, lapses, remote)"
        " VALUES (%s, %s, COALESCE(%s, host(inet_client_addr()), %s), %s, %s, %s,"
        f" now(), now(), {_LEASE}, %s, %s) RETURNING {_COLUMNS}",
        (
            worker_id,
            registration.host,
            registration.address,
            registration.host,  # over a unix socket the database sees no address
            registration.pid,
            registration.slots,
            registration.lease_seconds,
            registration.lease_seconds,
            lapses,
            registration.remote,
        ),
    )
    return _row(cursor.fetchone())


def renew(cursor: Cursor, worker_id: str, registration: Registration) -> WorkerRow | None:
    """The row with its lease extended, or None when it is gone. (In SET, a column
    names its value before the update: `lapses` counts a lease that had expired.)"""
    cursor.execute(
        "UPDATE kairo_workers SET heartbeat_at = now(),"
        " lapses = lapses + CASE WHEN lease_expires_at < now() THEN 1 ELSE 0 END,"
        f" lease_expires_at = {_LEASE} WHERE worker_id = %s RETURNING {_COLUMNS}",
        (registration.lease_seconds, worker_id),
    )
    found = cursor.fetchone()
    return None if found is None else _row(found)


def deregister(cursor: Cursor, worker_id: str) -> None:
    cursor.execute("DELETE FROM kairo_workers WHERE worker_id = %s", (worker_id,))


def every_worker(cursor: Cursor) -> list[WorkerRow]:
    cursor.execute(f"SELECT {_COLUMNS} FROM kairo_workers ORDER BY host, started_at, worker_id")
    return [_row(found) for found in cursor.fetchall()]
