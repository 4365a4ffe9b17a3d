"""The PostgreSQL execution store: one log shared by supervisors on several machines.

The same tables, chain and checks as the SQLite store (sql_store.py); what differs is how
writers are kept apart. PostgreSQL has no database-wide writer lock, so an append or a
status change reads the execution's row `FOR UPDATE`: a second writer of the same
execution waits for the first to commit, then reads the head it left (READ COMMITTED), and
writers of other executions never wait. Reads run REPEATABLE READ, one snapshot, so
`verify` never sees the head of one append and the events of another; it streams a long
log through a server-side cursor instead of fetching it whole.

A commit is durable when it returns: `synchronous_commit` is set on for the session,
whatever the server's default. A connection the server dropped (a restart, a network
cut) is opened again at the next transaction; the transaction it broke fails with
EnvironmentProblem, as any store failure does, and changed nothing unless it committed.

psycopg is imported here only: a SQLite user never pays for it.
"""

from __future__ import annotations

import re
import select
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus

from orchestrator.errors import EnvironmentProblem, StoreLost, UsageError
from orchestrator.store import commands, migrations, stop_requests, workers
from orchestrator.store.base import track_closed, track_open
from orchestrator.store.commands import Outcome, Queued
from orchestrator.store.sql_store import Cursor, SqlStore, utc_now
from orchestrator.store.stop_requests import StopRequest
from orchestrator.store.workers import Registration, WorkerRow

CONNECT_TIMEOUT_S = 10
#: Seconds a session may stay idle inside a transaction before the server ends it.
IDLE_IN_TRANSACTION_S = 30
#: Rows a `verify` fetches from its server-side cursor at a time.
VERIFY_BATCH = 5000


def checked_url(url: str) -> str:
    """`url` as libpq takes it (a scheme in lower case: libpq knows no other spelling), or
    UsageError for one that is not a URL at all."""
    scheme, _, rest = url.partition(":")
    url = f"{scheme.lower()}:{rest}"
    try:
        urlsplit(url)  # not its port: libpq's `host1:5432,host2:5433` is no port of Python's
    except ValueError as error:
        raise UsageError(f"the store URL {redacted(url)} is not a valid URL: {error}") from None
    return url


