from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.store.sql_store import SqlStore
from tests import postgres
from tests.store.backends import Backend, PostgresBackend, SqliteBackend


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


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, db_path: Path) -> Iterator[Backend]:
    """Each store, on a database of its own, opened as often as a test likes."""
    if request.param == "sqlite":
        opened: Backend = SqliteBackend(db_path, Clock)
        yield opened
        opened.close()
        return
    with postgres.fresh_schema() as url:
        opened = PostgresBackend(url, Clock)
        yield opened
        opened.close()


@pytest.fixture
def store(backend: Backend) -> SqlStore:
    return backend.open()
