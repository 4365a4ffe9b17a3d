"""What the use cases return: frozen, and light (no trio, no git), so that whoever renders
them imports only these."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.events import ReviewStep, StopMode


@dataclass(frozen=True)
class Launched:
    """An execution its new supervisor now runs."""

    execution_id: str
    plan_name: str
    subtasks: int
    integration_branch: str
    resumed: bool
    #: The log's last seq when it was handed over: an end after it is this run's.
    seq: int
    tmux_socket: str | None
    tmux_session: str


@dataclass(frozen=True)
class Interrupted:
    """An interrupted execution of the plan being started: resumed, not run again."""

    execution_id: str
    plan_name: str
    plan_path: Path


@dataclass(frozen=True)
class AlreadyEnded:
    """What `resume` or `stop` finds ended already."""

    execution_id: str
    status: str


@dataclass(frozen=True)
class FailedReviewStep:
    """A review step that failed: it changes no exit code, but is easy to miss."""

    step: ReviewStep
    exit_code: int


@dataclass(frozen=True)
class Ended:
    execution_id: str
    status: str  # COMPLETED, FAILED, STOPPED, ...
    merged: int
    subtasks: int
    failed_review_steps: tuple[FailedReviewStep, ...] = ()


@dataclass(frozen=True)
class SupervisorDied:
    """Its supervisor is gone before the end: the execution is paused, `resume` goes on."""

    execution_id: str
    status: str
    supervisor_log: Path


@dataclass(frozen=True)
class StopRecorded:
    """The request is in the log: what happens now follows from these."""

    execution_id: str
    mode: StopMode
    #: The agents running when it was asked: by the time it is recorded, a `--now` may
    #: already have seen some of them exit.
    running: int
    ended: str | None  # the execution's end, if it has ended since
    #: The log's last seq before the request: an end after it is the stop's.
    asked_at_seq: int


@dataclass(frozen=True)
class Verified:
    execution_id: str
    head_seq: int
    head_hash: str


@dataclass(frozen=True)
class ExecutionListed:
    execution_id: str
    plan: str
    status: str
    created_at: str
    subtasks: int
    merged: int


@dataclass(frozen=True)
class SparesKept:
    count: int
    bytes: int
    at_most_bytes: int  # a root's, KAIRO_SPARE_DISK


@dataclass(frozen=True)
class LeftHere:
    """What the repository holds beside its executions' logs."""

    #: Executions no log of this store knows, which left subtask branches here.
    unlogged: tuple[str, ...]
    spares: SparesKept | None  # None: none kept
