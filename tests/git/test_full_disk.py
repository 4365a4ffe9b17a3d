"""A worktree that cannot be written (the disk holding it is full) leaves nothing behind:
no half-filled worktree, and no branch, which git's `switch --create` makes even when it
could not write the files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import StepFailed
from orchestrator.git.refs import branch_exists
from orchestrator.git.workspace import LocalWorktreeProvider
from tests.faults.small_disk import resize, small_disk
from tests.git.conftest import run, user_git


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_disk(tmp_path / "disk", "1m") as mounted:
        yield mounted


@pytest.fixture
def big_repo(repo: Path) -> Path:
    (repo / "big.bin").write_bytes(os.urandom(2 * 1024**2))  # twice the disk
    run(repo, "add", ".")
    run(repo, "-c", "user.name=F", "-c", "user.email=f@example.com", "commit", "-q", "-m", "big")
    return repo


async def test_a_worktree_the_full_disk_cannot_hold_leaves_no_worktree_and_no_branch(
    big_repo: Path, disk: Path
) -> None:
    provider = LocalWorktreeProvider(big_repo, spares_kept=0)
    target = disk / "wt" / "s1"

    with pytest.raises(StepFailed, match=r"unable to write file .*is full: \d+ KiB free"):
        await provider.create("s1", "kairo-subtasks/p/abcdef/s1", "HEAD", target)

    assert not await branch_exists(big_repo, "kairo-subtasks/p/abcdef/s1")
    listed = (await user_git(big_repo, "worktree", "list", "--porcelain")).stdout
    assert str(disk) not in listed
    assert not target.exists()
    # Once there is room, the same create goes through: nothing is in its way.
    resize(disk, "8m")
    made = await provider.create("s1", "kairo-subtasks/p/abcdef/s1", "HEAD", target)
    assert (made.path / "big.bin").stat().st_size == 2 * 1024**2


async def test_a_spare_the_full_disk_cannot_switch_leaves_no_branch(
    big_repo: Path, disk: Path
) -> None:
    # A spare of the commit before the big file: switching it to the new base must write
    # the big file, which the disk cannot hold.
    provider = LocalWorktreeProvider(big_repo, spares_kept=4)
    first = await provider.create("s0", "kairo-subtasks/p/abcdef/s0", "HEAD~1", disk / "wt" / "s0")
    await provider.release(first.path)

    with pytest.raises(StepFailed, match=r"unable to write file .*is full"):
        await provider.create("s1", "kairo-subtasks/p/abcdef/s1", "HEAD", disk / "wt" / "s1")

    assert not await branch_exists(big_repo, "kairo-subtasks/p/abcdef/s1")
    assert not (disk / "wt" / "s1").exists()
