"""The real ports (ports.py): thin adapters over the git, tmux and process functions the
runtime called directly before, with the same arguments, so that nothing behaves
otherwise for going through a port."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio

from orchestrator.git import history, recovery, refs, resolution
from orchestrator.git.commit import CommitOutcome, commit_all
from orchestrator.git.invocation import git
from orchestrator.git.merge import MergeOutcome, merge_branch
from orchestrator.git.repo import Identity
from orchestrator.git.resolution import CommittedResolution
from orchestrator.git.worktree_look import WorktreeChange, conflicts_with, worktree_change
from orchestrator.runtime import attempts, cgroups, process_groups, processes
from orchestrator.runtime.attempts import RunFiles
from orchestrator.runtime.processes import ShellResult
from orchestrator.tmux.server import TmuxServer


class GitRepository:
    """The user's repository at `root`, committed to as `identity`."""

    def __init__(self, root: Path, git_common_dir: Path, identity: Identity) -> None:
        self.root = root
        self.git_common_dir = git_common_dir
        self.identity = identity

    async def create_branch(self, name: str, commit: str) -> None:
        await refs.create_branch(self.root, name, commit)

    async def rev_parse(self, rev: str) -> str:
        return await refs.rev_parse(self.root, rev)

    async def ref_exists(self, ref: str) -> bool:
        found = await git("rev-parse", "--verify", "--quiet", ref, cwd=self.root, check=False)
        return found.returncode == 0

    async def branch_exists(self, name: str) -> bool:
        return await refs.branch_exists(self.root, name)

    async def update_ref(self, ref: str, new: str, old: str) -> None:
        await refs.update_ref(self.root, ref, new=new, old=old)

    async def tree_of(self, rev: str) -> str:
        return await refs.tree_of(self.root, rev)

    async def diffstat(self, base: str, head: str) -> history.DiffStat:
        return await history.diffstat(self.root, base, head)

    async def commits_between(self, base: str, head: str) -> list[history.CommitSummary]:
        return await history.commits_between(self.root, base, head)

    async def merge(
        self, *, target_ref: str, source_commit: str, message: str, made_on: str | None
    ) -> MergeOutcome:
        return await merge_branch(
            self.root,
            target_ref=target_ref,
            source_commit=source_commit,
            message=message,
            identity=self.identity,
            git_common_dir=self.git_common_dir,
            made_on=made_on,
        )

    async def tracked_files(self, worktree: Path, commit: str) -> list[str]:
        return await history.tracked_files(worktree, commit)

    async def commit_all(
        self,
        worktree: Path,
        *,
        message: str,
        trailers: Mapping[str, str],
        start_commit: str,
        expected_branch: str | None,
        leave_out: Sequence[str],
    ) -> CommitOutcome:
        return await commit_all(
            worktree,
            message=message,
            trailers=trailers,
            identity=self.identity,
            start_commit=start_commit,
            expected_branch=expected_branch,
            leave_out=leave_out,
        )

    async def save_worktree_state(
        self,
        worktree: Path,
        *,
        ref: str,
        safe_commit: str,
        message: str,
        leave_out: Sequence[str],
    ) -> str | None:
        return await recovery.save_worktree_state(
            worktree,
            ref=ref,
            safe_commit=safe_commit,
            message=message,
            identity=self.identity,
            leave_out=leave_out,
        )

    async def reset_worktree(
        self, worktree: Path, commit: str, *, branch: str, leave_out: Sequence[str]
    ) -> None:
        await recovery.reset_worktree(worktree, commit, branch=branch, leave_out=leave_out)


class TmuxPanes(TmuxServer):
    """The execution's tmux server, which also finds a pane by its runner's spec."""

    async def pane_running(self, spec_path: str) -> str | None:
        argv = [self.tmux_bin, *(["-L", self.socket_name] if self.socket_name else [])]
        argv += ["list-panes", "-a", "-F", "#{pane_id}\t#{pane_start_command}"]
        try:
            done = await trio.run_process(
                argv, capture_stdout=True, capture_stderr=True, check=False
            )
        except OSError:
            return None
        for line in done.stdout.decode(errors="replace").splitlines():
            pane_id, _, command = line.partition("\t")
            if spec_path in command:
                return pane_id
        return None


