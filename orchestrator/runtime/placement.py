"""The owner's side of `placement: workers`: each subtask is assigned to a live worker of
the plan's remote, its commands are queued for that worker through the store, and the
events they answer with are appended here, by the log's only writer.

Fencing: a worker's events are appended only while the assignment they were carried out
for is the subtask's current one (its epoch), checked in the owner's state under the
journal's lock, the one that orders every append: the owner is the log's only writer
(its lease on the execution's row fences another owner), so no assignment can come
between the check and the append. Git goes
through the remote: the owner fetches a subtask's branch when its commit is reported,
before anything merges it, and pushes the integration branch after every step that moves
it, leased against the head the log records (git/remote.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

import structlog
import trio

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.ids import subtask_branch
from orchestrator.core.placement import (
    Offer,
    after_losing,
    busy_slots,
    choose_worker,
    command_record,
    placed,
)
from orchestrator.core.state import ExecutionState
from orchestrator.errors import EnvironmentProblem, StepFailed
from orchestrator.git.invocation import git
from orchestrator.git.refs import branch_ref
from orchestrator.git.remote import fetch_branch, fetch_commit, push_leased
from orchestrator.runtime.journal import Journal
from orchestrator.store.commands import Outcome
from orchestrator.store.stop_requests import StopRequest
from orchestrator.store.workers import WorkerRow

log = structlog.get_logger(__name__)

#: How often the owner looks for a command's outcome, for a free worker, for lost ones.
POLL_S = 0.2
WAIT_FOR_WORKER_S = 1.0
LOOK_FOR_LOSSES_S = 1.0
LOOK_FOR_STOPS_S = 0.5
#: The commands after which the integration branch may have moved: pushed to the remote.
_MOVES_INTEGRATION = (cmd.CreateIntegrationBranch, cmd.MergeSubtask, cmd.UndoMerges)


class PlacementStore(Protocol):
    """What the owner asks of the store (PostgresStore has it)."""

    def list_workers(self) -> list[WorkerRow]: ...

    def queue_command(
        self,
        execution_id: str,
        subtask_id: str,
        worker_id: str,
        epoch: int,
        command: dict[str, Any],
    ) -> int: ...

    def command_outcome(self, command_id: int) -> Outcome | None: ...

    def cancel_command(self, command_id: int) -> None: ...

    def take_stop_requests(self, execution_id: str, owner: str) -> list[StopRequest]: ...


class Placement:
    def __init__(self, store: PlacementStore, repo: Path, remote_url: str) -> None:
        self._store = store
        self._repo = repo
        self.remote_url = remote_url
        self._assigning = trio.Lock()
        self._reassigning: set[str] = set()
        self._told_waiting: set[str] = set()

    def places(self, command: cmd.Command) -> bool:
        return placed(command)

    async def carry_out(self, journal: Journal, command: cmd.Command) -> list[ev.ExecutionEvent]:
        sid = command.subtask_id
        assignment = journal.state.assignments.get(sid)
        if isinstance(command, cmd.PrepareWorkspace) and assignment is None:
            assignment = await self._assign(journal, sid)
        if assignment is None:
            raise StepFailed(f"{sid} has no worker to carry out {type(command).__name__}")
        command_id = await trio.to_thread.run_sync(
            lambda: self._store.queue_command(
                journal.execution_id, sid, assignment.worker_id, assignment.epoch,
                command_record(command),
            )
        )  # fmt: skip
        log.info("command_queued", command=type(command).__name__, host=assignment.host)
        outcome = await self._outcome(journal, command, assignment.epoch, command_id)
        if outcome is None or _stale(journal.state, command, assignment.epoch):
            # Its worker was lost: whatever it says later no longer counts, and a command
            # it has not taken yet is never taken.
            await trio.to_thread.run_sync(self._store.cancel_command, command_id)
            return []
        if outcome.error is not None:
            raise StepFailed(f"on {assignment.host}: {outcome.error}", subtask_id=sid)
        events = [ev.from_record(kind, payload) for kind, payload in outcome.results]
        for event in events:
            if isinstance(event, ev.AttemptCommitted):
                await self._fetch(journal, sid, event.head_commit)
        epoch = assignment.epoch
        before = journal.state.seq
        await journal.append(events, only_if=lambda state: not _stale(state, command, epoch))
        if events and journal.state.seq == before:
            log.warning("stale_results_dropped", epoch=epoch)
        return []  # appended here, fenced

    async def take_over(self, state: ExecutionState) -> None:
        """Before a resumed owner goes on (on this host or another): the integration
        branch at the head the log records where this repository has none, and every
        committed, unmerged subtask's commit, fetched from the remote where it lacks
        them. A head the log records that the remote does not have (an owner that died
        between recording a merge and pushing it) fails here (StepFailed)."""
        branch, head = state.created.integration_branch, state.integration_head
        here = await git(
            "rev-parse", "-q", "--verify", branch_ref(branch), cwd=self._repo, check=False
        )
        if head is not None and here.returncode != 0:
            # Taken over: made here at the logged head. One already here is this host's
            # own, which recovery squares with the log as after any crash.
            await fetch_commit(self._repo, self.remote_url, branch, head)
            await git("update-ref", branch_ref(branch), head, cwd=self._repo)
        for view in state.subtasks.values():
            if view.id in state.assignments and view.head_commit and view.state != "merged":
                branch = subtask_branch(state.plan.name, state.execution_id, view.id)
                await fetch_commit(self._repo, self.remote_url, branch, view.head_commit)

    async def _fetch(self, journal: Journal, sid: str, head: str) -> None:
        """The subtask's branch as its worker pushed it, which must be at the commit its
        events report (a cut-off worker's late push would be found here, not merged)."""
        branch = subtask_branch(journal.state.plan.name, journal.execution_id, sid)
        fetched = await fetch_branch(self._repo, self.remote_url, branch)
        if fetched != head:
            raise StepFailed(
                f"the remote's {branch} is at {fetched[:12]}, not at the {head[:12]} its"
                " worker committed",
                subtask_id=sid,
            )

    async def watch_workers(self, journal: Journal) -> None:
        """Until cancelled: the subtasks of workers whose leases lapsed are interrupted
        or assigned anew (core/placement.after_losing)."""
        async with trio.open_nursery() as nursery:
            while True:
                await trio.sleep(LOOK_FOR_LOSSES_S)
                try:
                    rows = await trio.to_thread.run_sync(self._store.list_workers)
                except EnvironmentProblem as problem:  # waited out: the next look
                    log.warning("workers_unread", error=problem.message)
                    continue
                alive = {row.worker_id for row in rows if row.alive}
                losses = after_losing(journal.state, alive)
                # One waiting for a worker to take it over has had its attempt cut short:
                # the next attempt's, not yet begun anywhere, is no loss.
                cut = [e for e in losses.interrupted if e.subtask_id not in self._reassigning]
                if cut:
                    log.warning("worker_lost", subtasks=[e.subtask_id for e in cut])
                    await journal.append(cut)
                for sid in losses.reassign:
                    if sid not in self._reassigning:
                        self._reassigning.add(sid)
                        nursery.start_soon(self._reassign, journal, sid)
                for sid in set(losses.waiting) - self._told_waiting:
                    log.warning("waiting_for_lost_worker", subtask_id=sid)
                self._told_waiting = set(losses.waiting)

    async def watch_stop_requests(self, journal: Journal) -> None:
        """Until cancelled: each stop asked of this owner from another host (`kairo-orch
        stop` there, which cannot signal it) is recorded as a signal's would be."""
        while True:
            await trio.sleep(LOOK_FOR_STOPS_S)
            try:
                requests = await trio.to_thread.run_sync(
                    self._store.take_stop_requests, journal.execution_id, journal.owner
                )
            except EnvironmentProblem as problem:  # waited out: the next look
                log.warning("stop_requests_unread", error=problem.message)
                continue
            for request in requests:
                already = journal.state.stop
                if journal.state.ended is not None or already == "now" or already == request.mode:
                    continue  # asked already: a 2nd graceful request is not made a `--now`
                now = " --now" if request.mode == "now" else ""
                source = f"kairo-orch stop{now} on {request.host}"
                await journal.append(
                    [ev.StopRequested(mode=request.mode, source=source, at=time.time())]
                )

    async def _reassign(self, journal: Journal, sid: str) -> None:
        try:
            assigned = await self._assign(journal, sid)
            log.warning("subtask_reassigned", subtask_id=sid, host=assigned.host)
        finally:
            self._reassigning.discard(sid)

    async def _assign(self, journal: Journal, sid: str) -> ev.SubtaskAssigned:
        async with self._assigning:  # one at a time: each counts the slots the others took
            while True:
                try:
                    rows = await trio.to_thread.run_sync(self._store.list_workers)
                except EnvironmentProblem as problem:  # waited out, as appends are
                    log.warning("workers_unread", error=problem.message)
                    rows = []
                offers = [
                    Offer(row.worker_id, row.host, row.slots)
                    for row in rows
                    if row.alive and row.remote == self.remote_url
                ]
                chosen = choose_worker(offers, busy_slots(journal.state))
                if chosen is not None:
                    break
                await trio.sleep(WAIT_FOR_WORKER_S)
            assigned = ev.SubtaskAssigned(
                subtask_id=sid,
                worker_id=chosen.worker_id,
                host=chosen.host,
                epoch=journal.state.epoch + 1,
            )
            await journal.append([assigned])
            return assigned

    async def _outcome(
        self, journal: Journal, command: cmd.Command, epoch: int, command_id: int
    ) -> Outcome | None:
        while True:
            try:
                outcome = await trio.to_thread.run_sync(self._store.command_outcome, command_id)
            except EnvironmentProblem as problem:  # the store is waited out, as appends are
                log.warning("command_outcome_unread", error=problem.message)
                outcome = None
            if _stale(journal.state, command, epoch):
                return None
            if outcome is not None and outcome.state in ("done", "failed"):
                return outcome
            await trio.sleep(POLL_S)

    async def published(self, before: ExecutionState, command: cmd.Command) -> None:
        """After a step that may have moved the integration branch: the remote's, leased
        against the head the log recorded before it. A push that fails leaves the workers
        an older start: logged, the merge stands (a later push takes it along)."""
        if not isinstance(command, _MOVES_INTEGRATION):
            return
        branch = before.created.integration_branch
        started = time.monotonic()
        head = (await git("rev-parse", branch_ref(branch), cwd=self._repo)).stdout.strip()
        if head == before.integration_head:
            return
        try:
            await push_leased(self._repo, self.remote_url, branch, head, before.integration_head)
        except StepFailed as failed:
            log.error("integration_not_pushed", error=failed.message)  # noqa: TRY400
            return
        log.info("integration_pushed", head=head, seconds=round(time.monotonic() - started, 3))


def _stale(state: ExecutionState, command: cmd.Command, epoch: int) -> bool:
    """Whether a command's outcome no longer counts: its subtask was assigned anew, or
    the attempt it is about was recorded interrupted (its worker lost)."""
    assignment = state.assignments.get(command.subtask_id)
    if assignment is None or assignment.epoch != epoch:
        return True
    attempts = state.subtask(command.subtask_id).attempts
    return bool(command.attempt) and any(
        a.number == command.attempt and a.interrupted for a in attempts
    )