def redacted(url: str) -> str:
    """`url` without its password (in the user part or the query), to be shown."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url.partition("://")[0] + "://..."  # cannot tell where a password would be
    netloc = parts.netloc
    if password is not None:
        netloc = f"{parts.username or ''}:***@{netloc.rpartition('@')[2]}"
    query = re.sub(r"(^|&)password=[^&]*", r"\1password=***", parts.query)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _hung_up(connection: psycopg.Connection[Any]) -> bool:
    """Whether the server ended this idle session (a restart, a failover, an idle-session
    reaper): an idle session is sent nothing, so a socket with something to read between
    transactions holds its goodbye, or the end of the stream. Caught here, before the
    next transaction, it costs no failed write and no supervisor."""
    poller = select.poll()  # not select(): it refuses a descriptor numbered 1024 or more
    try:
        poller.register(connection.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


class PostgresStore(SqlStore):
    """`DurableExecutionStore` on a PostgreSQL database; opening it creates or upgrades
    the schema (in the URL's database and the connection's search path)."""

    integrity_errors = (pg_errors.IntegrityError,)
    lock_row = " FOR UPDATE"

    def __init__(self, url: str, *, clock: Callable[[], datetime] = utc_now) -> None:
        url = checked_url(url)
        super().__init__(redacted(url), clock=clock)
        self._url = url
        self._listener: psycopg.Connection[Any] | None = None  # wait_for_commands's
        self._conn = self._connect()
        try:
            migrations.migrate(
                self._conn, migrations.POSTGRESQL, location=self.location, now=self._timestamp
            )
        except psycopg.Error as error:
            self._conn.close()
            raise EnvironmentProblem(
                f"cannot use the store at {self.location}: {_first_line(error)}"
            ) from error
        except BaseException:
            self._conn.close()
            raise
        track_open(self)

    def __repr__(self) -> str:
        return f"PostgresStore({self.location!r})"

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conninfo = self._url
            if "application_name" not in conninfo_to_dict(conninfo):
                # What pg_stat_activity shows of it, unless the URL says otherwise.
                conninfo = make_conninfo(conninfo, application_name="kairo-orch")
            connection = psycopg.connect(
                conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
            )
        except psycopg.Error as error:
            raise EnvironmentProblem(
                f"cannot reach the store at {self.location}: {_first_line(error)}"
            ) from error
        try:
            connection.execute("SET synchronous_commit TO on")
            # A process stopped inside a transaction (a host cut off and frozen, a worker
            # SIGSTOPped between taking its commands and committing) would hold its row
            # locks until TCP gave up on it, and every writer of those rows would wait as
            # long: the server ends such a session instead. None of ours idles in a
            # transaction for anything like this long while it lives.
            connection.execute(
                f"SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_S}s'"
            )
        except psycopg.Error as error:
            connection.close()
            raise EnvironmentProblem(
                f"cannot use the store at {self.location}: {_first_line(error)}"
            ) from error
        return connection

    def _sql(self, operation: str) -> str:
        return operation.replace("?", "%s")

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Cursor]:
        with self._lock:
            if self._conn.broken or self._conn.closed or _hung_up(self._conn):
                self._conn.close()
                self._conn = self._connect()
            try:
                # A write is pipelined: what needs no answer (BEGIN; the inserts, the head's
                # update and COMMIT) goes with the next query that does, not in a round trip
                # of its own. (A read streams through a server-side cursor, which cannot be.)
                # So the server's refusal of an insert may come only as the pipeline ends.
                pipelined = self._conn.pipeline() if write else nullcontext()
                with pipelined, self._conn.cursor() as cursor:
                    cursor.execute(
                        "BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
                    )
                    yield cursor
                    cursor.execute("COMMIT")
            except BaseException as error:
                self._leave_failed_transaction()
                if isinstance(error, pg_errors.IntegrityError) or not isinstance(
                    error, psycopg.Error
                ):
                    raise  # a constraint: a bug or a tampered log, never the environment
                if isinstance(error, pg_errors.UndefinedTable):
                    raise StoreLost(
                        f"the store at {self.location} lost its tables while in use"
                        f" ({_first_line(error)})"
                    ) from error
                raise EnvironmentProblem(
                    f"the store at {self.location} failed: {_first_line(error)}"
                ) from error

    def _leave_failed_transaction(self) -> None:
        """Whatever failed, and wherever (inside the pipeline or as it ended), the session
        is left with no transaction open: else every later one would be refused as part of
        the failed one ("current transaction is aborted")."""
        if self._conn.broken or self._conn.closed:
            return  # opened anew by the next transaction
        if self._conn.info.transaction_status != TransactionStatus.IDLE:
            with suppress(psycopg.Error):
                self._conn.rollback()

    @contextmanager
    def _stream(
        self, cursor: Cursor, operation: str, parameters: Sequence[Any]
    ) -> Iterator[Iterable[Any]]:
        # A server-side cursor, declared in the transaction `cursor` runs.
        with self._conn.cursor(name="kairo_verify") as streamed:
            streamed.itersize = VERIFY_BATCH
            streamed.execute(operation, parameters)
            yield streamed

    def _collides_on_seq(self, error: Exception) -> bool:
        # The name PostgreSQL gives migration 1's UNIQUE (execution_id, seq).
        return (
            isinstance(error, pg_errors.UniqueViolation)
            and error.diag.constraint_name == "kairo_execution_events_execution_id_seq_key"
        )

    # --- workers on several hosts (store/workers.py) ------------------------------------

    def register_worker(self, worker_id: str, registration: Registration) -> WorkerRow:
        with self._transaction(write=True) as cursor:
            return workers.register(cursor, worker_id, registration)

    def renew_worker(self, worker_id: str, registration: Registration) -> WorkerRow:
        with self._transaction(write=True) as cursor:
            renewed = workers.renew(cursor, worker_id, registration)
            if renewed is not None:
                return renewed
            # Forgotten while away (a worker of its host registered meanwhile): again.
            return workers.register(cursor, worker_id, registration, lapses=1)

    def deregister_worker(self, worker_id: str) -> None:
        with self._transaction(write=True) as cursor:
            workers.deregister(cursor, worker_id)

    def list_workers(self) -> list[WorkerRow]:
        with self._transaction(write=False) as cursor:
            return workers.every_worker(cursor)

    # --- commands of subtasks placed on workers (store/commands.py) -----------------------

    def queue_command(
        self,
        execution_id: str,
        subtask_id: str,
        worker_id: str,
        epoch: int,
        command: dict[str, Any],
    ) -> int:
        with self._transaction(write=True) as cursor:
            return commands.queue(cursor, execution_id, subtask_id, worker_id, epoch, command)

    def take_commands(self, worker_id: str) -> list[Queued]:
        with self._transaction(write=True) as cursor:
            return commands.take(cursor, worker_id)

    def finish_command(
        self,
        command_id: int,
        *,
        results: list[tuple[str, dict[str, Any]]],
        error: str | None,
    ) -> None:
        with self._transaction(write=True) as cursor:
            commands.finish(cursor, command_id, results, error)

    def command_outcome(self, command_id: int) -> Outcome | None:
        with self._transaction(write=False) as cursor:
            return commands.outcome(cursor, command_id)

    def cancel_command(self, command_id: int) -> None:
        with self._transaction(write=True) as cursor:
            commands.cancel(cursor, command_id)

    # --- stops asked from another host (store/stop_requests.py) ---------------------------

    def request_stop(self, execution_id: str, owner: str, request: StopRequest) -> None:
        with self._transaction(write=True) as cursor:
            stop_requests.request(cursor, execution_id, owner, request)

    def take_stop_requests(self, execution_id: str, owner: str) -> list[StopRequest]:
        with self._transaction(write=True) as cursor:
            return stop_requests.take(cursor, execution_id, owner)

    def wait_for_commands(self, worker_id: str, timeout_s: float) -> None:
        """Until a command is queued for `worker_id` (a NOTIFY), or `timeout_s` passed. On
        a connection of its own, LISTENing from the first call on: a command queued between
        two calls is told at the next (the notice waits on the connection)."""
        try:
            if self._listener is None or self._listener.closed or self._listener.broken:
                self._listener = psycopg.connect(
                    self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
                )
                self._listener.execute(f"LISTEN {commands.CHANNEL}")
            for notice in self._listener.notifies(timeout=timeout_s):
                if notice.payload == worker_id:
                    return
        except psycopg.Error as error:
            if self._listener is not None:
                self._listener.close()
            raise EnvironmentProblem(
                f"the store at {self.location} failed: {_first_line(error)}"
            ) from error

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            self._conn.close()
            track_closed(self)
