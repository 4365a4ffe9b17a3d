"""Spare worktrees: released ones, kept to be reused by the next subtask that needs one.

Filling a new worktree is what a fan-out costs: the kernel creating every file of the tree
(docs/benchmarks.md has the figures). So a released
worktree is not deleted: it is detached from its branch and moved aside, into the spare
pool of its worktree root and repository: kairo lays worktrees out as
`<root>/<execution>/<subtask>`, and the pool is `<root>/.spares/<repository>/`
(`spare_pool`; several repositories may share a root, never a spare), on the same file
system, so that the next create in that root moves one back (a rename) and checks its new
branch out in it, which
rewrites only the files that differ from the spare's last commit, a fraction of a fill. What
is ignored stays, as in a developer's own checkout (installed dependencies, build caches);
what is modified or untracked goes. A worktree that is not a plain checkout (flagged index
entries, a sparse checkout, a bisect, a lock, submodules) is removed, never kept.

A spare is an ordinary worktree on a detached HEAD, so `git worktree list` shows it, and
git's own prune leaves it (its directory exists). At most `SPARES_KEPT` are kept (or as
many as KAIRO_SPARE_WORKTREES says: spare_setting.py) in each pool, the rest removed as
before; `kairo-orch clean --spares` removes them all, in every pool (and in
`kairo/spare-worktrees/` of the git directory, the one pool of kairo-orch before worktrees
moved out of it). Only a worktree on the same file system as its pool is kept, since a move
elsewhere would be a copy.

The caller holds the repository's WorktreeLock for every `git worktree` command and every
move here: they race.

A move is what `git worktree move` does, done here by hand where the worktree is a plain
one: rename the directory, then rewrite the `gitdir` file of its administrative directory
(`worktrees/ID/gitdir`, which gitrepository-layout(5) documents as the absolute path of the
worktree's `.git` file) to point at the new place. That is one trip to a worker thread
where git's move was a process and four such trips, under the lock every create of a
fan-out queues on, and the spares of a warm fan-out are in place sooner for it
(scripts/fanout_timeline.py measures it; docs/benchmarks.md). A worktree that is locked, holds a
submodule's repository, names its administrative directory by a relative path (git
2.48's `worktree.useRelativePaths`) or whose record does not point back at it is left to
`git worktree move`, which refuses it or handles it as git does.

Neither way is atomic: a kill between the rename and the rewrite leaves the worktree at its
new place with git looking for it at the old one, and the next `worktree prune` would
delete its administrative directory, orphaning it. So each move is written down first
(`kairo_dir.move_journal`), and whoever takes the lock
next finishes it with `git worktree repair`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import trio

from orchestrator.errors import StepFailed
from orchestrator.git.checkout import attach, check_out, detach, remove_untracked
from orchestrator.git.invocation import git
from orchestrator.git.refs import branch_ref, create_branch, is_full_oid, rev_parse
from orchestrator.git.spare_pools import (
    administrative_directory,
    count_spares,
    forget_size,
    is_locked,
    make_pool,
    pool_bytes,
    pool_place,
    read_path,
    remove_if_empty,
    spares_in,
    write_size,
)


def _same_file_system(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_dev == b.stat().st_dev
    except FileNotFoundError:
        return False


async def take_spare(repo_root: Path, journal: Path, pool: Path, path: Path) -> bool:
    """Move a spare of `pool` to `path` (absent or an empty directory; its parent exists);
    False if there is none to move. A spare git fails to move is removed, the next one
    tried."""
    for spare in await trio.to_thread.run_sync(_spares_for, pool, path):
        try:
            await move_worktree(repo_root, journal, spare, path)
        except StepFailed:
            await git("worktree", "remove", "--force", "--", str(spare), cwd=repo_root, check=False)
            await trio.to_thread.run_sync(forget_size, spare)
            continue
        await trio.to_thread.run_sync(forget_size, spare)
        return True
    return False


def _spares_for(pool: Path, path: Path) -> list[Path]:
    """The spares that may move to `path`: on its file system (a move elsewhere would be a
    copy), and not locked since they were put aside (git moves no locked worktree, nor
    removes one, and the lock is its user's to lift). An empty directory at `path` is
    removed first: a move into an existing directory would put the spare inside it."""
    _remove_empty_directory(path)
    if not _same_file_system(pool, path.parent):
        return []
    return [spare for spare in spares_in(pool) if not is_locked(spare)]


async def switch_spare(
    path: Path, branch: str, *, create_at: str | None = None, fresh: bool = False
) -> None:
    """Make the worktree at `path` that of `branch` (a new one at `create_at`, refused if
    it exists: `BranchExists`), with nothing untracked: only the files that differ are
    written (checkout.py: isolated, no filter or hook runs).

    The clean comes after the checkout, under the new tree's `.gitignore`: what the last
    agent's tree ignored may be the new base's to track, and must not reach the next
    agent's commit. `-ff` also removes the repositories an agent made inside its tree.
    Also finishes a create cut short after `take_spare`, or an add of no files. A `fresh`
    worktree, just added without files, has nothing untracked to clean.
    """
    if create_at is not None:
        await create_branch(path, branch, create_at)
    if create_at is not None and is_full_oid(create_at):
        commit = create_at
    else:
        commit = await rev_parse(path, branch_ref(branch))
    await attach(path, branch)
    await check_out(path, commit)
    if not fresh:
        await remove_untracked(path, nested_repositories=True)


async def detach_if_plain(path: Path) -> bool:
    """Let go of the worktree's branch (so the branch can be deleted); False, leaving it
    as it was, for one that is not a plain checkout and must not be reused.

    Not plain: index entries marked assume-unchanged or skip-worktree, a sparse checkout,
    a worktree config, a bisect, rebase, merge or other operation under way. A checkout
    keeps them all, and the next agent's edits to such files would be invisible to its
    commit.
    """
    if not await trio.to_thread.run_sync(_plain_administrative_directory, path):
        return False
    flags = await git("ls-files", "-v", "-z", cwd=path)
    if any(entry and not entry.startswith("H ") for entry in flags.stdout.split("\0")):
        return False
    head = await git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=path, check=False)
    if head.returncode != 0:
        return False
    await detach(path, head.stdout.strip())
    return True


_NOT_PLAIN = (
    "config.worktree",
    "info/sparse-checkout",
    "BISECT_START",
    "BISECT_LOG",
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "rebase-merge",
    "rebase-apply",
    "locked",  # git would not move it
    "modules",  # submodules: likewise
)


def _plain_administrative_directory(path: Path) -> bool:
    """Whether the worktree's own directory under .git/worktrees/ holds none of the state
    a switch would carry over to the next agent."""
    admin = administrative_directory(path)
    return admin is not None and not any((admin / name).exists() for name in _NOT_PLAIN)


async def put_aside(
    repo_root: Path, journal: Path, pool: Path, path: Path, *, kept: int, size: int, budget: int
) -> bool:
    """Move a detached worktree at `path` (of `size` bytes on disk) into `pool`; False (and
    `path` untouched) when there are `kept` spares there already, they would take more
    than `budget` bytes with it, or git will not move it."""
    made = await trio.to_thread.run_sync(make_pool, pool)
    if not made or await trio.to_thread.run_sync(count_spares, pool) >= kept:
        return False
    if await trio.to_thread.run_sync(pool_bytes, pool) + size > budget:
        return False
    if not await trio.to_thread.run_sync(_same_file_system, pool, path):
        return False
    spare = pool_place(pool)
    try:
        await move_worktree(repo_root, journal, path, spare)
    except StepFailed:
        return False
    await trio.to_thread.run_sync(write_size, spare, size)
    return True


async def move_worktree(repo_root: Path, journal: Path, source: Path, target: Path) -> None:
    """Move the worktree at `source` to `target` (which does not exist), written down for
    `finish_interrupted_move` while it runs: by hand where it is plain, else by git.

    A move that fails may have renamed the directory already (a git killed by the user's
    Ctrl-C, which reaches it too; a record that could not be rewritten): it is finished
    now, before the caller's next `worktree prune` could forget the worktree. A cancelled
    one leaves the journal to the next holder of the lock.
    """
    try:
        if await trio.to_thread.run_sync(_move_by_hand, journal, source, target):
            return
        await trio.to_thread.run_sync(_write_journal, journal, source, target)
        await git("worktree", "move", "--", str(source), str(target), cwd=repo_root)
    except (StepFailed, OSError) as error:
        await finish_interrupted_move(repo_root, journal)
        if isinstance(error, OSError):
            raise StepFailed(f"cannot move the worktree at {source} to {target}: {error}") from None
        raise
    await trio.to_thread.run_sync(functools.partial(journal.unlink, missing_ok=True))


def _move_by_hand(journal: Path, source: Path, target: Path) -> bool:
    """`git worktree move` of a plain worktree, in-process, journal and all; False, having
    done nothing, for one git must move."""
    record = _record_pointing_back(source)
    if record is None or target.exists():
        return False
    _write_journal(journal, source, target)
    source.rename(target)
    staged = record.with_name(record.name + ".kairo.tmp")
    # As git writes it: the real path of the worktree's .git file, in the path's own bytes.
    staged.write_bytes(os.fsencode(target.resolve()) + b"/.git\n")
    staged.replace(record)  # git reads it whole or not at all
    journal.unlink(missing_ok=True)
    return True


def _record_pointing_back(worktree: Path) -> Path | None:
    """The `gitdir` file of the worktree's administrative directory, when the worktree is
    one that may be moved by hand: a worktree of a trusted repository (invocation.locate
    checks that its `.git` file and that record name each other) whose `.git` file names
    it by an absolute path (a relative one is git 2.48's `worktree.useRelativePaths`), not
    locked, and holding no submodule's repository (git refuses to move either)."""
    admin = administrative_directory(worktree)
    pointer = read_path(worktree / ".git", prefix=b"gitdir: ")
    if admin is None or pointer is None or not pointer.is_absolute():
        return None
    if (admin / "locked").exists() or (admin / "modules").exists():
        return None
    recorded = read_path(admin / "gitdir")
    return admin / "gitdir" if recorded is not None and recorded.is_absolute() else None


async def finish_interrupted_move(repo_root: Path, journal: Path) -> None:
    """Point git back at a worktree whose move a crash cut short: of the move's two ends,
    `repair` rewrites the record of the one that holds the worktree now. A no-op (one
    failed open) when no move was under way."""
    # Run at every lock, so a stat here rather than a thread's round trip.
    ends = _read_journal(journal)
    if ends is None:
        return
    present = [str(end) for end in ends if await trio.Path(end / ".git").is_file()]
    if present:
        await git("worktree", "repair", "--", *present, cwd=repo_root, check=False)
    await trio.to_thread.run_sync(functools.partial(journal.unlink, missing_ok=True))


def _write_journal(journal: Path, source: Path, target: Path) -> None:
    staged = journal.with_name(journal.name + ".tmp")
    staged.write_text(json.dumps({"from": str(source), "to": str(target)}), encoding="utf-8")
    staged.replace(journal)  # whole or absent: a torn journal would hide the move


def _read_journal(journal: Path) -> tuple[Path, Path] | None:
    try:
        move = json.loads(journal.read_text(encoding="utf-8"))
        return Path(move["from"]), Path(move["to"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        with contextlib.suppress(OSError):
            journal.unlink(missing_ok=True)  # unreadable: nothing to go on
        return None


class SparesRemoved(NamedTuple):
    removed: list[Path]
    locked: list[Path]  # left: a user locked them (`git worktree unlock` lets them go)


async def remove_spares(repo_root: Path, pools: Iterable[Path]) -> SparesRemoved:
    """Remove every spare of `pools` git still knows as a worktree, but those a user
    locked, and any a crash left half-added; a pool left empty goes too, and its root
    if it was the last thing there."""
    removed: list[Path] = []
    locked: list[Path] = []
    pools = list(pools)
    spares = [
        spare
        for pool in pools
        for spare in await trio.to_thread.run_sync(functools.partial(spares_in, pool, adding=True))
    ]
    for spare in spares:
        if await trio.to_thread.run_sync(is_locked, spare):
            locked.append(spare)
            continue
        done = await git(
            "worktree", "remove", "--force", "--", str(spare), cwd=repo_root, check=False
        )
        if done.returncode == 0:
            removed.append(spare)
            await trio.to_thread.run_sync(forget_size, spare)
    for pool in pools:
        await trio.to_thread.run_sync(remove_if_empty, pool)
    return SparesRemoved(removed, locked)


def _remove_empty_directory(path: Path) -> None:
    if path.is_dir():
        path.rmdir()  # fails on one that is not empty, which prepare_target refused
