"""The two stores as the store tests see them: open one, and reach behind its back.

A `Backend` opens stores on one database (as several processes would) and gives raw
connections to it: `raw` with the append-only triggers in place, `tampering` with them
off for one transaction, as an attacker (or a bug) with the database's password would.
Raw SQL is written as for sqlite3 (`?` and `:name`) and rewritten for psycopg.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from orchestrator.store.sql_store import SqlStore
from orchestrator.store.sqlite import SqliteStore
from tests.store.tamper import raw as raw_sqlite
from tests.store.tamper import tampering as tampering_sqlite


class Raw(Protocol):
    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ..., /) -> Any: ...


class Backend(abc.ABC):
    name: str
    integrity_error: type[Exception]

    def __init__(self, clock: Callable[[], Callable[[], datetime]]) -> None:
        self._clock = clock
        self._opened: list[SqlStore] = []

    def open(self) -> SqlStore:
        self._opened.append(self._open())
        return self._opened[-1]

    @abc.abstractmethod
    def _open(self) -> SqlStore: ...

    @abc.abstractmethod
    def raw(self) -> AbstractContextManager[Raw]: ...

    @abc.abstractmethod
    def tampering(self) -> AbstractContextManager[Raw]: ...

    def close(self) -> None:
        for store in self._opened:
            store.close()


class SqliteBackend(Backend):
    name = "sqlite"

    def __init__(self, path: Path, clock: Callable[[], Callable[[], datetime]]) -> None:
        import sqlite3

        super().__init__(clock)
        self.path = path
        self.integrity_error = sqlite3.IntegrityError

    def _open(self) -> SqlStore:
        return SqliteStore(self.path, clock=self._clock())

    def raw(self) -> AbstractContextManager[Raw]:
        return raw_sqlite(self.path)

    def tampering(self) -> AbstractContextManager[Raw]:
        return tampering_sqlite(self.path)


_NAMED = re.compile(r"(?<![:\w]):([a-z_]+)")


class _Psycopg:
    """A psycopg connection that takes sqlite3's placeholders."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = (), /) -> Any:
        sql = _NAMED.sub(r"%(\1)s", sql.replace("?", "%s"))
        return self._connection.execute(sql, parameters or None)


class PostgresBackend(Backend):
    name = "postgresql"

    def __init__(self, url: str, clock: Callable[[], Callable[[], datetime]]) -> None:
        from psycopg import errors

        from orchestrator.store.postgres import PostgresStore

        super().__init__(clock)
        self.url = url
        self.integrity_error = errors.IntegrityError
        self._store = PostgresStore

    def _open(self) -> SqlStore:
        return self._store(self.url, clock=self._clock())

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            yield connection

    @contextmanager
    def raw(self) -> Iterator[Raw]:
        with self._connection() as connection:
            yield _Psycopg(connection)

    @contextmanager
    def tampering(self) -> Iterator[Raw]:
        # A replica session fires no ordinary trigger: the append-only ones stay in
        # place for every other connection, as the SQLite tampering leaves them.
        with self._connection() as connection, connection.transaction():
            connection.execute("SET LOCAL session_replication_role = replica")
            yield _Psycopg(connection)
