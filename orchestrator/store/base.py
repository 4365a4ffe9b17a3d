"""The port every execution store implements, and the records it hands back (no I/O here).

The runtime talks to a `DurableExecutionStore` only through this Protocol, from a worker
thread (`trio.to_thread.run_sync`), so the methods are synchronous and each write is one
transaction. Backends: `orchestrator.store.sqlite` and `orchestrator.store.postgres`.

`version` is the optimistic lock of store.md: every row update bumps it, and a caller that
passes `expected_version` gets `ConcurrentUpdate` instead of overwriting a change it has
not seen.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import EllipsisType, TracebackType
from typing import Any, Protocol, Self

from orchestrator.core.ids import short_id
from orchestrator.errors import EnvironmentProblem, OwnershipError, UsageError

#: `head_hash` of an execution that has no event yet: the chain's seed, so that the hash of
#: the next event is always sha256_hex(head_hash + canonical_json(envelope)).
EMPTY_HEAD_HASH = "GENESIS"
EMPTY_HEAD_SEQ = -1


#: Stores open in this process, of any backend. A database connection must not be carried
#: across a fork: a SQLite child's copy of the lock bookkeeping would think it holds the
#: parent's locks (and the parent, closing, could reset the write-ahead log under it); a
#: PostgreSQL child would share the parent's socket, the server reading both as one
#: session. The supervisor is forked before any store is opened (supervisor_process.py),
#: which checks this. Held weakly: a store nobody holds any more is closed when collected.
_open: weakref.WeakSet[object] = weakref.WeakSet()


def track_open(store: object) -> None:
    _open.add(store)


def track_closed(store: object) -> None:
    _open.discard(store)


def open_stores() -> int:
    return len(_open)


def format_timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with microseconds, '2026-12-02T17:14:51.123456Z': it sorts as text."""
    if moment.tzinfo is None:
        raise ValueError("a store timestamp needs an aware datetime")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append: the store gives it its seq, id, timestamp and hash."""

    event_type: str
    payload: dict[str, Any]
    schema_version: int = 1


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One row of `kairo_execution_events`; `payload` is the parsed `payload_json`."""

    execution_id: str
    seq: int
    event_id: str
    event_type: str
    schema_version: int
    payload: dict[str, Any]
    event_hash: str
    created_at: str


@dataclass(frozen=True, slots=True)
class ExecutionRow:
    """One row of `kairo_executions`: a summary and cache; the log is the truth."""

    execution_id: str
    plan_name: str
    status: str
    version: int
    owner: str | None
    lease_expires_at: str | None
    head_seq: int
    head_hash: str
    checkpoint_json: str | None
    created_at: str
    updated_at: str
    repository: str | None = None  # whose it is (`repository_key`); None if made before


class ConcurrentUpdate(OwnershipError):
    """The row changed since the caller read it: someone else supervises this execution."""

    def __init__(self, execution_id: str, *, expected: int, found: int) -> None:
        super().__init__(
            f"execution {execution_id} was changed by someone else (version {found}, "
            f"expected {expected}); another supervisor may own it",
            execution_id=execution_id,
        )
        self.expected = expected
        self.found = found


class AppendUnanswered(EnvironmentProblem):
    """An append the store failed to answer (a server restarting, a connection cut, a
    writer lock held too long): it may have committed or not. `attempted` holds the events
    it was writing, sealed (empty if it failed before it sealed any): whether the head is
    the last of them tells which (`append_landed`)."""

    def __init__(self, problem: EnvironmentProblem, attempted: Sequence[StoredEvent]) -> None:
        super().__init__(problem.message, execution_id=problem.execution_id)
        self.attempted = list(attempted)


def append_landed(
    row: ExecutionRow, *, expected_version: int, unanswered: AppendUnanswered
) -> bool:
    """Whether an unanswered append committed, read from the row once no write to it is
    in flight (`get_execution(settled=True)`: a commit whose connection dropped may still be
    finishing).

    Every write bumps the version, so a row still at `expected_version` took nothing: the
    append may be made again. A head that is the last attempted event's hash (which covers
    its random id and timestamp) is that append, committed. Anything else is another
    writer's: `ConcurrentUpdate`, never a second copy of the events.
    """
    if row.version == expected_version:
        return False
    last = unanswered.attempted[-1] if unanswered.attempted else None
    if (
        last is not None
        and row.version == expected_version + 1
        and (row.head_seq, row.head_hash) == (last.seq, last.event_hash)
    ):
        return True
    raise ConcurrentUpdate(row.execution_id, expected=expected_version, found=row.version)


