"""The execution store over SQL, written once for both backends (store.md).

`SqlStore` holds everything the two stores do alike: the row, the append that seals
events after the head and moves the head in one transaction, the optimistic lock,
checkpoints, reading and verifying the log. A backend (sqlite.py, postgres.py) says how a
transaction begins and ends on its connection, how a write locks the row it reads, what
its driver raises for a constraint, and how a long log is streamed to `verify`.

The SQL here is written with `?` placeholders; a backend whose driver wants another
marker rewrites them (`_sql`). One connection per store, guarded by a lock: the trio
runtime calls in from whichever worker thread `trio.to_thread` picks, and neither driver's
connection may run two transactions at once.
"""

from __future__ import annotations

import abc
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from types import EllipsisType, TracebackType
from typing import Any, ClassVar, Protocol, Self

from orchestrator.errors import EnvironmentProblem, LogVerificationError, StoreLost, UsageError
from orchestrator.store import chain, migrations
from orchestrator.store.base import (
    EMPTY_HEAD_HASH,
    EMPTY_HEAD_SEQ,
    AppendUnanswered,
    ConcurrentUpdate,
    ExecutionRow,
    NewEvent,
    StoredEvent,
    UnknownExecution,
    format_timestamp,
    match_execution_id,
)
from orchestrator.store.ulid import new_ulid

