"""What an execution left when its log is gone (its store deleted or replaced, or another
store's): found by the names kairo-orch gives things (core/ids.py), so that `clean` can
remove it and `list` can say it is there.

Only the short id ties them together: subtask branches `kairo-subtasks/<plan>/<short>/<id>`
and their worktrees, the default integration branch `kairo/<plan>/<short>`, the tmux
session `kairo-<plan>-<short>` and the run folder `.git/kairo/runs/<id>`. An integration
branch the plan named cannot be found without the log; it is the user's to delete.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import trio

from orchestrator import kairo_dir
from orchestrator.core.cleanup import (
    Cleaned,
    IntegrationBranchKept,
    Removed,
    RunFolderKept,
    SubtaskKept,
)
from orchestrator.core.ids import SUBTASK_NAMESPACE, named_short_id
from orchestrator.errors import OwnershipError, StepFailed
from orchestrator.git.execution_branches import kairo_branches
from orchestrator.git.invocation import git
from orchestrator.git.refs import branch_exists, branch_ref, delete_branch, is_ancestor, rev_parse
from orchestrator.git.repo import RepoPaths, has_uncommitted_work
from orchestrator.git.workspace import LocalWorktreeProvider
from orchestrator.runtime.cgroups import end_cgroups_of
from orchestrator.runtime.ownership import kairo_process_alive
from orchestrator.tmux.server import TmuxServer


@dataclass
class Leftovers:
    short: str
    subtask_branches: list[str] = field(default_factory=list)
    integration_branches: list[str] = field(default_factory=list)
    worktrees: dict[str, Path] = field(default_factory=dict)  # by branch
    sessions: list[str] = field(default_factory=list)
    run_folders: list[Path] = field(default_factory=list)

    def __bool__(self) -> bool:
        """Whether this repository holds any: a session alone may be another's (the tmux
        server is the user's, shared by every repository)."""
        return bool(self.subtask_branches or self.integration_branches or self.run_folders)


async def find_leftovers(paths: RepoPaths, tmux: TmuxServer, short: str) -> Leftovers:
    root = paths.toplevel
    found = Leftovers(short)
    for branch in await trio.to_thread.run_sync(kairo_branches, root):
        if named_short_id(branch) == short:
            subtask = branch.startswith(f"{SUBTASK_NAMESPACE}/")
            (found.subtask_branches if subtask else found.integration_branches).append(branch)
    found.worktrees = {
        branch: path
        for branch, path in (await _worktrees_by_branch(root)).items()
        if branch in found.subtask_branches
    }
    here = await trio.to_thread.run_sync(root.resolve)
    found.sessions = [
        name
        for name, path in (await tmux.sessions()).items()
        if name.startswith("kairo-") and name.endswith(f"-{short}") and path == here
    ]
    found.run_folders = await trio.to_thread.run_sync(
        kairo_dir.run_folders_of, paths.git_common_dir, short
    )
    return found


async def _worktrees_by_branch(root: Path) -> dict[str, Path]:
    result = await git("worktree", "list", "--porcelain", "-z", cwd=root)
    by_branch: dict[str, Path] = {}
    path: Path | None = None
    for entry in result.stdout.split("\0"):
        if entry.startswith("worktree "):
            path = Path(entry.removeprefix("worktree "))
        elif entry.startswith("branch ") and path is not None:
            by_branch[entry.removeprefix("branch refs/heads/")] = path
    return by_branch


def supervisor_still_running(short: str) -> int | None:
    """The pid of a live supervisor on this host of an execution of this short id (with
    another store): its process title names the execution, as does the command line of one
    run directly (daemon.py)."""
    tail = short.upper().encode()
    titles = (
        re.compile(rb"kairo-orch supervisor [0-9A-Z]{20}" + tail + rb" "),
        re.compile(rb"orchestrator\.runtime\.daemon\0[0-9A-Z]{20}" + tail + rb"\0"),
    )
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if any(title.search(cmdline) for title in titles) and kairo_process_alive(int(proc.name)):
            return int(proc.name)
    return None