class UnknownExecution(UsageError):
    def __init__(self, execution_id: str) -> None:
        super().__init__(f"no execution matches {execution_id}", execution_id=execution_id)


def match_execution_id(execution_ids: Iterable[str], prefix_or_short: str) -> str:
    """The one id of `execution_ids` that `prefix_or_short` names: the id itself, a unique
    prefix of it or its short id (`core.ids.short_id`), all case-insensitively."""
    wanted = prefix_or_short.strip().lower()
    if not wanted:
        raise UsageError("an execution id, a prefix of one or a short id is needed")
    ids = list(execution_ids)
    exact = [i for i in ids if i.lower() == wanted]
    matches = exact or sorted(
        i for i in ids if i.lower().startswith(wanted) or short_id(i) == wanted
    )
    if not matches:
        raise UnknownExecution(prefix_or_short)
    if len(matches) > 1:
        shown = ", ".join(matches[:10]) + (", ..." if len(matches) > 10 else "")
        raise UsageError(
            f"{prefix_or_short} matches {len(matches)} executions ({shown}); give more characters"
        )
    return matches[0]


class DurableExecutionStore(Protocol):
    """The execution store of store.md: rows, an append-only hash-chained log, migrations."""

    #: Names the store in messages, never with a password.
    location: str

    def create_execution(
        self,
        execution_id: str,
        plan_name: str,
        status: str,
        events: Sequence[NewEvent],
        *,
        repository: str | None = None,
    ) -> list[StoredEvent]:
        """Insert the row (version 0) and events 0..n-1 in one transaction."""
        ...

    def append(
        self,
        execution_id: str,
        events: Sequence[NewEvent],
        *,
        expected_version: int | None = None,
        status: str | None = None,
        owner: str | None = None,
        written_head: tuple[int, str] | None = None,
    ) -> list[StoredEvent]:
        """Append after the head, move the head and bump the version in one transaction.

        `status`/`owner` of None leave the column as it is. Raises `ConcurrentUpdate` when
        `expected_version` is given and is not the row's version. `written_head`, the
        (seq, hash) the caller wrote last: `LogRewritten`, and nothing appended, when the
        log no longer ends with that very event (store.md, "What the supervisor wrote").
        """
        ...

    def set_status(
        self,
        execution_id: str,
        status: str,
        *,
        owner: str | EllipsisType | None = ...,
        lease_expires_at: str | EllipsisType | None = ...,
        expected_version: int | None = None,
    ) -> ExecutionRow:
        """Update the summary columns without an event (`...` keeps, None clears)."""
        ...

    def save_checkpoint(self, execution_id: str, checkpoint_json: str) -> None:
        """Replace the snapshot of the folded state; a cache, so the version is not bumped."""
        ...

    def read_events(self, execution_id: str, after_seq: int = -1) -> list[StoredEvent]:
        """Events with seq > after_seq, oldest first."""
        ...

    def get_execution(self, execution_id: str, *, settled: bool = False) -> ExecutionRow | None:
        """The row, or None. `settled`: read under the row's write lock, after any write to
        it still in flight (a commit whose answer was lost) has ended."""
        ...

    def list_executions(self, *, repository: str | None = None) -> list[ExecutionRow]:
        """Newest first (created_at, then execution_id); with `repository`, only its own
        and those that say of no repository."""
        ...

    def resolve_id(self, prefix_or_short: str) -> str:
        """The one execution id this prefix or short id names, or `UsageError`."""
        ...

    def event_hashes(self, execution_id: str, first: int, last: int) -> dict[int, str]:
        """The stored `event_hash` of each event from seq `first` to `last`, by seq."""
        ...

    def verify(self, execution_id: str) -> tuple[int, str]:
        """Recompute the chain from seq 0; the verified head, or `LogVerificationError`."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
