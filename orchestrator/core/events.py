"""Every fact the supervisor records, as frozen models in one discriminated union.

The log is the interface: a new behaviour is a new event and a branch of the fold. Each
event's `type` is its `event_type` in the store; the rest of the model is the payload.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from orchestrator.core.event_base import EventModel, MaybePrinted, Printed
from orchestrator.core.guard import GuardBreached as GuardBreached
from orchestrator.core.guard import GuardRecorded as GuardRecorded
from orchestrator.core.merge_events import Conflict as Conflict
from orchestrator.core.merge_events import DroppedHunk as DroppedHunk
from orchestrator.core.merge_events import IntegrationChecked as IntegrationChecked
from orchestrator.core.merge_events import MergesUndone as MergesUndone
from orchestrator.core.merge_events import OverlapFound as OverlapFound
from orchestrator.core.merge_events import OverlapKind as OverlapKind
from orchestrator.core.merge_events import ResolutionCheck as ResolutionCheck
from orchestrator.core.merge_events import ResolutionDeclined as ResolutionDeclined
from orchestrator.core.merge_events import ResolutionStarted as ResolutionStarted
from orchestrator.core.os_strings import OsStr
from orchestrator.core.plan import ResolvedPlan
from orchestrator.core.reasons import Reason
from orchestrator.core.upcasting import upcast

#: The shape of every payload written now; bumped with an upcaster (upcasting.py).
#: 2: every `reason` is a Reason (a code and a detail), no longer a sentence.
#: 3: `attempt_committed` says which paths the attempt and its branch changed.
#: 4: a name or text from git or an agent whose bytes are not UTF-8 is `{"base64": ...}`
#:    (core/os_strings.py); nothing else changed, so no upcaster: a version 3 payload
#:    is one of version 4, and an older kairo-orch refuses a log that may hold one.
#: 5: `attempt_exited` says which of the runner's records another process wrote.
#: 6: `guard_recorded` and `guard_breached`: the guard of what the user owns (guard.py).
#: 7: a resumed `supervisor_started` says when the supervisor before it was last alive.
#: 8: `execution_created`'s plan has `sandbox.network` per step (none, endpoint or all),
#:    where it was true or false.
SCHEMA_VERSION = 8

EndStatus = Literal["COMPLETED", "FAILED", "STOPPED"]
RunnerRecord = Literal["exit_record", "output_log"]


class ExecutionCreated(EventModel):
    type: Literal["execution_created"] = "execution_created"
    plan: ResolvedPlan
    plan_path: str
    repo_root: str
    git_common_dir: str
    base_commit: str
    integration_branch: str
    tmux_socket: str | None
    tmux_session: str
    worktree_root: str
    run_root: str  # where runners leave their specs, logs and exit records


class SupervisorStarted(EventModel):
    type: Literal["supervisor_started"] = "supervisor_started"
    pid: int
    host: str
    resumed: bool = False
    at: float = 0.0  # unix time: the execution's wall clock runs from its first start
    # Resumed: unix time the supervisor before last wrote the execution's row (its last
    # heartbeat, or a later append), which the resume's claim wrote over: no supervisor
    # ran from then on. None for a first start, and where the log does not say (before
    # schema version 7): the last event before is all there is to go by.
    previous_heartbeat_at: float | None = None


class IntegrationBranchCreated(EventModel):
    type: Literal["integration_branch_created"] = "integration_branch_created"
    branch: str
    commit: str


class SubtaskScheduled(EventModel):
    """The decision to start a subtask, recorded before its worktree exists."""

    type: Literal["subtask_scheduled"] = "subtask_scheduled"
    subtask_id: str
    start_commit: str


class WorkspaceCreated(EventModel):
    type: Literal["workspace_created"] = "workspace_created"
    subtask_id: str
    path: str
    branch: str
    commit: str
    copied: tuple[OsStr, ...] = ()  # by `worktree.copy_files`: never part of the agent's work


class AttemptStarted(EventModel):
    """The decision to run attempt N, recorded before anything runs: after a crash, an
    attempt with this event and no result is looked for in the world, never just rerun."""

    type: Literal["attempt_started"] = "attempt_started"
    subtask_id: str
    attempt: int
    idempotency_key: str
    run_dir: str
    start_commit: str  # the last safe point: the branch head the attempt starts from


class AttemptPaneOpened(EventModel):
    type: Literal["attempt_pane_opened"] = "attempt_pane_opened"
    subtask_id: str
    attempt: int
    pane_id: str  # "" when recovery found the runner but not its pane
    at: float = 0.0  # unix time the runner was started: the attempt's timeout runs from here
    resumed_session: OsStr | None = None  # the agent's session this attempt continues


class Refusal(BaseModel):
    """A tool use the agent program refused its model (Claude Code's permission_denials)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: OsStr  # "Edit", "Bash", ...
    target: Printed  # the file edited, the command run
    message: Printed = ""  # what the program told the model


class AttemptExited(EventModel):
    type: Literal["attempt_exited"] = "attempt_exited"
    subtask_id: str
    attempt: int
    exit_code: int
    output_tail: Printed = ""
    tokens: int = 0  # from the attempt's usage file, input and output summed
    input_tokens: int = 0  # of which input (fresh, or written to a cache) ...
    output_tokens: int = 0  # ... and output
    cost_usd: float = 0.0  # likewise, for agents that report it
    session_id: OsStr | None = None  # the agent's conversation, for the next attempt to resume
    # How the agent program said its run ended, from its usage line (agents/usage.py):
    # e.g. "success", "error_max_turns", "truncated", "server_error", "token_budget";
    # None when it says nothing.
    result: MaybePrinted = None
    is_error: bool = False  # it said the run went wrong, whatever its exit status
    api_retries: int = 0  # requests the program retried (429, 529, 5xx)
    api_status: int | None = None  # the HTTP status of the last API error it met
    refusals: tuple[Refusal, ...] = ()
    summary: Printed = ""  # the agent's last message: its own account of the work
    # The runner's records another process wrote while it ran (its run directory is the
    # user's, which any agent may write): an exit record while the agent still ran (not
    # taken as its exit), or the output log changed from what the runner wrote.
    written_by_others: tuple[RunnerRecord, ...] = ()


class VerifyFinished(EventModel):
    """The plan's `verify` gate ran in the worktree after an attempt."""

    type: Literal["verify_finished"] = "verify_finished"
    subtask_id: str
    attempt: int
    exit_code: int
    output_tail: Printed = ""


class AttemptInterrupted(EventModel):
    """Recovery found the attempt's process gone with no result recorded.

    Its changes since the safe point were saved on `recovery_ref` and its worktree reset
    to `start_commit`. With `rerun`, another attempt follows; without, the subtask is
    stopped until `resume --rerun-interrupted`.
    """

    type: Literal["attempt_interrupted"] = "attempt_interrupted"
    subtask_id: str
    attempt: int
    recovery_ref: str | None
    rerun: bool
    tokens: int = 0  # what its stream had shown used, counted against the budgets
    # What cut it short: its supervisor stopped (found by a resume), or its pane went away
    # while its supervisor watched (the tmux server killed, the pane closed), or the
    # worker it ran on was lost (its lease lapsed: `placement: workers`).
    cause: Literal["supervisor", "pane", "worker"] = "supervisor"


class SubtaskRerun(EventModel):
    """`resume --rerun-interrupted`: a subtask stopped by an interruption runs again."""

    type: Literal["subtask_rerun"] = "subtask_rerun"
    subtask_id: str


class AttemptCommitted(EventModel):
    """A safe point: the attempt's work is on its branch at `head_commit`."""

    type: Literal["attempt_committed"] = "attempt_committed"
    subtask_id: str
    attempt: int
    head_commit: str
    changed: bool
    files_changed: int = 0
    tree: str = ""  # of head_commit: two attempts that leave the same tree made no progress
    recovery_ref: str | None = None  # a stopped attempt's work, saved instead of committed
    in_submodules: tuple[OsStr, ...] = ()  # submodules it wrote into, which no commit records
    # Since version 3 (None in older logs: not recorded): the paths the attempt changed,
    # and those its subtask's branch has changed since the subtask started.
    paths: tuple[OsStr, ...] | None = None
    branch_paths: tuple[OsStr, ...] | None = None
    resolution: ResolutionCheck | None = None  # set for an attempt at resolving a conflict


class AttemptJudged(EventModel):
    type: Literal["attempt_judged"] = "attempt_judged"
    subtask_id: str
    attempt: int
    accepted: bool
    reason: Reason | None = None  # why it was not accepted
    feedback: Printed = ""  # for the next attempt: what failed and where
    final: bool = True  # False: another attempt follows (if the constraints allow)


class SubtaskMerged(EventModel):
    type: Literal["subtask_merged"] = "subtask_merged"
    subtask_id: str
    merge_commit: str
    previous_commit: str
    head_commit: str
    changed_paths: tuple[OsStr, ...]
    diffstat: OsStr
    insertions: int = 0
    deletions: int = 0


class IntegrationVerified(EventModel):
    """The plan's `integration_verify` ran on the integration branch after a merge.

    On a failure the merge was undone: the branch was moved back to `restored_commit`
    (the merge's parent) before this was recorded, and the subtask's branch is kept.
    """

    type: Literal["integration_verified"] = "integration_verified"
    subtask_id: str
    merge_commit: str
    exit_code: int
    output_tail: Printed = ""
    restored_commit: str | None = None  # set when the merge was undone


class SubtaskConflicted(EventModel):
    type: Literal["subtask_conflicted"] = "subtask_conflicted"
    subtask_id: str
    head_commit: str
    conflicts: tuple[Conflict, ...]


ActionName = Literal["WARN_CONTINUE", "GRACEFUL_EXIT", "EMERGENCY_STOP"]


class ConstraintViolated(EventModel):
    """A resource constraint answered more than ALLOW (ALLOW is not recorded)."""

    type: Literal["constraint_violated"] = "constraint_violated"
    constraint: str
    action: ActionName
    reason: Reason  # timeout, max_attempts, token_budget, or a user constraint's own
    subtask_id: str | None = None
    attempt: int | None = None


class SubtaskSkipped(EventModel):
    type: Literal["subtask_skipped"] = "subtask_skipped"
    subtask_id: str
    reason: Reason
    dependency: str | None = None  # the dependency that did not merge


class SubtaskFailed(EventModel):
    """A failure outside a judged attempt (the worktree or pane could not be made)."""

    type: Literal["subtask_failed"] = "subtask_failed"
    subtask_id: str
    reason: Reason


StopMode = Literal["graceful", "now"]


class StopRequested(EventModel):
    """`kairo-orch stop` (or SIGTERM) reached the supervisor: nothing new starts.

    graceful: running attempts finish and are judged, accepted work is merged. now: the
    running agents are killed as well, their partial work set aside on refs. A request is
    addressed to the supervisor that recorded it: a `resume` begins without it.
    """

    type: Literal["stop_requested"] = "stop_requested"
    mode: StopMode
    source: str  # "kairo-orch stop", "SIGTERM", ...
    at: float = 0.0


class SubtaskStopped(EventModel):
    """A subtask that a stop kept from starting (or from another attempt)."""

    type: Literal["subtask_stopped"] = "subtask_stopped"
    subtask_id: str
    reason: Reason


class WorkspaceReleased(EventModel):
    type: Literal["workspace_released"] = "workspace_released"
    subtask_id: str


ReviewStep = Literal["push", "pull_request"]


class ReviewStepStarted(EventModel):
    """Recorded before a review step runs: a pull request command is not idempotent, and
    one whose outcome a crash lost is never run again (store.md)."""

    type: Literal["review_step_started"] = "review_step_started"
    step: ReviewStep


class ReviewStepFinished(EventModel):
    type: Literal["review_step_finished"] = "review_step_finished"
    step: ReviewStep
    exit_code: int | None  # None: not run, or its outcome is unknown (see output_tail)
    output_tail: Printed = ""


class ExecutionEnded(EventModel):
    type: Literal["execution_ended"] = "execution_ended"
    status: EndStatus


class ExecutionReopened(EventModel):
    """An ended execution goes on: `resume --rerun-interrupted` of interrupted subtasks."""

    type: Literal["execution_reopened"] = "execution_reopened"


class SubtaskAssigned(EventModel):
    """`placement: workers`: the subtask's commands go to a worker on another host, from
    now on and until a later assignment. `epoch` grows by one with every assignment of
    the execution: the owner appends a worker's results only for the current one."""

    type: Literal["subtask_assigned"] = "subtask_assigned"
    subtask_id: str
    worker_id: str
    host: str
    epoch: int


ExecutionEvent = Annotated[
    ExecutionCreated
    | SupervisorStarted
    | IntegrationBranchCreated
    | SubtaskScheduled
    | WorkspaceCreated
    | AttemptStarted
    | AttemptPaneOpened
    | AttemptExited
    | AttemptInterrupted
    | SubtaskRerun
    | AttemptCommitted
    | VerifyFinished
    | AttemptJudged
    | SubtaskMerged
    | IntegrationVerified
    | IntegrationChecked
    | MergesUndone
    | SubtaskConflicted
    | SubtaskSkipped
    | ConstraintViolated
    | SubtaskFailed
    | StopRequested
    | SubtaskStopped
    | WorkspaceReleased
    | ReviewStepStarted
    | ReviewStepFinished
    | ExecutionEnded
    | ExecutionReopened
    | ResolutionStarted
    | ResolutionDeclined
    | OverlapFound
    | SubtaskAssigned
    | GuardRecorded
    | GuardBreached,
    Field(discriminator="type"),
]

_ADAPTER: TypeAdapter[ExecutionEvent] = TypeAdapter(ExecutionEvent)


def subtasks_named(event: ExecutionEvent) -> tuple[str, ...]:
    """The subtasks an event is about: one, several (the merge queue's), or none."""
    several: tuple[str, ...] | None = getattr(event, "subtask_ids", None)
    if several is not None:
        return (*several, *getattr(event, "merge_again", ()))
    one: str | None = getattr(event, "subtask_id", None)
    return () if one is None else (one,)


def to_record(event: ExecutionEvent) -> tuple[str, dict[str, Any]]:
    """(event_type, payload) as the store keeps them."""
    payload = event.model_dump(mode="json", by_alias=True, exclude={"type"})
    return event.type, payload


def from_record(
    event_type: str, payload: dict[str, Any], schema_version: int = SCHEMA_VERSION
) -> ExecutionEvent:
    """The event a stored row holds, written at `schema_version` (upcasting.py)."""
    current = upcast(event_type, schema_version, payload, current=SCHEMA_VERSION)
    return _ADAPTER.validate_python({"type": event_type, **current})