ROW = (
    "execution_id, plan_name, status, version, owner, lease_expires_at, head_seq, head_hash,"
    " checkpoint_json, created_at, updated_at, repository"
)
INSERT_EVENT = (
    "INSERT INTO kairo_execution_events (execution_id, seq, event_id, event_type,"
    " schema_version, payload_json, event_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
EVENT = "seq, event_id, event_type, schema_version, payload_json, event_hash, created_at"
VERIFIED = "seq, event_type, schema_version, payload_json, event_hash, created_at"  # verify_rows


class Cursor(migrations.Cursor, Protocol):
    """The part of a DB-API 2.0 cursor the store uses (sqlite3's and psycopg's): the
    migration runner's, and more."""

    def executemany(self, operation: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> Any: ...

    def fetchall(self) -> list[Any]: ...


def utc_now() -> datetime:
    return datetime.now(UTC)


def _is_json(text: Any) -> bool:
    try:
        json.loads(text)
    except (TypeError, ValueError):
        return False
    return True


class SqlStore(abc.ABC):
    """`DurableExecutionStore` over SQL; a subclass opens the connection and says how."""

    #: What the driver raises when a constraint (a duplicate key) refuses a write.
    integrity_errors: ClassVar[tuple[type[Exception], ...]] = ()
    #: Appended to the head's SELECT inside a write: the row lock, where the database
    #: does not already hold one writer at a time (SQLite's BEGIN IMMEDIATE does).
    lock_row: ClassVar[str] = ""

    def __init__(self, location: str, *, clock: Callable[[], datetime] = utc_now) -> None:
        self.location = location  # names the store in messages, never with a password
        self._clock = clock
        self._lock = threading.Lock()

    # --- what a backend provides -------------------------------------------------------

    @abc.abstractmethod
    def _transaction(self, *, write: bool) -> AbstractContextManager[Cursor]:
        """One transaction under `self._lock`, committed when the body returns. A read is
        a transaction too, so that all its queries see one snapshot: verify must not see
        the head of one append and the events of another. Driver failures other than
        `integrity_errors` become EnvironmentProblem."""

    @abc.abstractmethod
    def _stream(
        self, cursor: Cursor, operation: str, parameters: Sequence[Any]
    ) -> AbstractContextManager[Iterable[Any]]:
        """The rows of a long query, read lazily inside the current transaction, and let
        go of on leaving, however far they were read."""

    def _sql(self, operation: str) -> str:
        """`operation` with the driver's placeholder for each `?`."""
        return operation

    # --- the store ----------------------------------------------------------------------

    def _timestamp(self) -> str:
        return format_timestamp(self._clock())

    def _execution(self, cursor: Cursor, query: str, execution_id: str, *first: Any) -> Any:
        """The one row `query` (its last `?` the id, after those of `first`) finds, or
        UnknownExecution."""
        cursor.execute(self._sql(query), (*first, execution_id))
        found = cursor.fetchone()
        if found is None:
            raise UnknownExecution(execution_id)
        return found

    def _head(
        self, cursor: Cursor, execution_id: str, *, lock: bool = False
    ) -> tuple[int, int, str]:
        query = "SELECT version, head_seq, head_hash FROM kairo_executions WHERE execution_id = ?"
        version, head_seq, head_hash = self._execution(
            cursor, query + (self.lock_row if lock else ""), execution_id
        )
        return version, head_seq, head_hash

    def _head_to_extend(
        self, cursor: Cursor, execution_id: str, written: tuple[int, str] | None
    ) -> tuple[int, int, str, str | None]:
        """`_head`, locked, of a log that has no event past it, and the hash the log holds
        at the seq of `written` (None: no such event).

        Rows past the head mean someone wrote events without moving it: refuse to build on
        a log that would fail verification. One query with the head's (indexed probes):
        each query is a round trip to a PostgreSQL server.
        """
        version, head_seq, head_hash, past_head, hash_at_written = self._execution(
            cursor,
            "SELECT version, head_seq, head_hash, EXISTS (SELECT 1 FROM kairo_execution_events e"
            " WHERE e.execution_id = x.execution_id AND e.seq > x.head_seq),"
            " (SELECT w.event_hash FROM kairo_execution_events w"
            " WHERE w.execution_id = x.execution_id AND w.seq = ?)"
            " FROM kairo_executions x WHERE x.execution_id = ?" + self.lock_row,
            execution_id,
            written[0] if written is not None else EMPTY_HEAD_SEQ,
        )
        if past_head:
            raise chain.past_head(execution_id, head_seq)
        return version, head_seq, head_hash, hash_at_written

    def _insert(
        self,
        cursor: Cursor,
        execution_id: str,
        sealed: list[StoredEvent],
        prepared: list[chain.PreparedEvent],
    ) -> None:
        if sealed:
            cursor.executemany(
                self._sql(INSERT_EVENT),
                [
                    (
                        execution_id,
                        e.seq,
                        e.event_id,
                        e.event_type,
                        e.schema_version,
                        p.payload_json,
                        e.event_hash,
                        e.created_at,
                    )
                    for e, p in zip(sealed, prepared, strict=True)
                ],
            )

    def create_execution(
        self,
        execution_id: str,
        plan_name: str,
        status: str,
        events: Sequence[NewEvent],
        *,
        repository: str | None = None,
    ) -> list[StoredEvent]:
        prepared = [chain.prepare(event) for event in events]
        try:
            with self._transaction(write=True) as cursor:
                now = self._timestamp()
                sealed = chain.seal(
                    execution_id,
                    EMPTY_HEAD_SEQ,
                    EMPTY_HEAD_HASH,
                    prepared,
                    created_at=now,
                    new_id=new_ulid,
                )
                head_seq, head_hash = (
                    (sealed[-1].seq, sealed[-1].event_hash)
                    if sealed
                    else (EMPTY_HEAD_SEQ, EMPTY_HEAD_HASH)
                )
                cursor.execute(
                    self._sql(
                        f"INSERT INTO kairo_executions ({ROW})"
                        " VALUES (?, ?, ?, 0, NULL, NULL, ?, ?, NULL, ?, ?, ?)"
                    ),
                    (execution_id, plan_name, status, head_seq, head_hash, now, now, repository),
                )
                self._insert(cursor, execution_id, sealed, prepared)
        # Around the whole transaction: a pipelined write (postgres.py) hears of the
        # duplicate only when it commits. A fresh ULID's events cannot collide.
        except self.integrity_errors:
            raise UsageError(
                f"an execution {execution_id} already exists", execution_id=execution_id
            ) from None
        return sealed

    def append(
        self,
        execution_id: str,
        events: Sequence[NewEvent],
        *,
        expected_version: int | None = None,
        status: str | None = None,
        owner: str | None = None,
        written_head: tuple[int, str] | None = None,
    ) -> list[StoredEvent]:
        prepared = [chain.prepare(event) for event in events]  # the slow part, before locking
        extending = EMPTY_HEAD_SEQ
        sealed: list[StoredEvent] = []
        try:
            with self._transaction(write=True) as cursor:
                version, head_seq, head_hash, hash_at_written = self._head_to_extend(
                    cursor, execution_id, written_head
                )
                # Before the version: a takeover moves it, and never rewrites what was written.
                if written_head is not None:
                    chain.check_written_head(
                        execution_id, written_head, hash_at_written, head_seq, head_hash
                    )
                if expected_version is not None and expected_version != version:
                    raise ConcurrentUpdate(execution_id, expected=expected_version, found=version)
                if written_head is not None and (head_seq, head_hash) != written_head:
                    raise chain.written_over(execution_id, written_head, head_seq)
                extending = head_seq
                now = self._timestamp()
                sealed = chain.seal(
                    execution_id, head_seq, head_hash, prepared, created_at=now, new_id=new_ulid
                )
                self._insert(cursor, execution_id, sealed, prepared)
                if sealed:
                    head_seq, head_hash = sealed[-1].seq, sealed[-1].event_hash
                # The transaction already excludes other writers; the WHERE restates the lock.
                cursor.execute(
                    self._sql(
                        "UPDATE kairo_executions SET head_seq = ?, head_hash = ?,"
                        " version = version + 1, updated_at = ?, status = COALESCE(?, status),"
                        " owner = COALESCE(?, owner) WHERE execution_id = ? AND version = ?"
                    ),
                    (head_seq, head_hash, now, status, owner, execution_id, version),
                )
        # A seq taken already is a row written past the head behind the store's back. In
        # PostgreSQL the probe above may not show it, if its writer committed while this
        # one waited for the row's lock (the probe reads the statement's snapshot); the
        # insert's unique seq still refuses it. Around the whole transaction: a pipelined
        # write hears of it only as it commits.
        except self.integrity_errors as error:
            if not self._collides_on_seq(error):
                raise  # a bug, not the log
            raise chain.past_head(execution_id, extending) from error
        except StoreLost:
            raise  # nothing to try again
        except EnvironmentProblem as problem:
            raise AppendUnanswered(problem, sealed) from problem
        return sealed

    def set_status(
        self,
        execution_id: str,
        status: str,
        *,
        owner: str | EllipsisType | None = ...,
        lease_expires_at: str | EllipsisType | None = ...,
        expected_version: int | None = None,
    ) -> ExecutionRow:
        columns: dict[str, Any] = {"status": status}
        if not isinstance(owner, EllipsisType):
            columns["owner"] = owner
        if not isinstance(lease_expires_at, EllipsisType):
            columns["lease_expires_at"] = lease_expires_at
        assignments = "".join(f", {name} = ?" for name in columns)
        with self._transaction(write=True) as cursor:
            version, _, _ = self._head(cursor, execution_id, lock=True)
            if expected_version is not None and expected_version != version:
                raise ConcurrentUpdate(execution_id, expected=expected_version, found=version)
            columns["updated_at"] = self._timestamp()
            cursor.execute(
                self._sql(
                    f"UPDATE kairo_executions SET version = version + 1{assignments},"
                    " updated_at = ? WHERE execution_id = ? AND version = ?"
                ),
                (*columns.values(), execution_id, version),
            )
            return self._row(cursor, execution_id)

    def save_checkpoint(self, execution_id: str, checkpoint_json: str) -> None:
        json.loads(checkpoint_json)  # refuse a snapshot recovery could not read
        with self._transaction(write=True) as cursor:
            # Looked up rather than judged by the UPDATE's row count, which a pipelined
            # write (postgres.py) learns only once the transaction is over.
            self._head(cursor, execution_id)
            cursor.execute(
                self._sql(
                    "UPDATE kairo_executions SET checkpoint_json = ?, updated_at = ?"
                    " WHERE execution_id = ?"
                ),
                (checkpoint_json, self._timestamp(), execution_id),
            )

    def _row(self, cursor: Cursor, execution_id: str) -> ExecutionRow:
        query = f"SELECT {ROW} FROM kairo_executions WHERE execution_id = ?"
        return ExecutionRow(*self._execution(cursor, query, execution_id))

    def get_execution(self, execution_id: str, *, settled: bool = False) -> ExecutionRow | None:
        try:
            with self._transaction(write=settled) as cursor:
                if settled:
                    self._head(cursor, execution_id, lock=True)
                return self._row(cursor, execution_id)
        except UnknownExecution:
            return None

    def list_executions(self, *, repository: str | None = None) -> list[ExecutionRow]:
        where, parameters = "", []
        if repository is not None:
            where, parameters = " WHERE repository = ? OR repository IS NULL", [repository]
        with self._transaction(write=False) as cursor:
            cursor.execute(
                self._sql(
                    f"SELECT {ROW} FROM kairo_executions{where}"
                    " ORDER BY created_at DESC, execution_id DESC"
                ),
                parameters,
            )
            rows = cursor.fetchall()
        return [ExecutionRow(*row) for row in rows]

    def resolve_id(self, prefix_or_short: str) -> str:
        with self._transaction(write=False) as cursor:
            cursor.execute("SELECT execution_id FROM kairo_executions")
            ids = [row[0] for row in cursor.fetchall()]
        return match_execution_id(ids, prefix_or_short)

    def read_events(self, execution_id: str, after_seq: int = -1) -> list[StoredEvent]:
        with self._transaction(write=False) as cursor:
            self._head(cursor, execution_id)
            cursor.execute(
                self._sql(
                    f"SELECT {EVENT} FROM kairo_execution_events"
                    " WHERE execution_id = ? AND seq > ? ORDER BY seq"
                ),
                (execution_id, after_seq),
            )
            rows = cursor.fetchall()
        try:
            return [
                StoredEvent(execution_id, seq, event_id, kind, version, json.loads(t), digest, at)
                for seq, event_id, kind, version, t, digest, at in rows
            ]
        except (TypeError, ValueError):
            # A tampered row, or (verify hashes stored text unparsed) one whose hashes a
            # forger recomputed over text that is not JSON: named like verify names one.
            bad = next(r[0] for r in rows if not _is_json(r[4]))
            raise LogVerificationError(
                f"the event log of {execution_id} fails verification at seq {bad}:"
                " its payload is not JSON",
                execution_id=execution_id,
                bad_seq=bad,
            ) from None

    def event_hashes(self, execution_id: str, first: int, last: int) -> dict[int, str]:
        with self._transaction(write=False) as cursor:
            cursor.execute(
                self._sql(
                    "SELECT seq, event_hash FROM kairo_execution_events"
                    " WHERE execution_id = ? AND seq >= ? AND seq <= ?"
                ),
                (execution_id, first, last),
            )
            return {seq: digest for seq, digest in cursor.fetchall()}

    def verify(self, execution_id: str) -> tuple[int, str]:
        with self._transaction(write=False) as cursor:
            _, head_seq, head_hash = self._head(cursor, execution_id)
            # Only what the hashes cover, streamed in seq order, never held whole.
            query = f"SELECT {VERIFIED} FROM kairo_execution_events WHERE execution_id = ?"
            with self._stream(cursor, self._sql(query + " ORDER BY seq"), (execution_id,)) as rows:
                return chain.verify_rows(execution_id, rows, head_seq, head_hash)

    @abc.abstractmethod
    def _collides_on_seq(self, error: Exception) -> bool:
        """Whether an integrity error is an event's seq taken already in its execution."""

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