class LocalProcesses:
    """Processes of this host: shell commands in process groups (and checks in cgroups)
    of their own, and the runners in the agents' panes, found through /proc."""

    async def run_shell(
        self,
        command: str,
        *,
        cwd: Path,
        env: Mapping[str, str],
        timeout_s: float | None = None,
        stop: trio.Event | None = None,
        scope: processes.CheckScope | None = None,
        sandbox: processes.CheckSandbox | None = None,
    ) -> ShellResult:
        return await processes.run_shell(
            command, cwd=cwd, env=env, timeout_s=timeout_s, stop=stop, scope=scope, sandbox=sandbox
        )

    async def stop_group(self, pgid: int) -> None:
        await process_groups.stop_group(pgid)

    async def end_attempt(self, files: RunFiles, cgroup: str) -> None:
        await trio.to_thread.run_sync(cgroups.end_attempt_cgroup, files.started, cgroup)

    async def end_leftovers(self, execution_id: str, run_root: Path) -> None:
        for check in processes.CHECKS:
            await processes.end_marked({"KAIRO_EXECUTION_ID": execution_id, "KAIRO_CHECK": check})
        # The cgroups of the execution's checks, and of its attempts whose runners are gone
        # (those that run are waited for again, by recovery).
        running = set()
        for subtask_id, number in await trio.to_thread.run_sync(
            cgroups.attempt_cgroups_of, execution_id
        ):
            if await self.runner_state(RunFiles(run_root / subtask_id / str(number))) != "gone":
                running.add((subtask_id, number))
        await trio.to_thread.run_sync(
            functools.partial(cgroups.end_cgroups_of, execution_id, spare=frozenset(running))
        )

    async def runner_state(self, files: RunFiles) -> attempts.RunnerState:
        return await trio.to_thread.run_sync(attempts.runner_state, files)


class GitWorktreeLooks:
    """Looks at the worktrees of the repository at `root` (worktree_look.py)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def change(
        self,
        worktree: Path,
        *,
        start_commit: str,
        index: Path,
        leave_out: Sequence[str],
        last: WorktreeChange | None,
    ) -> WorktreeChange:
        return await worktree_change(
            worktree, start_commit=start_commit, index=index, leave_out=leave_out, last=last
        )

    async def conflicting_paths(self, tree: str, *, start_commit: str, onto: str) -> set[str]:
        found = await conflicts_with(self.root, tree, start_commit=start_commit, onto=onto)
        return {conflict.path for conflict in found}


class GitConflictResolutions:
    """Resolutions in the worktrees of a repository committed to as `identity`
    (git/resolution.py)."""

    def __init__(self, identity: Identity) -> None:
        self.identity = identity

    async def start_merge(
        self,
        worktree: Path,
        *,
        branch: str,
        start_commit: str,
        merged_in: str,
        leave_out: Sequence[str],
    ) -> None:
        await resolution.start_merge(
            worktree,
            branch=branch,
            start_commit=start_commit,
            merged_in=merged_in,
            leave_out=leave_out,
        )

    async def merge_base(self, worktree: Path, one: str, other: str) -> str:
        return await resolution.merge_base(worktree, one, other)

    async def text_at(self, worktree: Path, commit: str, path: str) -> str:
        return await resolution.text_at(worktree, commit, path)

    async def diff_of(self, worktree: Path, old: str, new: str, paths: Sequence[str]) -> str:
        return await resolution.diff_of(worktree, old, new, paths)

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
        return await resolution.commit_resolution(
            worktree,
            branch=branch,
            merged_in=merged_in,
            message=message,
            trailers=trailers,
            identity=self.identity,
            leave_out=leave_out,
        )

    async def keep(self, worktree: Path, ref: str, commit: str) -> None:
        await resolution.keep(worktree, ref, commit)

    async def take_explanation(self, path: Path) -> str:
        return await resolution.read_and_remove(path)
