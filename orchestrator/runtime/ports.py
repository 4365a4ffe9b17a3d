"""The ports a supervisor reaches the world through, besides its store: git, tmux and
processes (and where subtasks work, git/workspace_port.py). Edges holds one of each.

daemon.py gives it the real ones (edge_adapters.py: today's git, tmux and process
functions, unchanged); tests/world gives it an in-memory world, so that the loop,
effects, recovery and stop paths run in-process without git or tmux. Each method is what
the runtime asks, in the runtime's words, and no more: a second implementation has to
model every one of them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import trio

from orchestrator.core.guard import GuardBreached, Moment
from orchestrator.git.commit import CommitOutcome
from orchestrator.git.history import CommitSummary, DiffStat
from orchestrator.git.merge import MergeOutcome
from orchestrator.git.resolution import CommittedResolution
from orchestrator.git.worktree_look import WorktreeChange
from orchestrator.runtime.attempts import RunFiles, RunnerState
from orchestrator.runtime.guard import IntegrationMove
from orchestrator.runtime.processes import CheckSandbox, CheckScope, ShellResult
from orchestrator.tmux.layout import PaneRef

if TYPE_CHECKING:
    from orchestrator.runtime.journal import Journal


class Repository(Protocol):
    """The user's repository: its refs, its commits, and its subtasks' worktrees' commits.
    Who commits (the identity) is the repository's own business."""

    async def create_branch(self, name: str, commit: str) -> None:
        """Raises git.refs.BranchExists when a branch of that name is there."""
        ...

    async def rev_parse(self, rev: str) -> str: ...

    async def ref_exists(self, ref: str) -> bool: ...

    async def branch_exists(self, name: str) -> bool: ...

    async def update_ref(self, ref: str, new: str, old: str) -> None:
        """Compare-and-swap; StepFailed when `ref` is no longer at `old`."""
        ...

    async def tree_of(self, rev: str) -> str: ...

    async def diffstat(self, base: str, head: str) -> DiffStat: ...

    async def commits_between(self, base: str, head: str) -> list[CommitSummary]: ...

    async def merge(
        self, *, target_ref: str, source_commit: str, message: str, made_on: str | None
    ) -> MergeOutcome:
        """A merge commit of `source_commit` onto `target_ref`, made without a checkout."""
        ...

    async def tracked_files(self, worktree: Path, commit: str) -> list[str]: ...

    async def commit_all(
        self,
        worktree: Path,
        *,
        message: str,
        trailers: Mapping[str, str],
        start_commit: str,
        expected_branch: str | None,
        leave_out: Sequence[str],
    ) -> CommitOutcome: ...

    async def save_worktree_state(
        self,
        worktree: Path,
        *,
        ref: str,
        safe_commit: str,
        message: str,
        leave_out: Sequence[str],
    ) -> str | None:
        """`ref` at a commit of everything in `worktree`; None when nothing changed."""
        ...

    async def reset_worktree(
        self, worktree: Path, commit: str, *, branch: str, leave_out: Sequence[str]
    ) -> None:
        """The worktree on `branch` (by name, whatever its HEAD says), both at `commit`."""
        ...


class Panes(Protocol):
    """The execution's tmux server: agent panes, their titles, and `wait-for` wake-ups."""

    async def open_agent_pane(
        self,
        session: str,
        *,
        title: str,
        command: Sequence[str],
        cwd: Path,
        max_parallel: int | None = None,
        recyclable: Mapping[str, str] | None = None,
    ) -> PaneRef:
        """With `max_parallel`, the agents' windows are kept to those that many agents
        need and one more: one of the `recyclable` panes (of ended attempts, oldest first:
        each id and its runner's spec) is closed to make room where every window is full."""
        ...

    async def close_panes(self, session: str, panes: Mapping[str, str]) -> None:
        """Close these panes (each id and its runner's spec, which its command must name:
        ids are reused by a tmux server started again); one already gone is no error."""
        ...

    async def has_session(self, name: str) -> bool: ...

    async def set_pane_title(self, pane_id: str, names: str, title: str) -> None:
        """Retitle this pane if its command names `names` (its runner's spec): ids are
        reused by a tmux server started again. One gone is no error."""
        ...

    async def wait_for(self, channel: str) -> None: ...

    async def signal(self, channel: str) -> None: ...

    async def release_waiters(self, channel_prefix: str) -> int: ...

    async def pane_running(self, spec_path: str) -> str | None:
        """The pane whose command names this runner spec, if there is one."""
        ...


