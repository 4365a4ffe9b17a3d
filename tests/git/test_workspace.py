from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import trio

from orchestrator.errors import StepFailed, UsageError
from orchestrator.git.refs import branch_exists, rev_parse
from orchestrator.git.workspace import LocalWorktreeProvider
from orchestrator.git.workspace_port import Workspace, WorkspaceKind, WorkspaceProvider
from orchestrator.git.worktree_paths import default_worktree_root
from tests.git.conftest import run, snapshot, user_git, write


def provider_for(repo: Path) -> WorkspaceProvider:
    # Typed as the Protocol: the local provider must satisfy it.
    return LocalWorktreeProvider(repo)


async def test_create_makes_a_worktree_outside_the_checkout_at_base(
    dirty_repo: Path, worktree_root: Path
) -> None:
    base = await rev_parse(dirty_repo, "HEAD~1")
    provider = provider_for(dirty_repo)
    ws = await provider.create("s1", "kairo/run/s1", "HEAD~1", worktree_root / "a" / "s1")

    assert ws == Workspace(
        "s1", worktree_root / "a" / "s1", "kairo/run/s1", base, WorkspaceKind.LOCAL
    )
    assert not ws.path.is_relative_to(dirty_repo)
    assert await rev_parse(ws.path, "HEAD") == base
    assert (await user_git(ws.path, "symbolic-ref", "HEAD")).stdout.strip() == (
        "refs/heads/kairo/run/s1"
    )
    # Filled in: the files of the base commit, committed state (not the user's edits).
    assert (ws.path / "README.md").read_text() == "# demo\n"
    assert not (ws.path / "docs").exists()  # added only after the base
    assert not (ws.path / "notes.txt").exists()
    status = await user_git(ws.path, "status", "--porcelain")
    assert status.stdout == ""
    assert await provider.exists(ws.path)


# Unserialised, `git worktree add` fails now and then ("failed to read
# .git/worktrees/N/commondir"); 32 at once shows it within a few runs.
@pytest.mark.parametrize("count", [8, 32])
async def test_worktrees_created_concurrently(repo: Path, worktree_root: Path, count: int) -> None:
    provider = provider_for(repo)
    made: list[Workspace] = []

    async def one(i: int) -> None:
        made.append(await provider.create(f"s{i}", f"kairo/s{i}", "main", worktree_root / f"s{i}"))

    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(one, i)

    assert len(made) == count
    listed = (await user_git(repo, "worktree", "list", "--porcelain")).stdout
    for ws in made:
        assert f"worktree {ws.path}" in listed
        assert (ws.path / "src" / "util.py").read_text().startswith("line 1\n")
        assert (await user_git(ws.path, "status", "--porcelain")).stdout == ""


async def test_existing_branch_is_refused_with_context(repo: Path, worktree_root: Path) -> None:
    run(repo, "branch", "taken", "HEAD~1")
    tip = await rev_parse(repo, "taken")
    with pytest.raises(
        StepFailed, match="branch 'taken' already exists; it was not reused"
    ) as info:
        await provider_for(repo).create("s1", "taken", "main", worktree_root / "s1")
    assert (info.value.branch, info.value.subtask_id) == ("taken", "s1")
    assert not (worktree_root / "s1").exists()
    # The worktree made for it is gone; the branch, someone else's, is left as it was.
    assert await rev_parse(repo, "taken") == tip


async def test_a_create_cut_short_before_its_branch_starts_again(
    repo: Path, worktree_root: Path
) -> None:
    # What a crash between the detached `worktree add --no-checkout` and the fill's
    # `switch --create` leaves: a worktree on no branch, with no files, and no branch.
    path = worktree_root / "s1"
    run(repo, "worktree", "add", "--no-checkout", "--detach", str(path), "main")
    ws = await provider_for(repo).create("s1", "kairo/s1", "main", path)
    assert ws.path == path.resolve()
    assert (await user_git(path, "branch", "--show-current")).stdout.strip() == "kairo/s1"
    assert (path / "README.md").is_file()
    assert (await user_git(path, "status", "--porcelain")).stdout == ""


