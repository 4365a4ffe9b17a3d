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

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from orchestrator.errors import EnvironmentProblem, StoreLost
from orchestrator.store import migrations
from orchestrator.store.base import track_closed, track_open
from orchestrator.store.sql_store import Cursor, SqlStore, utc_now

BUSY_TIMEOUT_S = 10.0


class SqliteStore(SqlStore):
    """`DurableExecutionStore` on a SQLite file; opening it creates or upgrades the schema."""

    integrity_errors = (sqlite3.IntegrityError,)

    def __init__(self, path: Path, *, clock: Callable[[], datetime] = utc_now) -> None:
        super().__init__(str(path), clock=clock)
        self.path = path
        try:
            # timeout= is SQLite's busy_timeout; isolation_level=None leaves every BEGIN
            # and COMMIT to _transaction; any worker thread may call, under self._lock.
            self._conn = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as error:
            raise EnvironmentProblem(f"cannot open the store at {path}: {error}") from error
        try:
            mode = _switch_to_wal(self._conn)
            if mode != "wal":
                raise EnvironmentProblem(  # noqa: TRY301 - closes the connection below
                    f"the store at {path} cannot use SQLite's WAL mode (journal mode {mode});"
                    " is it on a network file system?"
                )
            self._file = _identity(path)
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
        track_open(self)

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Cursor]:
        """BEGIN IMMEDIATE for a write: it takes the database's writer lock before the head
        is read, so two appends can never both extend the same head."""
        with self._lock:
            self._refuse_a_lost_file()
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

    def _refuse_a_lost_file(self) -> None:
        """A file deleted (or replaced) under an open connection takes every write without
        a complaint, into a log nobody will ever read again, and shows every reader a past
        that no longer is; a stat, about a microsecond, finds out first."""
        try:
            now = self.path.stat()
        except FileNotFoundError:
            now = None
        except OSError as error:
            raise EnvironmentProblem(f"cannot use the store at {self.path}: {error}") from error
        if now is None or (now.st_dev, now.st_ino) != self._file:
            raise StoreLost(
                f"the store at {self.path} was "
                f"{'deleted' if now is None else 'replaced by another file'} while in use"
            )

    @contextmanager
    def _stream(
        self, cursor: Cursor, operation: str, parameters: Sequence[Any]
    ) -> Iterator[Iterable[Any]]:
        yield cursor.execute(operation, parameters)  # a sqlite3 cursor reads lazily

    def _collides_on_seq(self, error: Exception) -> bool:
        return "kairo_execution_events.seq" in str(error)  # "UNIQUE constraint failed: ..."

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            track_closed(self)


def _identity(path: Path) -> tuple[int, int]:
    found = path.stat()
    return found.st_dev, found.st_ino


def _switch_to_wal(conn: sqlite3.Connection) -> str:
    """`PRAGMA journal_mode = WAL`, tried again while SQLite says the file is busy, up to
    the busy timeout; the journal mode it is in then.

    SQLite does not wait out its busy timeout here in every case: the switch reads the
    file under a shared lock and then needs an exclusive one, and while another
    connection holds the writer lock that upgrade fails at once (waiting could deadlock).
    Two commands creating one store at the same moment meet exactly that (one migrating
    the new file while the other switches it): once in 40 runs of the test with both cores
    busy, and in none of 80 since it tries again.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return str(mode)
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.005)