class Processes(Protocol):
    """The plan's shell commands, and the agents' runners and what they hold."""

    async def run_shell(
        self,
        command: str,
        *,
        cwd: Path,
        env: Mapping[str, str],
        timeout_s: float | None = None,
        stop: trio.Event | None = None,
        scope: CheckScope | None = None,
        sandbox: CheckSandbox | None = None,
    ) -> ShellResult:
        """With `scope` (a check's), nothing the command started runs once it returns;
        with `sandbox`, it runs inside that."""
        ...

    async def stop_group(self, pgid: int) -> None:
        """Return once nothing of the process group runs any more."""
        ...

    async def end_attempt(self, files: RunFiles, cgroup: str) -> None:
        """End whatever still runs in the attempt's cgroup (named `cgroup`, if its runner
        made one), and remove it."""
        ...

    async def end_leftovers(self, execution_id: str, run_root: Path) -> None:
        """End what a dead supervisor of the execution left running: the checks it started
        (which would run again beside them), and the cgroups of its attempts whose runners
        are gone (run_root: where their run folders are)."""
        ...

    async def runner_state(self, files: RunFiles) -> RunnerState:
        """What the runner of the attempt whose files these are is doing: running its
        agent, running without it (before it, or ending), or gone."""
        ...


class WorktreeLooks(Protocol):
    """Looks at running subtasks' worktrees for overlaps (runtime/overlap_watch.py), which
    never touch the agent's own index."""

    async def change(
        self,
        worktree: Path,
        *,
        start_commit: str,
        index: Path,
        leave_out: Sequence[str],
        last: WorktreeChange | None,
    ) -> WorktreeChange:
        """The worktree's files as a tree, and the paths changed since `start_commit`;
        `index` is the look's own index file, kept from one look to the next, and `last`
        what the last look through it found."""
        ...

    async def conflicting_paths(self, tree: str, *, start_commit: str, onto: str) -> set[str]:
        """The paths of `tree` (from `start_commit`) that would conflict merged into `onto`."""
        ...


class ConflictResolutions(Protocol):
    """An agent's resolution of a merge conflict in a subtask's worktree (runtime/resolution.py):
    the merge left for it, what the check reads, and the resolution committed as a merge."""

    async def start_merge(
        self,
        worktree: Path,
        *,
        branch: str,
        start_commit: str,
        merged_in: str,
        leave_out: Sequence[str],
    ) -> None:
        """`merged_in` merged into the worktree at `start_commit`, markers left; idempotent."""
        ...

    async def merge_base(self, worktree: Path, one: str, other: str) -> str: ...

    async def text_at(self, worktree: Path, commit: str, path: str) -> str:
        """The file at `commit` as text ("" where it is not, or is not text)."""
        ...

    async def diff_of(self, worktree: Path, old: str, new: str, paths: Sequence[str]) -> str: ...

    async def commit(
        self,
        worktree: Path,
        *,
        branch: str,
        merged_in: str,
        message: str,
        trailers: Mapping[str, str],
        leave_out: Sequence[str],
    ) -> CommittedResolution:
        """Everything the agent left, committed on `branch`: as the merge, where it is
        under way."""
        ...

    async def keep(self, worktree: Path, ref: str, commit: str) -> None: ...

    async def take_explanation(self, path: Path) -> str:
        """The agent's explanation file, removed so that it is never committed."""
        ...


class Guard(Protocol):
    """The guard of what the user owns (runtime/guard.py): `NoGuard` where nothing of
    theirs is at hand (the in-memory world, a worker's clone)."""

    async def begin(self, journal: Journal, triggers: Collection[str] = ()) -> None:
        """Take the record, or read it back and compare (a resume)."""
        ...

    async def compare(
        self, moment: Moment, triggers: Collection[str] = ()
    ) -> GuardBreached | None: ...

    def moving_integration(self, moment: Moment) -> AbstractAsyncContextManager[IntegrationMove]:
        """Compare, then hold the guard while the caller moves the integration branch."""
        ...

    async def settled(self, subtask_id: str, attempt: int, worktree: Path) -> None:
        """The worktree as its attempt's commit or check left it, to be watched."""
        ...
