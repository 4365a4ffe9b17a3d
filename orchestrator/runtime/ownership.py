"""Who supervises an execution: one owner at a time, shown by a lease on its row.

The owner is `host:pid`. On this host a supervisor is alive while its pid runs a kairo
process; on another host we cannot look, so its lease (renewed by a heartbeat) must not
have expired. Taking ownership is a compare-and-swap on the row's `version`, so of two
`resume`s racing for one execution exactly one wins and the other exits 4.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.errors import OwnershipError
from orchestrator.store.base import (
    ConcurrentUpdate,
    DurableExecutionStore,
    ExecutionRow,
    format_timestamp,
)

LEASE = timedelta(seconds=30)
HEARTBEAT_SECONDS = 5.0


def owner_token(pid: int | None = None) -> str:
    return f"{socket.gethostname()}:{pid if pid is not None else os.getpid()}"


def _split(owner: str) -> tuple[str, int | None]:
    host, _, pid = owner.rpartition(":")
    return host, int(pid) if pid.isdigit() else None


def local_owner_pid(row: ExecutionRow) -> int | None:
    """The owner's pid when the owner is a process of this host, else None."""
    if not row.owner:
        return None
    host, pid = _split(row.owner)
    return pid if host == socket.gethostname() else None


def lease_deadline(now: datetime | None = None) -> str:
    return format_timestamp((now or datetime.now(UTC)) + LEASE)


def owner_alive(row: ExecutionRow, now: datetime | None = None) -> bool:
    if not row.owner:
        return False
    host, pid = _split(row.owner)
    if host == socket.gethostname() and pid is not None:
        return kairo_process_alive(pid)
    if not row.lease_expires_at:
        return False
    return row.lease_expires_at > format_timestamp(now or datetime.now(UTC))


def supervisor_alive(pid: int, execution_id: str) -> bool:
    """Whether `pid` is a live supervisor of `execution_id` (its title or command line
    names the execution: not a pid reused by another kairo process)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return execution_id.encode() in cmdline and kairo_process_alive(pid)


def kairo_process_alive(pid: int) -> bool:
    """Whether `pid` runs, and runs kairo-orch (not a reused pid, not a zombie): its
    command line says so, or its name does. A supervisor forked from `start` keeps the
    command line of whatever started that (a link of another name, say) and names itself
    `kairo-orch` (supervisor_process.py)."""
    proc = Path(f"/proc/{pid}")
    try:
        cmdline = (proc / "cmdline").read_bytes()
    except OSError:
        return False
    if not cmdline:  # a zombie
        return False
    if b"orchestrator" in cmdline or b"kairo-orch" in cmdline:
        return True
    try:
        return (proc / "comm").read_text(encoding="ascii", errors="replace").strip() == "kairo-orch"
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class Claim:
    row: ExecutionRow  # as the claim left it
    #: When the row was last written before the claim (`updated_at`): by a supervisor, its
    #: last heartbeat, append or checkpoint, the last sign of its life that the claim
    #: writes over (its heartbeats go on until it dies).
    previous_write: str


def claim(
    store: DurableExecutionStore,
    execution_id: str,
    *,
    owner: str,
    status: str,
    handover_version: int | None = None,
) -> ExecutionRow:
    """Become the owner, or raise OwnershipError (exit 4) naming who owns it.

    `handover_version` is the row version that the command which spawned us left after
    claiming the execution for us: with it, that owner's claim passes to us.
    """
    return take_claim(
        store, execution_id, owner=owner, status=status, handover_version=handover_version
    ).row


def take_claim(
    store: DurableExecutionStore,
    execution_id: str,
    *,
    owner: str,
    status: str,
    handover_version: int | None = None,
) -> Claim:
    """`claim`, saying also when the row was last written before it."""
    row = store.get_execution(execution_id)
    if row is None:
        raise OwnershipError(f"no execution {execution_id}", execution_id=execution_id)
    handed_over = handover_version is not None and row.version == handover_version
    if not handed_over and row.owner != owner and owner_alive(row):
        raise OwnershipError(
            f"execution {execution_id} is supervised by {row.owner} already "
            f"(lease until {row.lease_expires_at}); `kairo-orch attach` shows it",
            execution_id=execution_id,
        )
    try:
        claimed = store.set_status(
            execution_id,
            status,
            owner=owner,
            lease_expires_at=lease_deadline(),
            expected_version=row.version,
        )
    except ConcurrentUpdate:
        raise OwnershipError(
            f"execution {execution_id} was claimed by another supervisor at the same moment",
            execution_id=execution_id,
        ) from None
    return Claim(claimed, previous_write=row.updated_at)
