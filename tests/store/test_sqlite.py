"""What only the SQLite store does: its file, in WAL mode."""

from __future__ import annotations

from pathlib import Path

from orchestrator.store.sql_store import SqlStore
from orchestrator.store.sqlite import SqliteStore
from tests.store.tamper import raw


def test_the_file_is_in_wal_mode(db_path: Path) -> None:
    store: SqlStore = SqliteStore(db_path)
    with store, raw(db_path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