async def test_path_inside_the_checkout_is_refused(repo: Path) -> None:
    with pytest.raises(StepFailed, match="lies inside"):
        await provider_for(repo).create("s1", "kairo/s1", "main", repo / ".kairo" / "s1")
    assert not (repo / ".kairo").exists()
    assert not await branch_exists(repo, "kairo/s1")


async def test_non_empty_target_directory_is_refused(repo: Path, worktree_root: Path) -> None:
    write(worktree_root / "s1" / "precious.txt", "someone's data\n")
    with pytest.raises(StepFailed, match="something is there already"):
        await provider_for(repo).create("s1", "kairo/s1", "main", worktree_root / "s1")
    assert (worktree_root / "s1" / "precious.txt").read_text() == "someone's data\n"


async def test_unknown_base_is_a_usage_error(repo: Path, worktree_root: Path) -> None:
    with pytest.raises(UsageError, match="'mian' does not name a commit") as info:
        await provider_for(repo).create("s1", "kairo/s1", "mian", worktree_root / "s1")
    assert info.value.subtask_id == "s1"


async def test_release_removes_the_worktree_keeps_the_branch_and_is_idempotent(
    repo: Path, worktree_root: Path
) -> None:
    provider = provider_for(repo)
    ws = await provider.create("s1", "kairo/s1", "main", worktree_root / "s1")
    write(ws.path / "leftover.txt", "untracked\n")
    write(ws.path / "README.md", "modified\n")

    await provider.release(ws.path)
    assert not ws.path.exists()
    assert not await provider.exists(ws.path)
    assert await branch_exists(repo, "kairo/s1")
    await provider.release(ws.path)  # a second release is a no-op

    # Deleted behind git's back: release only forgets it.
    gone = await provider.create("s2", "kairo/s2", "main", worktree_root / "s2")
    shutil.rmtree(gone.path)
    await provider.release(gone.path)
    listed = (await user_git(repo, "worktree", "list", "--porcelain")).stdout
    assert "s2" not in listed


async def test_release_leaves_a_directory_that_is_not_a_worktree(
    repo: Path, tmp_path: Path
) -> None:
    stranger = tmp_path / "stranger"
    write(stranger / "file.txt", "mine\n")
    with pytest.raises(StepFailed, match="not a worktree"):
        await provider_for(repo).release(stranger)
    assert (stranger / "file.txt").read_text() == "mine\n"


async def test_user_checkout_unchanged_by_create_and_release(
    dirty_repo: Path, worktree_root: Path
) -> None:
    before = snapshot(dirty_repo)
    provider = provider_for(dirty_repo)
    async with trio.open_nursery() as nursery:
        for i in range(4):
            nursery.start_soon(
                provider.create, f"s{i}", f"kairo/s{i}", "HEAD", worktree_root / f"s{i}"
            )
    for i in range(4):
        await provider.release(worktree_root / f"s{i}")
    assert snapshot(dirty_repo) == before


async def test_providers_of_one_repository_share_their_lock(repo: Path, tmp_path: Path) -> None:
    a = LocalWorktreeProvider(repo)
    b = LocalWorktreeProvider(repo / "src")
    assert a._lock is b._lock


async def test_another_process_holding_the_lock_holds_up_a_create(
    repo: Path, worktree_root: Path
) -> None:
    provider = LocalWorktreeProvider(repo)
    lock_file = repo / ".git" / "kairo" / "worktrees.lock"
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    # A descriptor of its own, as another kairo-orch on this repository would have.
    other = os.open(lock_file, os.O_RDWR | os.O_CREAT)
    fcntl.flock(other, fcntl.LOCK_EX)
    path = worktree_root / "s1"
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(provider.create, "s1", "kairo/s1", "HEAD", path)
            await trio.sleep(0.3)
            assert not path.exists() and not await branch_exists(repo, "kairo/s1")
            os.close(other)  # lets go of the flock
            other = -1
    finally:
        if other >= 0:
            os.close(other)
    assert run(path, "symbolic-ref", "HEAD").strip() == "refs/heads/kairo/s1"