async def remove_leftovers(
    paths: RepoPaths, tmux: TmuxServer, leftovers: Leftovers, *, force: bool
) -> list[Cleaned]:
    """Remove them as `clean` removes an ended execution's: never unmerged work (a branch
    no integration branch holds) nor uncommitted changes unless `force`; the integration
    branches and the run folders (logs, the agents' output) are kept."""
    pid = await trio.to_thread.run_sync(supervisor_still_running, leftovers.short)
    if pid is not None:
        raise OwnershipError(
            f"a supervisor of execution {leftovers.short} still runs (pid {pid}), on another "
            "store than this one: give `clean` that store (--store or KAIRO_STORE)"
        )
    root = paths.toplevel
    # What still runs of its attempts and checks, found by the names of their cgroups.
    ended = await trio.to_thread.run_sync(end_cgroups_of, leftovers.short)
    steps: list[Cleaned] = [Removed("cgroup", str(path)) for path in ended]
    for session in leftovers.sessions:  # its agents: no supervisor will ever judge them
        await tmux.kill_session(session)
        steps.append(Removed("tmux_session", session))
    heads = [await rev_parse(root, branch_ref(b)) for b in leftovers.integration_branches]
    branches = {b: leftovers.worktrees.get(b) for b in leftovers.subtask_branches}
    steps += await remove_subtask_branches(root, branches, heads, force=force)
    for branch, head in zip(leftovers.integration_branches, heads, strict=True):
        holder = await _another_branch_holding(root, head)
        if holder is not None and await delete_branch(root, branch):
            # Nothing was merged into it (it is still at a commit of yours): clutter.
            steps.append(Removed("integration_branch", branch, held_by=holder))
        else:
            steps.append(IntegrationBranchKept(branch))
    for folder in leftovers.run_folders:
        # What the live view read its store URL from, which may hold a password.
        await trio.Path(kairo_dir.store_file(folder)).unlink(missing_ok=True)
        steps.append(RunFolderKept(str(folder)))
    return steps


async def _another_branch_holding(root: Path, commit: str) -> str | None:
    """A branch, not one of kairo-orch's names, that holds `commit`."""
    found = await git(
        "for-each-ref", "--contains", commit, "--format=%(refname:short)", "refs/heads/", cwd=root
    )
    theirs = [
        b for b in found.stdout.split() if not b.startswith(("kairo/", f"{SUBTASK_NAMESPACE}/"))
    ]
    return theirs[0] if theirs else None


async def remove_subtask_branches(
    root: Path,
    worktrees: dict[str, Path | None],
    holders: list[str],
    *,
    force: bool,
) -> list[Cleaned]:
    """Delete the subtask branches `worktrees` names and remove their worktrees, but
    (without `force`) a branch no commit of `holders` holds, or a worktree with uncommitted
    changes. A branch that is gone already holds nothing to lose."""
    steps: list[Cleaned] = []
    provider = LocalWorktreeProvider(root)
    for branch, worktree in worktrees.items():
        subtask = branch.rpartition("/")[2]
        held, head = True, None  # a branch that is gone holds nothing to lose
        if await branch_exists(root, branch):
            head = await rev_parse(root, branch_ref(branch))
            held = any([await is_ancestor(root, head, h) for h in holders])
        if not held and not force:
            steps.append(SubtaskKept(subtask, "unmerged", branch, _str(worktree)))
            continue
        if worktree is not None and not await trio.Path(worktree).exists():
            await provider.release(worktree)  # only git's record of it is left: pruned
        elif worktree is not None:
            if not force and await has_uncommitted_work(worktree):
                steps.append(SubtaskKept(subtask, "uncommitted", branch, str(worktree)))
                continue
            await provider.release(worktree)
            steps.append(Removed("worktree", str(worktree)))
            with contextlib.suppress(OSError):  # the execution's folder, once it is empty
                await trio.Path(worktree).parent.rmdir()
        try:
            if await delete_branch(root, branch):
                # Unmerged work deleted (--force) can still be had back, for a while.
                steps.append(Removed("branch", branch, unmerged_head=None if held else head))
        except StepFailed as refused:  # checked out somewhere else, say: the rest go on
            steps.append(
                SubtaskKept(subtask, "refused", branch, _str(worktree), message=refused.message)
            )
    return steps


def _str(path: Path | None) -> str | None:
    return None if path is None else str(path)
