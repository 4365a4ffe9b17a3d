"""Workspaces: the directory and branch each subtask's agent works in.

`LocalWorktreeProvider` gives each subtask a linked `git worktree` of the user's
repository, on its own new branch. It writes only under the repository's git directory
(`worktrees/`, the new branch) and in the new directory; the user's checkout, index and
HEAD are never read for writing, let alone changed.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from orchestrator import kairo_dir
from orchestrator.errors import StepFailed
from orchestrator.git.checkout import check_out, detach, remove_untracked
from orchestrator.git.failed_fills import forget_branch_of_a_failed_switch, if_full
from orchestrator.git.invocation import git
from orchestrator.git.refs import BranchExists, branch_exists, is_full_oid, rev_parse
from orchestrator.git.repo import RepoPaths, discover_repo, error_context
from orchestrator.git.spare_pools import (
    count_spares,
    disk_usage,
    has_spares,
    place_to_add,
    pools_of,
    spare_pool,
)
from orchestrator.git.spare_setting import spare_bytes, spares_to_keep
from orchestrator.git.spare_worktrees import (
    SparesRemoved,
    detach_if_plain,
    finish_interrupted_move,
    move_worktree,
    put_aside,
    remove_spares,
    switch_spare,
    take_spare,
)
from orchestrator.git.workspace_port import Workspace, WorkspaceKind
from orchestrator.git.worktree_lock import WorktreeLock
from orchestrator.git.worktree_paths import prepare_target, resolve

#: How long cleanup after a failed or cancelled create may take before it is abandoned.
_ROLLBACK_TIMEOUT = 30.0


class LocalWorktreeProvider:
    """Worktrees of the repository at `repo_root`, one new branch each.

    `git worktree` commands run one at a time under the repository's `WorktreeLock`
    (worktree_lock.py: shared by every task and, through an flock, every process), and
    only the `--no-checkout` add runs under it (milliseconds); filling in the files runs in
    parallel, outside it. Whoever takes the lock first finishes a spare's move that a
    crash cut short (spare_worktrees.py), before git's next prune could lose it.

    A released worktree is kept as a spare in its root's pool (up to `spares_kept` of them,
    by default as many as KAIRO_SPARE_WORKTREES says), and a create in that root reuses one
    (spare_worktrees.py). A new worktree is added in the pool, under a name that says
    nothing of its subtask, and moved into place: git names its administrative directory
    after the place it was added at, and a spare serves many subtasks.

    Construct it at start-up: given a directory, it calls the synchronous `discover_repo`
    (milliseconds); given the repository's `RepoPaths`, nothing.
    """

    def __init__(
        self,
        repo: Path | RepoPaths,
        *,
        lock: WorktreeLock | None = None,
        spares_kept: int | None = None,
        spare_budget: int | None = None,
    ) -> None:
        paths = repo if isinstance(repo, RepoPaths) else discover_repo(repo)
        self.repo_root = paths.toplevel
        self._common_dir = paths.git_common_dir
        self._lock = lock or WorktreeLock.for_repository(paths.git_common_dir)
        self._journal = kairo_dir.move_journal(paths.git_common_dir)
        self._spares_kept = spares_to_keep(os.environ) if spares_kept is None else spares_kept
        self._spare_budget = spare_bytes(os.environ) if spare_budget is None else spare_budget

    async def create(self, subtask_id: str, branch: str, base_commit: str, path: Path) -> Workspace:
        with error_context(subtask_id=subtask_id, branch=branch):
            try:
                path, spare_waits = await trio.to_thread.run_sync(self._target, path)
            except StepFailed:
                # Something is there: after a crash, maybe a spare moved there and not yet
                # switched to its branch, which goes back before this create starts again.
                if not await self._put_back_a_spare_cut_short(path, branch):
                    raise
                path, spare_waits = await trio.to_thread.run_sync(self._target, path)
            # An oid needs no lookup (the add itself fails on a missing one); a name does.
            base = (
                base_commit
                if is_full_oid(base_commit)
                else await rev_parse(self.repo_root, base_commit)
            )
            try:
                if spare_waits and await self._reuse_spare(path, base, branch):
                    return Workspace(subtask_id, path, branch, base, WorkspaceKind.LOCAL)
                await self._add_worktree(path, base, "--detach")
                try:
                    await self._fill(switch_spare(path, branch, create_at=base, fresh=True))
                except BaseException as error:
                    # Said before the cleanup frees what the fill wrote.
                    full = await if_full(path) if isinstance(error, StepFailed) else ""
                    # Leave nothing half-made behind, so a retry can create it afresh; a
                    # cancellation must not skip the cleanup, but must still propagate.
                    with trio.CancelScope(shield=True), trio.move_on_after(_ROLLBACK_TIMEOUT):
                        await self._remove(path)
                        await forget_branch_of_a_failed_switch(self.repo_root, branch, base, error)
                    if full:
                        raise StepFailed(f"{error}{full}") from None
                    raise
            except BranchExists:
                raise StepFailed(f"branch {branch!r} already exists; it was not reused") from None
        return Workspace(subtask_id, path, branch, base, WorkspaceKind.LOCAL)

    async def adopt(self, subtask_id: str, branch: str, path: Path) -> Workspace | None:
        """Finish a `create` that a crash cut short, or None when there is nothing to finish.

        Only for a workspace whose creation was never recorded, so no agent has run in it:
        its files are (re)filled from its branch, which is where `create` left it.
        """
        with error_context(subtask_id=subtask_id, branch=branch):
            if not await branch_exists(self.repo_root, branch):
                return None
            path = await trio.to_thread.run_sync(resolve, path)
            # Not listed, or listed with its directory gone (deleted by hand): added anew,
            # git's stale record of it pruned first.
            added = path not in await self._listed() or not await trio.Path(path).is_dir()
            if added:
                if await trio.Path(path).exists():
                    raise StepFailed(f"{path} is in the way of the worktree of {branch!r}")
                await self._add_worktree(path, branch, prune=True)
            try:
                # Not `reset --hard`: a spare moved here still has the HEAD it was put
                # aside with.
                async with _fill_limiter():
                    await switch_spare(path, branch)
            except BaseException:
                if added:  # as it was: the branch, and no half-filled worktree
                    with trio.CancelScope(shield=True), trio.move_on_after(_ROLLBACK_TIMEOUT):
                        await self._remove(path)
                raise
            head = await rev_parse(path, "HEAD")
        return Workspace(subtask_id, path, branch, head, WorkspaceKind.LOCAL)

    async def check_out_detached(self, path: Path, commit: str) -> Path:
        """A worktree at `commit` on no branch, for checks of the integration branch.

        Reused from one check to the next: an existing one is moved to `commit`, which
        rewrites only the files that differ, and what the last check left untracked is
        removed; ignored files (installed dependencies, caches) stay, as in a developer's
        own checkout.
        """
        commit = commit if is_full_oid(commit) else await rev_parse(self.repo_root, commit)
        if await self.exists(path):
            path = await trio.to_thread.run_sync(resolve, path)
            await detach(path, commit)
            await check_out(path, commit)
            await remove_untracked(path)
            return path
        path = await trio.to_thread.run_sync(self._prepared, path)
        await self._add_worktree(path, commit, "--detach")
        await self._fill(check_out(path, commit))
        return path

    async def release(self, workspace_path: Path) -> None:
        """Put the worktree aside as a spare, or remove it (modified and untracked files
        too) when spares are not kept; keep its branch.

        Idempotent: releasing a path that is gone already only prunes git's record of it.
        """
        path = await trio.to_thread.run_sync(resolve, workspace_path)
        if await self._put_aside(path):
            return
        if await trio.Path(path).exists():
            await self._remove(path)
        else:
            async with self._locked():
                await git("worktree", "prune", cwd=self.repo_root)

    async def exists(self, path: Path) -> bool:
        """Whether `path` is a worktree of this repository and is still on disk."""
        path = await trio.to_thread.run_sync(resolve, path)
        return await trio.Path(path).is_dir() and path in await self._listed()

    async def remove_spares(self) -> SparesRemoved:
        """Remove every spare worktree kept for reuse, in every pool, but those a user
        locked."""
        async with self._locked():
            pools = pools_of(await self._worktree_paths(), self._common_dir)
            removed = await remove_spares(self.repo_root, pools)
            await git("worktree", "prune", cwd=self.repo_root)
        return removed

    def _pool(self, worktree: Path) -> Path:
        return spare_pool(worktree, self._common_dir)

    def _target(self, path: Path) -> tuple[Path, bool]:
        """Where a new worktree goes, and whether a spare waits to be moved there: one trip
        to a worker thread for both, which 16 creates of a fan-out make at once."""
        path = self._prepared(path)
        return path, has_spares(self._pool(path))

    def _prepared(self, path: Path) -> Path:
        """`path` resolved, checked to be outside the repository, its parent made."""
        protected = (self.repo_root, self._common_dir)
        return prepare_target(path, protected, kairo_dir.legacy_worktrees(self._common_dir))

    async def _put_back_a_spare_cut_short(self, path: Path, branch: str) -> bool:
        """Whether a spare was at `path` and went back to the spares.

        A crash between moving a spare to `path` and switching it to its new branch leaves
        a worktree there on no branch, and no `branch`: no agent ran in it, so it goes back
        to the spares and the create starts again."""
        path = await trio.to_thread.run_sync(resolve, path)
        if not await trio.Path(path).exists() or await branch_exists(self.repo_root, branch):
            return False
        if path not in await self._listed():
            return False
        await self.release(path)
        return True

    async def _reuse_spare(self, path: Path, base: str, branch: str) -> bool:
        """Whether a spare, moved to `path`, became the worktree of a new `branch` at
        `base`. An existing branch is refused, the spare put back as it was."""
        async with self._locked():
            if not await take_spare(self.repo_root, self._journal, self._pool(path), path):
                return False
        try:
            async with _fill_limiter():
                await switch_spare(path, branch, create_at=base)
        except StepFailed as error:
            taken = isinstance(error, BranchExists)
            with trio.CancelScope(shield=True), trio.move_on_after(_ROLLBACK_TIMEOUT):
                if not (taken and await self._put_aside(path)):
                    await self._remove(path)  # a spare that cannot be switched: never again
                await forget_branch_of_a_failed_switch(self.repo_root, branch, base, error)
            if taken:
                raise
            return False  # a new worktree, then
        except BaseException as error:
            with trio.CancelScope(shield=True), trio.move_on_after(_ROLLBACK_TIMEOUT):
                if not await self._put_aside(path):
                    await self._remove(path)
                await forget_branch_of_a_failed_switch(self.repo_root, branch, base, error)
            raise
        return True

    async def _put_aside(self, path: Path) -> bool:
        """Whether the worktree at `path` became a spare; if not, it is to be removed."""
        if self._spares_kept <= 0 or not await trio.Path(path).exists():
            return False
        if await trio.to_thread.run_sync(count_spares, self._pool(path)) >= self._spares_kept:
            return False
        if path not in await self._listed():
            return False
        # Outside the lock: it writes only in the worktree and its own git directory, and
        # reads its files' sizes.
        if not await detach_if_plain(path):
            return False
        size = await trio.to_thread.run_sync(disk_usage, path)
        async with self._locked():
            return await put_aside(
                self.repo_root,
                self._journal,
                self._pool(path),
                path,
                kept=self._spares_kept,
                size=size,
                budget=self._spare_budget,
            )

    async def _add_worktree(
        self, path: Path, target: str, *options: str, prune: bool = False
    ) -> None:
        """`worktree add` with no files yet, one at a time: parallel adds race ("failed to
        read .git/worktrees/N/commondir"), and without the checkout each takes milliseconds. The
        caller fills the files in (`_fill`), which is safe in parallel. A new subtask's
        worktree is added detached and gets its branch from the fill's `switch --create`:
        `add -b` would run two git processes more (`branch`, `symbolic-ref`), under the
        lock. `prune` first forgets worktrees whose directories are gone.

        A detached one is added in the pool under a neutral name and moved into place
        (class docstring); one on a branch (a create cut short, adopted), or one whose pool
        cannot be on its file system, is added in place."""
        async with self._locked():
            if prune:
                await git("worktree", "prune", cwd=self.repo_root)
            place = path
            if "--detach" in options:
                place = await trio.to_thread.run_sync(place_to_add, self._pool(path), path)
            await git(
                "worktree",
                "add",
                "--no-checkout",
                *options,
                "--",
                str(place),
                target,
                cwd=self.repo_root,
            )
            if place == path:
                return
            try:
                await move_worktree(self.repo_root, self._journal, place, path)
            except StepFailed:
                with trio.CancelScope(shield=True):  # what `clean --spares` would remove
                    await git(
                        "worktree", "remove", "--force", "--", str(place),
                        cwd=self.repo_root, check=False,
                    )  # fmt: skip
                raise

    async def _fill(self, filling: Awaitable[None]) -> None:
        """Write the files of a worktree added without them (`filling`: a checkout of the
        new branch, or of a commit, which fills its own index), one more at once than there
        are cores.

        The cost is the kernel's, creating files (ext4's inode allocation, mostly). Two
        fills in one block group contend for it, so that two at a time were no faster than
        one, at twice the CPU; spread over block groups (worktree_paths.py), two at a time
        are faster (docs/benchmarks.md, "Figures behind the code"). A limit, not all at
        once, also lets the first agents start after a checkout or two.
        """
        async with _fill_limiter():
            await filling

    async def _remove(self, path: Path) -> None:
        async with self._locked():
            if path in await self._worktree_paths():
                # Without --force, git refuses a worktree with modified or untracked
                # files: an agent's leftovers are exactly what is being thrown away.
                await git("worktree", "remove", "--force", "--", str(path), cwd=self.repo_root)
            elif await trio.Path(path).exists():
                # Never delete a directory git does not know as one of our worktrees.
                raise StepFailed(f"{path} is not a worktree of {self.repo_root}; left alone")
            await git("worktree", "prune", cwd=self.repo_root)

    @asynccontextmanager
    async def _locked(self) -> AsyncIterator[None]:
        async with self._lock.held():
            await finish_interrupted_move(self.repo_root, self._journal)
            yield

    async def _listed(self) -> set[Path]:
        """The worktrees, read under the lock: `worktree list` run while another task adds
        or removes one fails ("failed to read .git/worktrees/N/commondir")."""
        async with self._locked():
            return await self._worktree_paths()

    async def _worktree_paths(self) -> set[Path]:
        """The caller holds the lock."""
        result = await git("worktree", "list", "--porcelain", "-z", cwd=self.repo_root)
        listed = [
            Path(field.removeprefix("worktree "))
            for field in result.stdout.split("\0")
            if field.startswith("worktree ")
        ]
        return set(await trio.to_thread.run_sync(lambda: [resolve(p) for p in listed]))


@functools.cache
def _fill_limiter() -> trio.CapacityLimiter:
    # One per process, not per repository: every repository's files go to the same disks.
    # One more than the cores: a fill waits now and then (for its directory blocks, the
    # page cache), and a third fill uses that time: measured faster than two on 2 cores
    # (docs/benchmarks.md).
    return trio.CapacityLimiter((os.cpu_count() or 2) + 1)
