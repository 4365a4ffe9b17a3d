"""`worker` and `workers`: hosts that offer their slots to the plans of a shared store.

A worker registers itself in the PostgreSQL store (host, address, slots) and renews a
heartbeat lease until it is asked to stop (SIGTERM or SIGINT), when it deregisters. With
a remote (`--remote`), it also carries out, meanwhile, the commands of subtasks that
executions of `placement: workers` assign to it (runtime/worker_host.py), in a thread of
its own so that no step delays a heartbeat (docs/operations.md, "Workers on several
machines").

One machine needs no worker, and SQLite, a file of one machine, keeps none: both commands
refuse a store that is not PostgreSQL (`WorkersNeedPostgres`, exit 2).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import cast

from orchestrator.errors import EnvironmentProblem, UsageError
from orchestrator.git.repo import RepoPaths
from orchestrator.store.base import DurableExecutionStore, format_timestamp
from orchestrator.store.workers import Registration, WorkerRegistry, WorkerRow

#: A worker's lease unless `--lease` says otherwise: as long as a supervisor's.
LEASE_S = 30.0
#: Heartbeats per lease: five may be lost (a slow store, a busy host) before it lapses.
BEATS_PER_LEASE = 6


class WorkersNeedPostgres(UsageError):
    def __init__(self) -> None:
        super().__init__(
            "workers need the PostgreSQL store (--store postgresql://... or KAIRO_STORE); "
            "one machine needs no worker: `kairo-orch start` runs a plan here"
        )


@dataclass(frozen=True)
class WorkerView:
    """One worker as `workers` shows it (`--json`: these fields)."""

    worker_id: str
    host: str
    address: str
    pid: int
    slots: int
    running: int
    started_at: str
    last_heartbeat: str
    heartbeat_age_s: float
    lease_expires_at: str
    alive: bool
    lapses: int
    remote: str | None = None  # the git remote whose plans it runs (`worker --remote`)


@dataclass(frozen=True)
class WorkerNote:
    """What a running worker tells its user as it goes: `registered`; `unreachable` (the
    store failed a heartbeat: it keeps trying); `renewed` after its lease had lapsed."""

    kind: str
    worker: WorkerView | None = None
    problem: str | None = None


@dataclass(frozen=True)
class WorkerStopped:
    worker_id: str
    signal_name: str
    deregistered: bool  # False: the store could not be reached; its lease lapses instead


def view(row: WorkerRow) -> WorkerView:
    return WorkerView(
        worker_id=row.worker_id,
        host=row.host,
        address=row.address,
        pid=row.pid,
        slots=row.slots,
        running=row.running,
        started_at=format_timestamp(row.started_at),
        last_heartbeat=format_timestamp(row.heartbeat_at),
        heartbeat_age_s=round(row.heartbeat_age_s, 3),
        lease_expires_at=format_timestamp(row.lease_expires_at),
        alive=row.alive,
        lapses=row.lapses,
        remote=row.remote,
    )


@contextmanager
def _registry(store_url: str | None) -> Iterator[WorkerRegistry]:
    if store_url is None or store_url.partition(":")[0].lower() not in ("postgresql", "postgres"):
        raise WorkersNeedPostgres
    from orchestrator.store import open_store

    # No repository is needed for a PostgreSQL store: the git directory is never read.
    with open_store(store_url, git_common_dir=Path(os.devnull)) as store:
        yield cast(WorkerRegistry, store)


def list_workers(store_url: str | None) -> list[WorkerView]:
    with _registry(store_url) as registry:
        return [view(row) for row in registry.list_workers()]


def serve(
    store_url: str | None,
    *,
    slots: int,
    address: str | None,
    lease_s: float = LEASE_S,
    tell: Callable[[WorkerNote], None],
    remote: str | None = None,
    data_dir: Path | None = None,
) -> WorkerStopped:
    """Register, renew the lease until SIGTERM or SIGINT, deregister. With `remote`, carry
    out meanwhile the commands of the subtasks its owners assign to it (a clone of
    `remote` under `data_dir`, made first if need be)."""
    from orchestrator.store.ulid import new_ulid

    registration = Registration(
        host=socket.gethostname(),
        address=address,
        pid=os.getpid(),
        slots=slots,
        lease_seconds=lease_s,
        remote=remote,
    )
    data_dir = data_dir or default_data_dir()
    with _stop_signals() as stopped, _registry(store_url) as registry:
        clone = _clone(remote, data_dir) if remote is not None else None
        worker_id = new_ulid()
        row = registry.register_worker(worker_id, registration)
        tell(WorkerNote("registered", view(row)))
        taking = None
        if remote is not None and clone is not None:
            taking = _take_commands(store_url, worker_id, remote, data_dir, clone, stopped)
        lapses, reachable = row.lapses, True
        while not stopped.wait(lease_s / BEATS_PER_LEASE):
            try:
                row = registry.renew_worker(worker_id, registration)
            except EnvironmentProblem as problem:  # the lease runs on; the next beat retries
                if reachable:
                    tell(WorkerNote("unreachable", problem=problem.message))
                reachable = False
                continue
            reachable = True
            if row.lapses != lapses:
                tell(WorkerNote("renewed", view(row)))
                lapses = row.lapses
        if taking is not None:
            taking.join()
        try:
            registry.deregister_worker(worker_id)
        except EnvironmentProblem as problem:
            tell(WorkerNote("unreachable", problem=problem.message))
            return WorkerStopped(worker_id, stopped.signal_name, deregistered=False)
        return WorkerStopped(worker_id, stopped.signal_name, deregistered=True)


def default_data_dir() -> Path:
    """Where a worker keeps its clones, worktrees and runs: KAIRO_WORKER_DIR, else
    ~/.kairo-worker."""
    return Path(os.environ.get("KAIRO_WORKER_DIR") or Path.home() / ".kairo-worker")


def _clone(remote: str, data_dir: Path) -> RepoPaths:
    import trio

    from orchestrator.runtime.worker_host import ensure_clone

    return trio.run(ensure_clone, data_dir, remote)


def _take_commands(
    store_url: str | None,
    worker_id: str,
    remote: str,
    data_dir: Path,
    clone: RepoPaths,
    stopped: threading.Event,
) -> threading.Thread:
    """A thread of its own, with its own trio loop and store connection, beside the
    heartbeats of the main one: a long git or tmux step never delays a heartbeat."""
    import trio

    from orchestrator.runtime.worker_host import WorkerHost, WorkerStore

    async def take() -> None:
        with _registry(store_url) as store:
            host = WorkerHost(
                cast(WorkerStore, store),
                cast(DurableExecutionStore, store),
                worker_id,
                host=socket.gethostname(),
                remote=remote,
                data_dir=data_dir,
                clone=clone,
            )
            await host.serve(stopped.is_set)

    thread = threading.Thread(target=trio.run, args=(take,), name="kairo-worker-commands")
    thread.start()
    return thread


class _Stop(threading.Event):
    signal_name = ""


@contextmanager
def _stop_signals() -> Iterator[_Stop]:
    """An event set by SIGTERM or SIGINT (the previous handlers are put back after)."""
    stop = _Stop()

    def asked(number: int, _frame: FrameType | None) -> None:
        stop.signal_name = signal.Signals(number).name
        stop.set()

    previous = {number: signal.signal(number, asked) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
