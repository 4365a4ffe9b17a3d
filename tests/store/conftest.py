from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.store.sqlite import SqliteStore


class Clock:
    """A clock that moves one second every time it is read: timestamps sort as calls do."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 2, 17, 14, 51, 123456, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "kairo.db"


@pytest.fixture
def open_sqlite(db_path: Path) -> Iterator[Callable[[], SqliteStore]]:
    """Opens stores on one file (as several processes would) and closes them afterwards."""
    opened: list[SqliteStore] = []

    def open_one() -> SqliteStore:
        opened.append(SqliteStore(db_path, clock=Clock()))
        return opened[-1]

    yield open_one
    for store in opened:
        store.close()


@pytest.fixture
def store(open_sqlite: Callable[[], SqliteStore]) -> SqliteStore:
    return open_sqlite()
