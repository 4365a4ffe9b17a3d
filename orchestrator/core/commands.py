"""The commands `decide` gives the edge: each a step that needs the world (git, tmux,
processes), carried out by runtime/effects.py, which answers with events.

A command is identified by its `key`: the supervisor drops one whose key is already under
way, which is what lets `decide` be called after every event.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.core import events as ev


@dataclass(frozen=True)
class Command:
    subtask_id: str = ""
    attempt: int = 0

    @property
    def key(self) -> tuple[str, str, int]:
        return (type(self).__name__, self.subtask_id, self.attempt)


@dataclass(frozen=True)
class CreateIntegrationBranch(Command):
    pass


@dataclass(frozen=True)
class PrepareWorkspace(Command):
    start_commit: str = ""


@dataclass(frozen=True)
class OpenPane(Command):
    """Write the attempt's files and start its runner in a tmux pane."""


@dataclass(frozen=True)
class AwaitAttempt(Command):
    pass


@dataclass(frozen=True)
class CommitAttempt(Command):
    pass


@dataclass(frozen=True)
class RunVerify(Command):
    pass


@dataclass(frozen=True)
class KillAttempt(Command):
    """EMERGENCY_STOP: the agent's process group gets SIGTERM, then SIGKILL."""


@dataclass(frozen=True)
class MergeSubtask(Command):
    """Merge the subtask, then each of `then` in that order: those accepted right behind
    it in the merge queue go in the same step, so that merging keeps up with many agents."""

    then: tuple[str, ...] = ()

    @property
    def subtask_ids(self) -> tuple[str, ...]:
        return (self.subtask_id, *self.then)


@dataclass(frozen=True)
class CheckIntegration(Command):
    """Run `integration_verify` on the merge of `subtask_id`, the last of `subtask_ids`:
    the first merges waiting for a check (merge_queue.py)."""

    subtask_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class UndoMerges(Command):
    """Move the integration branch back to the last commit whose check passed: the first
    merge waiting broke the check, or a stop cut the check short."""


@dataclass(frozen=True)
class ReleaseWorkspace(Command):
    pass


@dataclass(frozen=True)
class RunReviewStep(Command):
    """Push the result, or open its pull request: once everything has settled."""

    step: ev.ReviewStep = "push"

    @property
    def key(self) -> tuple[str, str, int]:
        return (type(self).__name__, self.step, 0)


@dataclass(frozen=True)
class Decision:
    events: tuple[ev.ExecutionEvent, ...] = ()
    commands: tuple[Command, ...] = ()
