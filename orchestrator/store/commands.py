"""Commands of subtasks placed on workers, as the PostgreSQL store carries them
(`kairo_commands`; docs/operations.md, "Workers on several machines").

The owner of an execution queues a command for the worker its subtask is assigned to,
with the assignment's epoch, and NOTIFYs the worker; the worker takes its queued commands
(`FOR UPDATE SKIP LOCKED`: two takers never get the same one), carries each out and
leaves its events, or the error that stopped it; the owner reads them back and alone
appends them to the log. A worker takes nothing while its lease has lapsed: the owner may
have given its subtasks to another by then.

Each function runs inside a transaction the store opened (`PostgresStore`), on its cursor.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from orchestrator.store.sql_store import Cursor

#: The channel a worker LISTENs on; the payload is its worker id.
CHANNEL = "kairo_commands"

CommandState = Literal["queued", "taken", "done", "failed"]


@dataclass(frozen=True, slots=True)
class Queued:
    """A command to carry out, as its worker takes it."""

    command_id: int
    execution_id: str
    subtask_id: str
    epoch: int
    command: dict[str, Any]  # core/placement.command_record


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of a command, as its owner reads it back."""

    state: CommandState
    results: list[tuple[str, dict[str, Any]]]  # events, as events.to_record gives them
    error: str | None


class CommandQueue(Protocol):
    """The store's part that placement uses (`PostgresStore` has it)."""

    def queue_command(
        self,
        execution_id: str,
        subtask_id: str,
        worker_id: str,
        epoch: int,
        command: dict[str, Any],
    ) -> int: ...

    def take_commands(self, worker_id: str) -> list[Queued]: ...

    def finish_command(
        self,
        command_id: int,
        *,
        results: list[tuple[str, dict[str, Any]]],
        error: str | None,
    ) -> None: ...

    def command_outcome(self, command_id: int) -> Outcome | None: ...

    def cancel_command(self, command_id: int) -> None: ...


def queue(
    cursor: Cursor,
    execution_id: str,
    subtask_id: str,
    worker_id: str,
    epoch: int,
    command: dict[str, Any],
) -> int:
    cursor.execute(
        "INSERT INTO kairo_commands (execution_id, subtask_id, worker_id, epoch, command,"
        " queued_at) VALUES (%s, %s, %s, %s, %s, now()) RETURNING command_id",
        (execution_id, subtask_id, worker_id, epoch, json.dumps(command)),
    )
    (command_id,) = cursor.fetchone()
    cursor.execute("SELECT pg_notify(%s, %s)", (CHANNEL, worker_id))  # sent at commit
    return int(command_id)


def take(cursor: Cursor, worker_id: str) -> list[Queued]:
    """The worker's queued commands, now taken; none while its lease has lapsed."""
    cursor.execute(
        "UPDATE kairo_commands SET state = 'taken' WHERE command_id IN ("
        " SELECT command_id FROM kairo_commands WHERE worker_id = %s AND state = 'queued'"
        " AND EXISTS (SELECT 1 FROM kairo_workers w WHERE w.worker_id = %s"
        " AND w.lease_expires_at > now())"
        " ORDER BY command_id FOR UPDATE SKIP LOCKED)"
        " RETURNING command_id, execution_id, subtask_id, epoch, command",
        (worker_id, worker_id),
    )
    taken = [
        Queued(int(found[0]), found[1], found[2], int(found[3]), json.loads(found[4]))
        for found in cursor.fetchall()
    ]
    return sorted(taken, key=lambda queued: queued.command_id)


def finish(
    cursor: Cursor,
    command_id: int,
    results: list[tuple[str, dict[str, Any]]],
    error: str | None,
) -> None:
    cursor.execute(
        "UPDATE kairo_commands SET state = %s, results = %s, error = %s, done_at = now()"
        " WHERE command_id = %s",
        ("failed" if error is not None else "done", json.dumps(results), error, command_id),
    )


def outcome(cursor: Cursor, command_id: int) -> Outcome | None:
    cursor.execute(
        "SELECT state, results, error FROM kairo_commands WHERE command_id = %s", (command_id,)
    )
    found = cursor.fetchone()
    if found is None:
        return None
    state, results, error = found
    records = [(kind, payload) for kind, payload in json.loads(results)] if results else []
    return Outcome(state=state, results=records, error=error)


def cancel(cursor: Cursor, command_id: int) -> None:
    """A command whose outcome no longer counts: never taken, if it was not yet."""
    cursor.execute(
        "UPDATE kairo_commands SET state = 'failed', error = 'cancelled: assigned anew',"
        " done_at = now() WHERE command_id = %s AND state = 'queued'",
        (command_id,),
    )
