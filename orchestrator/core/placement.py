"""`placement: workers`: which commands a worker carries out, how a command travels to it
through the store, and which worker a subtask is given.

The owner (the execution's supervisor) stays the only writer of the log; a worker only
carries out the commands of the subtasks assigned to it and answers with their events,
which the owner appends (runtime/placement.py). Merges, integration checks and review
steps stay with the owner: they write the integration branch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import ACTIVE

#: The commands that run where the subtask's worktree is: on its worker.
PLACED: tuple[type[cmd.Command], ...] = (
    cmd.PrepareWorkspace,
    cmd.OpenPane,
    cmd.AwaitAttempt,
    cmd.KillAttempt,
    cmd.CommitAttempt,
    cmd.RunVerify,
    cmd.ReleaseWorkspace,
)
_BY_NAME = {kind.__name__: kind for kind in PLACED}


def placed(command: cmd.Command) -> bool:
    return isinstance(command, PLACED)


def command_record(command: cmd.Command) -> dict[str, Any]:
    """The command as the store keeps it: its type and fields."""
    if not placed(command):
        raise ValueError(f"{type(command).__name__} is not carried out by a worker")
    return {"type": type(command).__name__, **dataclasses.asdict(command)}


def command_from_record(record: Mapping[str, Any]) -> cmd.Command:
    fields = dict(record)
    kind = _BY_NAME.get(fields.pop("type", ""))
    if kind is None:
        raise ValueError(f"no worker carries out a command of type {record.get('type')!r}")
    return kind(**fields)


@dataclass(frozen=True, slots=True)
class Offer:
    """A live worker of the plan's remote, as the owner sees it when placing a subtask."""

    worker_id: str
    host: str
    slots: int


def choose_worker(offers: Sequence[Offer], busy: Mapping[str, int]) -> Offer | None:
    """The live worker with the most free slots (`busy`: subtasks it holds, by worker id);
    ties go to the first offered. None: every slot is taken, or no worker lives."""
    free = [
        (offer.slots - busy.get(offer.worker_id, 0), -i, offer) for i, offer in enumerate(offers)
    ]
    room = [entry for entry in free if entry[0] > 0]
    return max(room, key=lambda entry: entry[:2])[2] if room else None


def busy_slots(state: ExecutionState) -> dict[str, int]:
    """How many subtasks each worker holds: assigned to it and not yet settled."""
    busy: dict[str, int] = {}
    for sid, assignment in state.assignments.items():
        if state.subtask(sid).state in ACTIVE:
            busy[assignment.worker_id] = busy.get(assignment.worker_id, 0) + 1
    return busy


@dataclass(frozen=True, slots=True)
class Losses:
    """What the owner does about the subtasks of workers it lost (their leases lapsed)."""

    #: Running attempts cut short: rerun (elsewhere) if their agents are idempotent, else
    #: their subtasks stop, as a resume finds an interrupted attempt.
    interrupted: tuple[ev.AttemptInterrupted, ...] = ()
    #: Subtasks to assign to another worker: with their work so far on the remote (their
    #: last commit, pushed), or with nothing done yet.
    reassign: tuple[str, ...] = ()
    #: Subtasks whose attempt ended and is not committed: its work is on the lost host
    #: only, so they wait for it to come back.
    waiting: tuple[str, ...] = ()


def after_losing(state: ExecutionState, alive: Set[str]) -> Losses:
    """What becomes of the subtasks under way on workers not in `alive`."""
    interrupted: list[ev.AttemptInterrupted] = []
    reassign: list[str] = []
    waiting: list[str] = []
    for sid, assignment in state.assignments.items():
        view = state.subtask(sid)
        if assignment.worker_id in alive or view.state not in ACTIVE:
            continue
        attempt = view.current_attempt
        if attempt is None or attempt.finished or attempt.committed:
            reassign.append(sid)  # nothing under way, or its work is on the remote
        elif attempt.exited or view.state != "running":
            waiting.append(sid)
        else:
            rerun = state.spec(sid).agent.idempotent
            interrupted.append(
                ev.AttemptInterrupted(
                    subtask_id=sid,
                    attempt=attempt.number,
                    recovery_ref=None,  # its uncommitted work was on the lost host
                    rerun=rerun,
                    cause="worker",
                )
            )
            if rerun:
                reassign.append(sid)
    return Losses(tuple(interrupted), tuple(reassign), tuple(waiting))