def _lsattr_flags(directory: Path) -> str | None:
    done = subprocess.run(["lsattr", "-d", str(directory)], capture_output=True, text=True)
    return done.stdout.split()[0] if done.returncode == 0 and done.stdout else None


def _top_directory_flag_works(where: Path) -> bool:
    probe = where / "probe"
    probe.mkdir()
    try:
        done = subprocess.run(["chattr", "+T", str(probe)], capture_output=True, check=False)
        return done.returncode == 0 and "T" in (_lsattr_flags(probe) or "")
    finally:
        probe.rmdir()


async def test_the_directory_made_for_worktrees_spreads_them_over_block_groups(
    repo: Path, worktree_root: Path, tmp_path: Path
) -> None:
    if shutil.which("chattr") is None or not _top_directory_flag_works(tmp_path):
        pytest.skip("no chattr, or a file system without ext4's top-directory flag")
    provider = provider_for(repo)
    made_here = worktree_root / "execution"  # a directory create makes: it gets the flag
    await provider.create("s1", "kairo/s1", "main", made_here / "s1")
    flags = _lsattr_flags(made_here)
    assert flags is not None and "T" in flags
    # A directory that was there already (the user's, maybe) is left as it was.
    before = _lsattr_flags(worktree_root)
    await provider.create("s2", "kairo/s2", "main", worktree_root / "s2")
    assert _lsattr_flags(worktree_root) == before


async def test_a_create_cut_short_after_the_add_is_refused_then_adopted(
    repo: Path, worktree_root: Path
) -> None:
    # What a crash between `worktree add --no-checkout` and the fill leaves: the branch and
    # an empty worktree. create refuses it (PrepareWorkspace then adopts); adopt fills it.
    path = worktree_root / "s1"
    run(repo, "worktree", "add", "--no-checkout", "-b", "kairo/s1", str(path), "main")
    provider = provider_for(repo)
    with pytest.raises(StepFailed):
        await provider.create("s1", "kairo/s1", "main", path)
    adopted = await provider.adopt("s1", "kairo/s1", path)
    assert adopted is not None and adopted.path == path.resolve()
    assert adopted.base_commit == await rev_parse(repo, "main")
    assert (path / "README.md").is_file()
    assert (await user_git(path, "status", "--porcelain")).stdout == ""
    # With no branch of that name there is nothing to finish.
    assert await provider.adopt("s2", "kairo/s2", worktree_root / "s2") is None


def test_worktrees_go_beside_the_checkout_by_default(tmp_path: Path) -> None:
    assert default_worktree_root(tmp_path / "shop") == tmp_path / "shop.kairo-worktrees"


def test_a_checkout_inside_a_git_directory_has_its_worktrees_in_the_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    checkout = tmp_path / "outer" / ".git" / "modules" / "shop"
    root = default_worktree_root(checkout)
    assert root.parent == tmp_path / "data" / "kairo-orch" / "worktrees"
    assert root.name.startswith("shop-") and root != default_worktree_root(tmp_path / "shop")


async def test_a_worktree_where_the_last_version_put_them_is_still_made(repo: Path) -> None:
    # An execution created before worktrees moved beside the checkout has its root in
    # the git directory; resumed, it makes its worktrees there, and keeps its spares there.
    provider = provider_for(repo)
    old_root = repo / ".git" / "kairo" / "worktrees" / "01old"
    made = await provider.create("s1", "kairo/s1", "main", old_root / "s1")
    assert (made.path / "README.md").is_file()
    await provider.release(made.path)
    assert len(list((repo / ".git" / "kairo" / "worktrees" / ".spares").iterdir())) == 1


def test_a_checkout_inside_another_working_tree_keeps_its_worktrees_out_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    root = default_worktree_root(tmp_path / "mono" / "sub", parent_in_a_working_tree=True)
    assert root.is_relative_to(tmp_path / "data")
