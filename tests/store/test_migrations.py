"""The migration runner: from empty, idempotent, step by step, all or nothing, never backwards."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrator.errors import StoreSchemaError
from orchestrator.store import migrations
from orchestrator.store.migrations import MIGRATIONS, SQLITE, Migration, migrate, newest_version
from orchestrator.store.sql_store import SqlStore
from orchestrator.store.sqlite import SqliteStore
from tests import postgres
from tests.store.tamper import raw


def now() -> str:
    return "2026-12-02T17:14:51.123456Z"


@pytest.fixture
def connection() -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    yield connection
    connection.close()


def versions(connection: sqlite3.Connection) -> list[int]:
    return [v for (v,) in connection.execute("SELECT version FROM kairo_schema_version")]


def tables(connection: sqlite3.Connection) -> set[str]:
    rows = connection.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")
    return {name for (name,) in rows}


ONE = Migration(1, "a", {"sqlite": ("CREATE TABLE a (x INTEGER)",)})
TWO = Migration(2, "b", {"sqlite": ("CREATE TABLE b (x INTEGER)", "INSERT INTO b VALUES (1)")})
BROKEN = Migration(
    3, "c", {"sqlite": ("CREATE TABLE c (x INTEGER)", "INSERT INTO nowhere VALUES (1)")}
)


def test_a_new_store_gets_every_migration(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "k.db").close()
    with raw(tmp_path / "k.db") as connection:
        assert versions(connection) == [m.version for m in MIGRATIONS]
        assert {
            "kairo_executions",
            "kairo_execution_events",
            "kairo_schema_version",
            "kairo_execution_events_no_update",
            "kairo_execution_events_no_delete",
        } <= tables(connection)


def test_reopening_applies_nothing(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "k.db").close()
    with raw(tmp_path / "k.db") as connection:
        before = connection.execute("SELECT * FROM kairo_schema_version").fetchall()
    SqliteStore(tmp_path / "k.db").close()
    with raw(tmp_path / "k.db") as connection:
        assert connection.execute("SELECT * FROM kairo_schema_version").fetchall() == before


def test_migrations_are_applied_in_steps(connection: sqlite3.Connection) -> None:
    assert migrate(connection, SQLITE, location="mem", now=now, migrations=[ONE]) == 1
    assert migrate(connection, SQLITE, location="mem", now=now, migrations=[ONE, TWO]) == 2
    assert versions(connection) == [1, 2]
    assert connection.execute("SELECT x FROM b").fetchall() == [(1,)]
    assert not connection.in_transaction


def test_a_failing_migration_leaves_nothing_behind(connection: sqlite3.Connection) -> None:
    with pytest.raises(sqlite3.OperationalError, match="nowhere"):
        migrate(connection, SQLITE, location="mem", now=now, migrations=[ONE, TWO, BROKEN])
    assert versions(connection) == [1, 2]  # the steps before it stay
    assert "c" not in tables(connection)
    assert not connection.in_transaction


def test_a_newer_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    SqliteStore(path).close()
    newer = newest_version() + 1
    with raw(path) as connection:
        connection.execute(
            "INSERT INTO kairo_schema_version VALUES (?, 'from the future', ?)", (newer, now())
        )
    with pytest.raises(StoreSchemaError) as caught:
        SqliteStore(path)
    assert caught.value.message == (
        f"the store at {path} has schema version {newer}, newer than this kairo-orch "
        f"({newest_version()}); upgrade kairo-orch"
    )
    assert caught.value.exit_code == 5


def test_migrations_must_be_numbered_in_order(connection: sqlite3.Connection) -> None:
    with pytest.raises(ValueError, match="out of order"):
        migrate(connection, SQLITE, location="mem", now=now, migrations=[TWO, ONE])
    assert newest_version([]) == 0


def test_an_execution_made_before_the_repository_column_belongs_to_none(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with raw(path) as connection:  # a store of schema version 1, with one execution
        migrate(connection, SQLITE, location="old", now=now, migrations=MIGRATIONS[:1])
        connection.execute(
            "INSERT INTO kairo_executions VALUES"
            " ('01OLD', 'p', 'COMPLETED', 3, NULL, NULL, -1, 'GENESIS', NULL, ?, ?)",
            (now(), now()),
        )
    with SqliteStore(path) as store:
        rows = store.list_executions(repository="box:/a/.git")
    assert [(r.execution_id, r.repository, r.version) for r in rows] == [("01OLD", None, 3)]


def test_every_migration_has_statements_for_both_backends() -> None:
    for dialect in (SQLITE, migrations.POSTGRESQL):
        assert all(m.statements[dialect.name] for m in migrations.MIGRATIONS)


def test_a_newer_postgresql_store_is_refused() -> None:
    with postgres.fresh_schema() as url:
        import psycopg

        from orchestrator.store.postgres import PostgresStore

        PostgresStore(url).close()
        newer = newest_version() + 1
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(
                "INSERT INTO kairo_schema_version VALUES (%s, 'from the future', %s)",
                (newer, now()),
            )
        with pytest.raises(StoreSchemaError, match=f"has schema version {newer}, newer"):
            PostgresStore(url)


def opened_at_once(open_one: Callable[[], SqlStore], times: int = 4) -> None:
    """Open `times` stores at the same moment, as that many processes would."""
    errors: list[BaseException] = []
    start = threading.Barrier(times)

    def open_it() -> None:
        try:
            start.wait()
            open_one().close()
        except BaseException as error:  # reported below, on the test's thread
            errors.append(error)
            raise

    threads = [threading.Thread(target=open_it) for _ in range(times)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_two_processes_creating_one_store_apply_each_migration_once(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    opened_at_once(lambda: SqliteStore(path))
    with raw(path) as connection:
        assert versions(connection) == [m.version for m in MIGRATIONS]


def test_two_processes_creating_one_postgresql_store_apply_each_migration_once() -> None:
    with postgres.fresh_schema() as url:
        import psycopg

        from orchestrator.store.postgres import PostgresStore

        opened_at_once(lambda: PostgresStore(url))
        with psycopg.connect(url) as connection:
            applied = connection.execute("SELECT version FROM kairo_schema_version").fetchall()
        assert [v for (v,) in applied] == [m.version for m in MIGRATIONS]
