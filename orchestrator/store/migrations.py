"""The store's schema as an ordered list of versioned migrations, and the runner that applies them.

The runner needs only a DB-API 2.0 connection and a `Dialect`, so the PostgreSQL backend
can reuse it: each `Migration` carries its SQL per dialect (the SQLite triggers that keep
the log append-only have no portable spelling). Every migration runs in its own
transaction together with the row that records it, under the database's writer lock, so
two processes opening a new store at once apply each migration exactly once.

The table `kairo_schema_version(version, description, applied_at)` holds one row per
applied migration. A database newer than the newest migration known here is refused:
this program would not know what its columns mean.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from orchestrator.errors import StoreSchemaError


class Cursor(Protocol):
    def execute(self, operation: str, parameters: Sequence[Any] = ..., /) -> Any: ...

    def fetchone(self) -> Any: ...


class Connection(Protocol):
    """The part of a DB-API 2.0 connection the runner uses."""

    def cursor(self) -> Cursor: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


@dataclass(frozen=True)
class Dialect:
    name: str  # the key of `Migration.statements`
    begin: tuple[str, ...]  # starts a transaction holding the writer lock until commit
    placeholder: str  # the driver's paramstyle marker


SQLITE = Dialect(name="sqlite", begin=("BEGIN IMMEDIATE",), placeholder="?")
#: PostgreSQL has no database-wide writer lock to begin with: a transaction-scoped advisory
#: lock (any fixed number, the same in every kairo-orch) keeps two migrators apart, even
#: before kairo_schema_version exists.
POSTGRESQL = Dialect(
    name="postgresql",
    begin=("BEGIN", "SELECT pg_advisory_xact_lock(7012202612)"),
    placeholder="%s",
)


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: Mapping[str, tuple[str, ...]]  # dialect name -> statements, run in order


_APPEND_ONLY = "SELECT RAISE(ABORT, 'kairo_execution_events is append-only')"
_PG_APPEND_ONLY = """CREATE FUNCTION kairo_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'kairo_execution_events is append-only' USING ERRCODE = 'restrict_violation';
END $$"""


def _tables(big_integer: str) -> tuple[str, ...]:
    """Both tables and their indexes, the same on both backends but for the integers that
    may pass 2**31 (SQLite's INTEGER is 64 bits; PostgreSQL's is 32). Text is kept as the
    very strings sealed: `created_at` and `payload_json` are not timestamptz and jsonb,
    which would respell what was hashed."""
    return (
        f"""CREATE TABLE kairo_executions (
            execution_id     TEXT PRIMARY KEY,
            plan_name        TEXT NOT NULL,
            status           TEXT NOT NULL,
            version          {big_integer} NOT NULL,
            owner            TEXT,
            lease_expires_at TEXT,
            head_seq         {big_integer} NOT NULL,
            head_hash        TEXT NOT NULL,
            checkpoint_json  TEXT,
            created_at       TEXT NOT NULL,
            updated_at       TEXT NOT NULL
        )""",
        # list_executions: newest first.
        "CREATE INDEX kairo_executions_by_created ON kairo_executions (created_at, execution_id)",
        f"""CREATE TABLE kairo_execution_events (
            execution_id   TEXT NOT NULL REFERENCES kairo_executions (execution_id),
            seq            {big_integer} NOT NULL CHECK (seq >= 0),
            event_id       TEXT NOT NULL UNIQUE,
            event_type     TEXT NOT NULL,
            schema_version INTEGER NOT NULL,
            payload_json   TEXT NOT NULL,
            event_hash     TEXT NOT NULL,
            created_at     TEXT NOT NULL,
            UNIQUE (execution_id, seq)
        )""",
        # The UNIQUE constraint's index already serves `execution_id = ? AND seq > ?
        # ORDER BY seq`; this one serves looking events up by type (recovery).
        "CREATE INDEX kairo_execution_events_by_type"
        " ON kairo_execution_events (execution_id, event_type)",
    )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "executions and their hash-chained, append-only event log",
        {
            "sqlite": (
                *_tables("INTEGER"),
                "CREATE TRIGGER kairo_execution_events_no_update"
                f" BEFORE UPDATE ON kairo_execution_events BEGIN {_APPEND_ONLY}; END",
                "CREATE TRIGGER kairo_execution_events_no_delete"
                f" BEFORE DELETE ON kairo_execution_events BEGIN {_APPEND_ONLY}; END",
            ),
            "postgresql": (
                *_tables("BIGINT"),
                _PG_APPEND_ONLY,
                "CREATE TRIGGER kairo_execution_events_no_change"
                " BEFORE UPDATE OR DELETE ON kairo_execution_events"
                " FOR EACH ROW EXECUTE FUNCTION kairo_append_only()",
                "CREATE TRIGGER kairo_execution_events_no_truncate"
                " BEFORE TRUNCATE ON kairo_execution_events"
                " FOR EACH STATEMENT EXECUTE FUNCTION kairo_append_only()",
            ),
        },
    ),
    Migration(
        2,
        "the repository each execution belongs to, for several sharing one store",
        {
            dialect: (
                # NULL for an execution made before: shown in every repository, as before.
                "ALTER TABLE kairo_executions ADD COLUMN repository TEXT",
                "CREATE INDEX kairo_executions_by_repository"
                " ON kairo_executions (repository, created_at)",
            )
            for dialect in ("sqlite", "postgresql")
        },
    ),
    Migration(
        3,
        "workers on several hosts: their registrations and heartbeat leases",
        {
            # The times are the database's own (timestamptz, written with now()): hosts'
            # clocks may disagree, and whether a lease has lapsed is asked of one clock.
            # Workers need PostgreSQL (one machine needs none): SQLite's table stays
            # empty, made only so that both keep one schema.
            dialect: (
                """CREATE TABLE kairo_workers (
                    worker_id        TEXT PRIMARY KEY,
                    host             TEXT NOT NULL,
                    address          TEXT NOT NULL,
                    pid              INTEGER NOT NULL,
                    slots            INTEGER NOT NULL CHECK (slots > 0),
                    lease_seconds    DOUBLE PRECISION NOT NULL CHECK (lease_seconds > 0),
                    started_at       TIMESTAMPTZ NOT NULL,
                    heartbeat_at     TIMESTAMPTZ NOT NULL,
                    lease_expires_at TIMESTAMPTZ NOT NULL,
                    lapses           INTEGER NOT NULL DEFAULT 0
                )""",
                "CREATE INDEX kairo_workers_by_host ON kairo_workers (host, started_at)",
            )
            for dialect in ("sqlite", "postgresql")
        },
    ),
    Migration(
        4,
        "commands of subtasks placed on workers, and the git remote each worker serves",
        {
            # The owner queues a command for the worker a subtask is assigned to (at the
            # assignment's epoch); the worker takes it, carries it out, and leaves its
            # events in `results` (store/commands.py). SQLite's stays empty.
            dialect: (
                f"""CREATE TABLE kairo_commands (
                    command_id   {key},
                    execution_id TEXT NOT NULL,
                    subtask_id   TEXT NOT NULL,
                    worker_id    TEXT NOT NULL,
                    epoch        INTEGER NOT NULL,
                    command      TEXT NOT NULL,
                    state        TEXT NOT NULL DEFAULT 'queued'
                                 CHECK (state IN ('queued', 'taken', 'done', 'failed')),
                    results      TEXT,
                    error        TEXT,
                    queued_at    {time} NOT NULL,
                    done_at      {time}
                )""",
                "CREATE INDEX kairo_commands_by_worker ON kairo_commands (worker_id, state)",
                "CREATE INDEX kairo_commands_by_execution ON kairo_commands (execution_id, state)",
                "ALTER TABLE kairo_workers ADD COLUMN remote TEXT",
            )
            for dialect, key, time in (
                ("sqlite", "INTEGER PRIMARY KEY AUTOINCREMENT", "TEXT"),
                ("postgresql", "BIGSERIAL PRIMARY KEY", "TIMESTAMPTZ"),
            )
        },
    ),
    Migration(
        5,
        "stops of placed executions asked from another host",
        {
            # `kairo-orch stop` on another host than the owner's leaves a request
            # addressed to that owner, which takes it up (store/stop_requests.py).
            # SQLite's stays empty.
            dialect: (
                f"""CREATE TABLE kairo_stop_requests (
                    request_id   {key},
                    execution_id TEXT NOT NULL,
                    owner        TEXT NOT NULL,
                    mode         TEXT NOT NULL CHECK (mode IN ('graceful', 'now')),
                    host         TEXT NOT NULL,
                    requested_at {time} NOT NULL,
                    taken_at     {time}
                )""",
                "CREATE INDEX kairo_stop_requests_by_owner"
                " ON kairo_stop_requests (execution_id, owner, taken_at)",
            )
            for dialect, key, time in (
                ("sqlite", "INTEGER PRIMARY KEY AUTOINCREMENT", "TEXT"),
                ("postgresql", "BIGSERIAL PRIMARY KEY", "TIMESTAMPTZ"),
            )
        },
    ),
)

_VERSION_TABLE = """CREATE TABLE IF NOT EXISTS kairo_schema_version (
    version     INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at  TEXT NOT NULL
)"""


def newest_version(migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """The schema version `migrations` lead to; they must be numbered 1, 2, 3, ..."""
    for index, migration in enumerate(migrations, start=1):
        if migration.version != index:
            raise ValueError(f"migration {migration.version} is out of order (expected {index})")
    return len(migrations)


@contextmanager
def _transaction(connection: Connection, dialect: Dialect) -> Iterator[Cursor]:
    cursor = connection.cursor()
    for statement in dialect.begin:
        cursor.execute(statement)
    try:
        yield cursor
    except BaseException:
        connection.rollback()
        raise
    connection.commit()


def migrate(
    connection: Connection,
    dialect: Dialect,
    *,
    location: str,
    now: Callable[[], str],
    migrations: Sequence[Migration] = MIGRATIONS,
) -> int:
    """Apply the migrations the database lacks, one transaction each; the version reached.

    `location` names the store in errors; `now` gives `applied_at`. Raises
    StoreSchemaError when the database is newer than `migrations`.
    """
    newest = newest_version(migrations)
    mark = dialect.placeholder
    while True:
        with _transaction(connection, dialect) as cursor:
            cursor.execute(_VERSION_TABLE)
            cursor.execute("SELECT MAX(version) FROM kairo_schema_version")
            current = cursor.fetchone()[0] or 0
            if current > newest:
                raise StoreSchemaError(
                    f"the store at {location} has schema version {current}, newer than "
                    f"this kairo-orch ({newest}); upgrade kairo-orch"
                )
            if current == newest:
                return current
            step = migrations[current]  # version current + 1
            for statement in step.statements[dialect.name]:
                cursor.execute(statement)
            cursor.execute(
                "INSERT INTO kairo_schema_version (version, description, applied_at)"
                f" VALUES ({mark}, {mark}, {mark})",
                (step.version, step.description, now()),
            )
