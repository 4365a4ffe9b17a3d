"""The SQLite execution store: one file in the git common dir, shared by every worktree.

One connection per store, guarded by a lock: the trio runtime calls in from whichever
worker thread `trio.to_thread` picks, and a sqlite3 connection is not safe to share
between threads at once. Other processes (another supervisor, an in-pane runner) are
kept apart by SQLite itself: every write transaction starts with BEGIN IMMEDIATE, which
takes the database's writer lock before the head is read, so two appends can never both
extend the same head; busy_timeout makes a writer wait for the lock instead of failing.
WAL lets readers go on while one process writes; synchronous=FULL makes a commit
survive power loss, which is the point of a recovery log.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import EllipsisType, TracebackType
from typing import Any, Self

from orchestrator.errors import EnvironmentProblem, LogVerificationError, UsageError
from orchestrator.store import chain, migrations
from orchestrator.store.base import (
    EMPTY_HEAD_HASH,
    EMPTY_HEAD_SEQ,
    ConcurrentUpdate,
    ExecutionRow,
    NewEvent,
    StoredEvent,
    UnknownExecution,
    format_timestamp,
    match_execution_id,
)
from orchestrator.store.ulid import new_ulid

BUSY_TIMEOUT_S = 10.0
_ROW = (
    "execution_id, plan_name, status, version, owner, lease_expires_at, head_seq, head_hash,"
    " checkpoint_json, created_at, updated_at"
)
_INSERT_EVENT = (
    "INSERT INTO kairo_execution_events (execution_id, seq, event_id, event_type,"
    " schema_version, payload_json, event_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_EVENT = "seq, event_id, event_type, schema_version, payload_json, event_hash, created_at"
_VERIFIED = "seq, event_type, schema_version, payload_json, event_hash, created_at"  # verify_rows


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _new_event_id() -> str:
    return new_ulid()


def _is_json(text: Any) -> bool:
    try:
        json.loads(text)
    except (TypeError, ValueError):
        return False
    return True


#: Stores open in this process. A SQLite connection must not be carried across a fork:
#: the child's copy of SQLite's lock bookkeeping would think it holds the parent's locks,
#: and the parent, closing, could reset the write-ahead log under the child. The supervisor
#: is forked before any store is opened (supervisor_process.py), which checks this. Held
#: weakly: a store nobody holds any more is closed when it is collected.
_open: weakref.WeakSet[SqliteStore] = weakref.WeakSet()


def open_stores() -> int:
    return len(_open)


class SqliteStore:
    """`DurableExecutionStore` on a SQLite file; opening it creates or upgrades the schema."""

    def __init__(self, path: Path, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        try:
            # timeout= is SQLite's busy_timeout; isolation_level=None leaves every BEGIN
            # and COMMIT to _transaction; any worker thread may call, under self._lock.
            self._conn = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as error:
            raise EnvironmentProblem(f"cannot open the store at {path}: {error}") from error
        try:
            (mode,) = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode != "wal":
                raise EnvironmentProblem(  # noqa: TRY301 - closes the connection below
                    f"the store at {path} cannot use SQLite's WAL mode (journal mode {mode});"
                    " is it on a network file system?"
                )
            self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            migrations.migrate(
                self._conn, migrations.SQLITE, location=str(path), now=self._timestamp
            )
        except sqlite3.Error as error:
            self._conn.close()
            raise EnvironmentProblem(f"cannot use the store at {path}: {error}") from error
        except BaseException:
            self._conn.close()
            raise
        _open.add(self)

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def _timestamp(self) -> str:
        return format_timestamp(self._clock())

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Cursor]:
        """One transaction under the store's lock; SQLite failures become EnvironmentProblem.

        A read is a transaction too, so that all its queries see one snapshot: verify must
        not see the head of one append and the events of another.
        """
        with self._lock:
            try:
                cursor = self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield cursor
                    cursor.close()
                    self._conn.commit()
                finally:
                    # A SELECT left unfinished (verify stops at the first bad row) would
                    # pin this snapshot past the end of the transaction: later reads
                    # would see the past.
                    cursor.close()
                    if self._conn.in_transaction:  # the body or the commit failed
                        self._conn.rollback()
            except sqlite3.IntegrityError:
                raise  # a bug or a tampered log, never the environment
            except sqlite3.Error as error:
                raise EnvironmentProblem(f"the store at {self.path} failed: {error}") from error

    @staticmethod
    def _head(cursor: sqlite3.Cursor, execution_id: str) -> tuple[int, int, str]:
        found = cursor.execute(
            "SELECT version, head_seq, head_hash FROM kairo_executions WHERE execution_id = ?",
            (execution_id,),
        ).fetchone()
        if found is None:
            raise UnknownExecution(execution_id)
        version, head_seq, head_hash = found
        return version, head_seq, head_hash

    @staticmethod
    def _extend(
        cursor: sqlite3.Cursor,
        execution_id: str,
        head: tuple[int, str],
        prepared: list[chain.PreparedEvent],
        now: str,
    ) -> list[StoredEvent]:
        """Seal and insert `prepared` after `head`; the caller moves the head."""
        sealed = chain.seal(execution_id, *head, prepared, created_at=now, new_id=_new_event_id)
        # Rows past the head mean someone wrote events without moving it: refuse to build
        # on a log that would fail verification (one indexed probe per append).
        if cursor.execute(
            "SELECT 1 FROM kairo_execution_events WHERE execution_id = ? AND seq > ? LIMIT 1",
            (execution_id, head[0]),
        ).fetchone():
            raise LogVerificationError(
                f"the event log of {execution_id} fails verification at seq {head[0] + 1}:"
                f" it has events past its head at seq {head[0]}",
                execution_id=execution_id,
                bad_seq=head[0] + 1,
            )
        cursor.executemany(
            _INSERT_EVENT,
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
        return sealed

    def create_execution(
        self, execution_id: str, plan_name: str, status: str, events: Sequence[NewEvent]
    ) -> list[StoredEvent]:
        prepared = [chain.prepare(event) for event in events]
        with self._transaction(write=True) as cursor:
            now = self._timestamp()
            try:
                cursor.execute(
                    f"INSERT INTO kairo_executions ({_ROW})"
                    " VALUES (?, ?, ?, 0, NULL, NULL, ?, ?, NULL, ?, ?)",
                    (execution_id, plan_name, status, EMPTY_HEAD_SEQ, EMPTY_HEAD_HASH, now, now),
                )
            except sqlite3.IntegrityError:
                raise UsageError(
                    f"an execution {execution_id} already exists", execution_id=execution_id
                ) from None
            head = (EMPTY_HEAD_SEQ, EMPTY_HEAD_HASH)
            sealed = self._extend(cursor, execution_id, head, prepared, now)
            if sealed:
                cursor.execute(
                    "UPDATE kairo_executions SET head_seq = ?, head_hash = ?"
                    " WHERE execution_id = ?",
                    (sealed[-1].seq, sealed[-1].event_hash, execution_id),
                )
        return sealed

    def append(
        self,
        execution_id: str,
        events: Sequence[NewEvent],
        *,
        expected_version: int | None = None,
        status: str | None = None,
        owner: str | None = None,
    ) -> list[StoredEvent]:
        prepared = [chain.prepare(event) for event in events]  # the slow part, before locking
        with self._transaction(write=True) as cursor:
            version, head_seq, head_hash = self._head(cursor, execution_id)
            if expected_version is not None and expected_version != version:
                raise ConcurrentUpdate(execution_id, expected=expected_version, found=version)
            now = self._timestamp()
            sealed = self._extend(cursor, execution_id, (head_seq, head_hash), prepared, now)
            if sealed:
                head_seq, head_hash = sealed[-1].seq, sealed[-1].event_hash
            # BEGIN IMMEDIATE already excludes other writers; the WHERE restates the lock.
            cursor.execute(
                "UPDATE kairo_executions SET head_seq = ?, head_hash = ?, version = version + 1,"
                " updated_at = ?, status = COALESCE(?, status), owner = COALESCE(?, owner)"
                " WHERE execution_id = ? AND version = ?",
                (head_seq, head_hash, now, status, owner, execution_id, version),
            )
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
            version, _, _ = self._head(cursor, execution_id)
            if expected_version is not None and expected_version != version:
                raise ConcurrentUpdate(execution_id, expected=expected_version, found=version)
            columns["updated_at"] = self._timestamp()
            cursor.execute(
                f"UPDATE kairo_executions SET version = version + 1{assignments}, updated_at = ?"
                " WHERE execution_id = ? AND version = ?",
                (*columns.values(), execution_id, version),
            )
            return self._row(cursor, execution_id)

    def save_checkpoint(self, execution_id: str, checkpoint_json: str) -> None:
        json.loads(checkpoint_json)  # refuse a snapshot recovery could not read
        with self._transaction(write=True) as cursor:
            cursor.execute(
                "UPDATE kairo_executions SET checkpoint_json = ?, updated_at = ?"
                " WHERE execution_id = ?",
                (checkpoint_json, self._timestamp(), execution_id),
            )
            if cursor.rowcount != 1:
                raise UnknownExecution(execution_id)

    @staticmethod
    def _row(cursor: sqlite3.Cursor, execution_id: str) -> ExecutionRow:
        found = cursor.execute(
            f"SELECT {_ROW} FROM kairo_executions WHERE execution_id = ?", (execution_id,)
        ).fetchone()
        if found is None:
            raise UnknownExecution(execution_id)
        return ExecutionRow(*found)

    def get_execution(self, execution_id: str) -> ExecutionRow | None:
        try:
            with self._transaction(write=False) as cursor:
                return self._row(cursor, execution_id)
        except UnknownExecution:
            return None

    def list_executions(self) -> list[ExecutionRow]:
        with self._transaction(write=False) as cursor:
            rows = cursor.execute(
                f"SELECT {_ROW} FROM kairo_executions ORDER BY created_at DESC, execution_id DESC"
            ).fetchall()
        return [ExecutionRow(*row) for row in rows]

    def resolve_id(self, prefix_or_short: str) -> str:
        with self._transaction(write=False) as cursor:
            ids = [row[0] for row in cursor.execute("SELECT execution_id FROM kairo_executions")]
        return match_execution_id(ids, prefix_or_short)

    def read_events(self, execution_id: str, after_seq: int = -1) -> list[StoredEvent]:
        with self._transaction(write=False) as cursor:
            self._head(cursor, execution_id)
            rows = cursor.execute(
                f"SELECT {_EVENT} FROM kairo_execution_events"
                " WHERE execution_id = ? AND seq > ? ORDER BY seq",
                (execution_id, after_seq),
            ).fetchall()
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

    def verify(self, execution_id: str) -> tuple[int, str]:
        with self._transaction(write=False) as cursor:
            _, head_seq, head_hash = self._head(cursor, execution_id)
            # Only what the hashes cover, streamed in seq order (one query, never fetchall).
            rows = cursor.execute(
                f"SELECT {_VERIFIED} FROM kairo_execution_events"
                " WHERE execution_id = ? ORDER BY seq",
                (execution_id,),
            )
            return chain.verify_rows(execution_id, rows, head_seq, head_hash)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            _open.discard(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
