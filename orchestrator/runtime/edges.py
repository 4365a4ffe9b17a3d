"""What a supervisor of one execution talks to at the edge, and where its attempts live."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import trio

from orchestrator.core.decide import attempt_run_dir
from orchestrator.core.secrets import Redactor
from orchestrator.core.state import ExecutionState
from orchestrator.git.workspace_port import WorkspaceProvider
from orchestrator.runtime.attempts import RunFiles
from orchestrator.runtime.guard import NoGuard
from orchestrator.runtime.ports import (
    ConflictResolutions,
    Guard,
    Panes,
    Processes,
    Repository,
    WorktreeLooks,
)


@dataclass
class Edges:
    """Everything at the edge that a supervisor of one execution talks to: ports
    (ports.py), never git, tmux or processes directly, so that a test can give it a
    world of its own (tests/world)."""

    #: Where the plan's review steps run, and where `copy_files` copies from.
    repo_root: Path
    workspaces: WorkspaceProvider
    repository: Repository
    panes: Panes
    processes: Processes
    environment: Mapping[str, str]  # of the command that started or resumed the supervisor
    #: Set once `kairo-orch stop --now` is in the log: a check under way ends at once.
    stop_now: trio.Event = field(default_factory=trio.Event)
    #: Opens the execution's tmux session again, live view and all, where it went away.
    open_session: Callable[[], Awaitable[None]] | None = None
    #: Looks at running worktrees for overlaps; none, none are looked for.
    looks: WorktreeLooks | None = None
    #: Where a conflict is resolved by an agent (`resolve_conflicts`): None in the in-memory
    #: world, where such a step fails.
    resolutions: ConflictResolutions | None = None
    #: Compares what the user owns with its record, after every attempt and check and
    #: before every review step (runtime/guard.py).
    guard: Guard = field(default_factory=NoGuard)
    #: Cuts the secrets of `environment` out of what agents and checks print.
    redactor: Redactor = field(init=False)

    def __post_init__(self) -> None:
        self.redactor = Redactor.of(self.environment)


def integration_checkout(state: ExecutionState) -> Path:
    """Where `integration_verify` runs: no subtask id starts with a dot, so none collides."""
    return Path(state.created.worktree_root) / ".integration"


def attempt_files(state: ExecutionState, subtask_id: str, attempt: int) -> RunFiles:
    return RunFiles(Path(attempt_run_dir(state.created.run_root, subtask_id, attempt)))


def command_variables(state: ExecutionState, subtask_id: str, worktree: Path) -> dict[str, str]:
    """The KAIRO_* that the plan's own commands run in a subtask's name (`setup`,
    `integration_verify`) get, to say where they are (check_sandbox.py gives the rest of
    their environment)."""
    return {
        "KAIRO_EXECUTION_ID": state.execution_id,
        "KAIRO_SUBTASK_ID": subtask_id,
        "KAIRO_WORKTREE": str(worktree),
    }
