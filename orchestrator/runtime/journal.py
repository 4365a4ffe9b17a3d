"""The supervisor's one door to its log: append events, keep the folded state current.

Appends are serialized (the log has one writer) and run in a worker thread (the store is
blocking). The state is folded forward from each durable append, never changed otherwise.
Events are folded before they are appended, too: one that would move a subtask in a way
the lifecycle table (core/lifecycle.py) does not allow is a bug, refused unwritten. What
they quote of agents and checks has the supervisor's secrets cut out first
(core/event_base.py): the log, and all that is made of it, holds none.

Being the one writer, the journal knows the event it wrote last, and each append asks the
store to refuse a log that no longer ends with it: one rewritten under the supervisor
(reproduction 35.4, store.md "What the supervisor wrote") stops it at its next write, with
nothing written on top. Each event appended is added to the run folder's `log-hashes` too
(log_witness.py), for `status`, `verify` and `resume` to compare the log with afterwards.

A checkpoint serializes the whole state, so one is saved at a safe point only once as many
events as the plan has subtasks went by since the last: what checkpoints cost per event
stays the same for any plan, and recovery refolds at most that many events. One more is
saved as the execution ends, for the commands that read it afterwards.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import structlog
import trio

from orchestrator.core import checkpoints
from orchestrator.core import events as ev
from orchestrator.core.agenda import Agenda
from orchestrator.core.event_base import redact_printed
from orchestrator.core.ids import short_id
from orchestrator.core.lifecycle import IllegalMove
from orchestrator.core.secrets import Redactor
from orchestrator.core.state import ExecutionState, apply
from orchestrator.errors import EnvironmentProblem, LogRewritten, OwnershipError, StoreLost
from orchestrator.runtime import ownership
from orchestrator.runtime.log_records import record_of
from orchestrator.runtime.log_witness import LogWitness, first_rewritten
from orchestrator.runtime.ownership import lease_deadline
from orchestrator.store.base import (
    AppendUnanswered,
    ConcurrentUpdate,
    DurableExecutionStore,
    NewEvent,
    StoredEvent,
    append_landed,
)

log = structlog.get_logger(__name__)

CRASH_AFTER_VARIABLE = "KAIRO_FAULT_CRASH_AFTER_EVENT"
HEARTBEAT_SECONDS = ownership.HEARTBEAT_SECONDS
LEASE_RETRY_SECONDS = 1.0
#: An append the store failed is made again after this, then twice as long each time.
STORE_RETRY_FIRST_S = 0.1
STORE_RETRY_MAX_S = 2.0
#: Events between two checkpoints at least, however small the plan.
CHECKPOINT_MIN_EVENTS = 8


class Journal:
    """Appends as the owner of the execution: every write says which version it expects."""

    def __init__(
        self,
        store: DurableExecutionStore,
        state: ExecutionState,
        *,
        owner: str,
        version: int,
        claimed_at: float | None = None,
        written_head: tuple[int, str] | None = None,
        witness: LogWitness | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        """`redactor`: what to cut out of events, that of this process's environment
        unless given."""
        self._store = store
        self._redactor = redactor or Redactor.of(os.environ)
        self._lock = trio.Lock()
        self._appended = 0
        crash_after = os.environ.get(CRASH_AFTER_VARIABLE, "")
        self._crash_after = int(crash_after) if crash_after.isdigit() else None
        self.owner = owner
        self.version = version
        self.state = state
        self._agenda: Agenda | None = None
        self._checkpoint_seq = state.seq
        self.changed = trio.Event()
        #: When the lease this supervisor last wrote runs out (time.monotonic()), counted
        #: from before the write: `claimed_at`, when its owner claimed the execution.
        claimed = time.monotonic() if claimed_at is None else claimed_at
        self.lease_ends = claimed + ownership.LEASE.total_seconds()
        #: The (seq, hash) of the last event this supervisor wrote (at first, the head it
        #: verified): the store refuses an append to a log that no longer ends with it.
        #: Held here, where nothing that writes the store can change it.
        self._written_head = written_head
        self._witness = witness

    @property
    def execution_id(self) -> str:
        return self.state.execution_id

    @property
    def agenda(self) -> Agenda:
        """The state's agenda, for `decide`: sorted once, then advanced with every append."""
        if self._agenda is None:
            self._agenda = Agenda.of(self.state)
        return self._agenda

    async def append(
        self,
        events: Sequence[ev.ExecutionEvent],
        *,
        only_if: Callable[[ExecutionState], bool] | None = None,
    ) -> ExecutionState:
        """`only_if`: appended only if it holds of the state they would follow (asked
        under the lock that orders appends, so no other append comes between)."""
        if not events:
            return self.state
        events = [redact_printed(event, self._redactor.text) for event in events]
        records = [record_of(event) for event in events]
        async with self._lock:
            if only_if is not None and not only_if(self.state):
                return self.state
            ahead = self._folded_ahead(events)
            status = self._status_after(events)
            try:
                stored = await self._append_through_outages(records, status)
            except LogRewritten as rewritten:
                raise await self._rewritten(rewritten) from None
            self._written_head = (stored[-1].seq, stored[-1].event_hash)
            if self._witness is not None:
                try:
                    self._witness.add(stored)
                except OSError as error:  # said once: the file stops there, the run goes on
                    log.warning(
                        "log_hashes_stopped", path=str(self._witness.path), error=str(error)
                    )
            seqs = [row.seq for row in stored]
            if seqs != [self.state.seq + i for i in range(1, len(events) + 1)]:
                ahead = self.state  # the store numbered them otherwise: fold by its seqs
                for event, seq in zip(events, seqs, strict=True):
                    ahead = apply(ahead, event, seq)
            for event, seq in zip(events, seqs, strict=True):
                log.info("event", event_type=event.type, seq=seq, **_subtask_of(event))
                self._count_for_fault_injection()
            state = self.state = ahead
            if self._agenda is not None:
                self._agenda.advance(events, state)
            if self._checkpoint_due(events):
                last = stored[-1]
                self._checkpoint_seq = last.seq
                snapshot = checkpoints.snapshot(state, last.seq, last.event_hash)
                try:
                    await trio.to_thread.run_sync(
                        self._store.save_checkpoint, self.execution_id, snapshot
                    )
                except StoreLost as lost:
                    raise self._lost(lost) from lost
                except EnvironmentProblem as problem:
                    # A cache: recovery folds from an older one, or from the start.
                    log.warning("checkpoint_not_saved", error=problem.message)
        self._wake()
        return state

    def _checkpoint_due(self, events: Sequence[ev.ExecutionEvent]) -> bool:
        if any(isinstance(event, ev.ExecutionEnded) for event in events):
            return True  # what `status` and `report` read from then on: nothing to refold
        if not any(isinstance(event, checkpoints.SAFE_POINTS) for event in events):
            return False
        spacing = max(CHECKPOINT_MIN_EVENTS, len(self.state.subtasks))
        return self.state.seq - self._checkpoint_seq >= spacing

    def _folded_ahead(self, events: Sequence[ev.ExecutionEvent]) -> ExecutionState:
        """The state the events make, folded at the seqs they will have; refused (before
        anything is written) when one makes a move the lifecycle does not allow."""
        state = self.state
        for seq, event in enumerate(events, start=self.state.seq + 1):
            state = apply(state, event, seq)
        if len(state.anomalies) > len(self.state.anomalies):
            found = state.anomalies[len(self.state.anomalies)]
            log.error(
                "illegal_move",
                move=found.move.value,
                subtask_id=found.subtask_id,
                source=found.source,
                target=found.target,
            )
            raise IllegalMove(
                f"execution {self.execution_id}: refused to append {found.move.value} for "
                f"{found.subtask_id}: it would take the subtask from {found.source} to "
                f"{found.target}, a move core/lifecycle.py does not allow. A bug in "
                "kairo-orch; nothing of it was written, and the supervisor stops"
            )
        return state

    async def _append_through_outages(
        self, records: list[NewEvent], status: str | None
    ) -> list[StoredEvent]:
        """The append, made again while the store fails and this supervisor's lease lasts
        (until then no other may take the execution over; past it one may, which the version
        every write expects would catch). One whose answer was lost is looked up before it
        is made again: never made twice."""
        while True:
            try:
                return await trio.to_thread.run_sync(self._append_sync, records, status)
            except AppendUnanswered as error:
                unanswered = error
            except StoreLost as lost:
                raise self._lost(lost) from lost
            if await self._landed_once_reachable(unanswered):
                log.info("store_append_landed", seq=unanswered.attempted[-1].seq)
                return unanswered.attempted

    async def _rewritten(self, found: LogRewritten) -> LogRewritten:
        """The store's refusal, said as what it is for this execution: the first seq whose
        hash is not the one written, where the witness file (still) says."""
        what, bad = found.what, found.bad_seq
        if self._witness is not None and self._written_head is not None:
            witness, up_to = self._witness, self._written_head[0]
            try:
                first = await trio.to_thread.run_sync(
                    first_rewritten, self._store, self.execution_id, witness, up_to
                )
            except EnvironmentProblem:
                first = None  # the store's own word will do
            if first is not None and first < bad:
                what, bad = f"the event at seq {first} is not the one it wrote", first
        short = short_id(self.execution_id)
        log.error("log_rewritten", seq=bad, what=what)
        return LogRewritten(
            f"the event log of {self.execution_id} was changed while its supervisor ran: "
            f"{what}. The supervisor stops, and writes nothing more to it: `kairo-orch status "
            f"{short}` shows it TAMPERED. Its agents run on in tmux session "
            f"{self.state.created.tmux_session}, their work in their worktrees and branches; "
            f"`kairo-orch clean {short}` ends them and keeps what is not merged",
            execution_id=self.execution_id,
            bad_seq=bad,
            what=what,
        )

    def _lost(self, lost: StoreLost) -> StoreLost:
        short = short_id(self.execution_id)
        return StoreLost(
            f"{lost.message}: the log of execution {self.execution_id} is gone with it, so "
            f"its supervisor stops. Its agents run on in tmux session "
            f"{self.state.created.tmux_session} and their work stays in their worktrees and "
            f"branches; `kairo-orch clean {short}` ends them and removes what holds no "
            "unmerged work",
            execution_id=self.execution_id,
        )

    async def _landed_once_reachable(self, unanswered: AppendUnanswered) -> bool:
        problem: EnvironmentProblem = unanswered
        wait_s = STORE_RETRY_FIRST_S
        while True:
            if time.monotonic() + wait_s > self.lease_ends:
                raise self._lease_ran_out(problem)
            log.warning("store_unreachable", error=problem.message, retry_in_s=wait_s)
            await trio.sleep(wait_s)
            wait_s = min(wait_s * 2, STORE_RETRY_MAX_S)
            try:
                landed = await trio.to_thread.run_sync(self._landed, unanswered)
            except StoreLost as lost:
                raise self._lost(lost) from lost
            except EnvironmentProblem as error:
                problem = error
                continue
            if not landed and time.monotonic() > self.lease_ends:
                raise self._lease_ran_out(problem)  # the lookup itself took that long
            return landed

    def _lease_ran_out(self, problem: EnvironmentProblem) -> EnvironmentProblem:
        return EnvironmentProblem(
            f"{problem.message}; the store kept failing until this supervisor's lease ran "
            f"out, so it stops. Its agents run on: `kairo-orch resume {self.execution_id}` "
            "once the store works again",
            execution_id=self.execution_id,
        )

    def _append_sync(self, records: list[NewEvent], status: str | None) -> list[StoredEvent]:
        with self._taken_over_stops():
            stored = self._store.append(
                self.execution_id,
                records,
                expected_version=self.version,
                status=status,
                written_head=self._written_head,
            )
        self.version += 1
        return stored

    def _landed(self, unanswered: AppendUnanswered) -> bool:
        row = self._store.get_execution(self.execution_id, settled=True)
        if row is None:
            raise StoreLost(
                f"execution {self.execution_id} is no longer in the store {self._store.location}",
                execution_id=self.execution_id,
            )
        with self._taken_over_stops():
            landed = append_landed(row, expected_version=self.version, unanswered=unanswered)
        if landed:
            self.version += 1
        return landed

    @contextmanager
    def _taken_over_stops(self) -> Iterator[None]:
        try:
            yield
        except ConcurrentUpdate:
            raise OwnershipError(
                f"execution {self.execution_id} was taken over by another supervisor; "
                "this one stops",
                execution_id=self.execution_id,
            ) from None

    async def set_status(self, status: str, *, release: bool = False) -> None:
        """Renew the lease (the heartbeat), change the row's status, or let go of it."""
        async with self._lock:

            def update() -> None:
                asked = time.monotonic()
                row = self._store.set_status(
                    self.execution_id,
                    status,
                    owner=None if release else self.owner,
                    lease_expires_at=None if release else lease_deadline(),
                    expected_version=self.version,
                )
                self.version = row.version
                self.lease_ends = asked + ownership.LEASE.total_seconds()

            try:
                await trio.to_thread.run_sync(update)
            except ConcurrentUpdate:
                if release or not await self._own_write_went_unanswered():
                    raise OwnershipError(
                        f"execution {self.execution_id} was taken over by another supervisor",
                        execution_id=self.execution_id,
                    ) from None
                await trio.to_thread.run_sync(update)

    async def _own_write_went_unanswered(self) -> bool:
        """Whether the row moved on only by a write of ours whose answer was lost (a
        renewal the server committed as the connection dropped, tried again by
        `keep_lease`): it still names this supervisor, whose token no other process has.
        Then its version is taken as ours."""
        row = await trio.to_thread.run_sync(self._store.get_execution, self.execution_id)
        if row is None or row.owner != self.owner:
            return False
        self.version = row.version
        return True

    async def keep_lease(self, status: str) -> None:
        """Run until cancelled: renew the lease well before it runs out. A renewal the store
        failed (a server restarting, a connection cut) is tried again a second later, not
        fatal: the lease outlasts two missed beats, and nothing else was written."""
        while True:
            await trio.sleep(HEARTBEAT_SECONDS)
            while True:
                try:
                    await self.set_status(status)
                    break
                except StoreLost as lost:
                    raise self._lost(lost) from lost
                except EnvironmentProblem as problem:
                    log.warning("lease_renewal_failed", error=problem.message)
                    await trio.sleep(LEASE_RETRY_SECONDS)

    def _status_after(self, events: Sequence[ev.ExecutionEvent]) -> str | None:
        for event in events:
            if isinstance(event, ev.ExecutionEnded):
                return event.status
            if isinstance(event, ev.ExecutionReopened):
                return "RUNNING"
        return None

    def _count_for_fault_injection(self) -> None:
        # A testing aid of cli.md: die right after the Nth durable append of this process.
        self._appended += 1
        if self._crash_after is not None and self._appended >= self._crash_after:
            os.kill(os.getpid(), signal.SIGKILL)

    def _wake(self) -> None:
        self.changed.set()
        self.changed = trio.Event()


def _subtask_of(event: ev.ExecutionEvent) -> dict[str, str]:
    named = ev.subtasks_named(event)
    return {"subtask_id": " ".join(named)} if named else {}
