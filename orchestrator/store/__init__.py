"""The execution store: where every event of every execution is kept (store.md).

`open_store` turns `--store URL` / `KAIRO_STORE` (or nothing) into a `DurableExecutionStore`.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from orchestrator import kairo_dir
from orchestrator.errors import EnvironmentProblem, UsageError
from orchestrator.store.base import (
    ConcurrentUpdate,
    DurableExecutionStore,
    ExecutionRow,
    NewEvent,
    StoredEvent,
    UnknownExecution,
)
from orchestrator.store.sqlite import SqliteStore

__all__ = [
    "ConcurrentUpdate",
    "DurableExecutionStore",
    "ExecutionRow",
    "NewEvent",
    "SqliteStore",
    "StoredEvent",
    "UnknownExecution",
    "open_store",
]


def _sqlite_path(url: str) -> Path:
    parts = urlsplit(url)
    path = Path(unquote(parts.path))
    if parts.netloc or parts.query or parts.fragment or not path.is_absolute():
        raise UsageError(f"the store URL {url} should be sqlite:///an/absolute/path.db")
    return path


def _postgres_store(url: str) -> DurableExecutionStore:
    try:
        from orchestrator.store.postgres import PostgresStore  # imports psycopg
    except ImportError as error:
        raise EnvironmentProblem(
            f"the PostgreSQL store needs psycopg ({error.msg}): pip install 'kairo-orch[postgres]'"
        ) from error
    return PostgresStore(url)


def open_store(url: str | None, *, git_common_dir: Path) -> DurableExecutionStore:
    """The store `url` names, opened, its schema created or upgraded.

    None: SQLite at <git common dir>/kairo/kairo.db (its directory is created);
    `sqlite:///abs/path.db`: that file (its directory must exist);
    `postgresql://user@host:port/db` (or `postgres://`, libpq's URI): that database.
    Raises UsageError for any other URL and EnvironmentProblem when the store cannot be
    opened.
    """
    if url is None:
        path = kairo_dir.default_store(git_common_dir)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise EnvironmentProblem(
                f"cannot create the store's directory {path.parent}: {error.strerror}"
            ) from error
        return SqliteStore(path)
    scheme = url.partition(":")[0].lower()
    if scheme == "sqlite":
        path = _sqlite_path(url)
        if not path.parent.is_dir():
            raise EnvironmentProblem(
                f"cannot open the store at {path}: the directory {path.parent} does not exist"
            )
        if path.is_dir():
            raise EnvironmentProblem(f"cannot open the store at {path}: it is a directory")
        return SqliteStore(path)
    if scheme in ("postgresql", "postgres"):
        return _postgres_store(url)
    raise UsageError(
        f"unknown store URL {url}: use sqlite:///an/absolute/path.db or postgresql://..."
    )
