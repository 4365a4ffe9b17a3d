"""Released worktrees kept as spares, and reused by the next create."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import trio

from orchestrator.errors import StepFailed, UsageError
from orchestrator.git import spare_worktrees
from orchestrator.git.invocation import git
from orchestrator.git.refs import rev_parse
from orchestrator.git.spare_pools import pool_bytes, spare_pool
from orchestrator.git.spare_setting import SPARES_KEPT, spare_bytes, spares_to_keep
from orchestrator.git.workspace import LocalWorktreeProvider
from tests.git.conftest import GitCommands, run, write


def pool(repo: Path, root: Path | None = None) -> Path:
    """The repository's spare pool in the `worktree_root` fixture's root (conftest.py)."""
    execution = (root or repo.parent / "worktrees") / "01exec"
    return spare_pool(execution / "any", (repo / ".git").resolve())


def spares(repo: Path) -> list[Path]:
    """The spares (directories; beside each, a file of its size)."""
    return sorted(p for p in pool(repo).iterdir() if p.is_dir()) if pool(repo).is_dir() else []


def listed(repo: Path) -> list[str]:
    porcelain = run(repo, "worktree", "list", "--porcelain")
    lines = porcelain.splitlines()
    return [line.removeprefix("worktree ") for line in lines if line.startswith("worktree ")]


async def put_aside(provider: LocalWorktreeProvider, worktree_root: Path, count: int) -> None:
    """`count` spares: made first, then released (a create takes a spare there is)."""
    made = [
        await provider.create(f"old{i}", f"kairo/old{i}", "main", worktree_root / f"old{i}")
        for i in range(count)
    ]
    for workspace in made:
        await provider.release(workspace.path)


async def with_one_spare(repo: Path, worktree_root: Path) -> LocalWorktreeProvider:
    """A provider of `repo` with one spare, put aside at main~1."""
    provider = LocalWorktreeProvider(repo)
    old = await provider.create("s1", "kairo/s1", "main~1", worktree_root / "s1")
    await provider.release(old.path)
    return provider


async def test_a_released_worktree_is_reused_at_the_new_base(
    repo: Path, worktree_root: Path
) -> None:
    provider = LocalWorktreeProvider(repo)
    first = await provider.create("s1", "kairo/s1", "main~1", worktree_root / "s1")
    write(first.path / "README.md", "an agent's edit\n")
    write(first.path / "stray.txt", "left untracked\n")
    write(first.path / "build" / "cache.bin", "ignored: kept, like installed dependencies\n")
    await provider.release(first.path)
    assert not first.path.exists()
    [spare] = spares(repo)
    assert str(spare) in listed(repo)
    run(repo, "branch", "-D", "kairo/s1")  # put aside detached: its branch is free

    second = await provider.create("s2", "kairo/s2", "main", worktree_root / "s2")
    assert spares(repo) == [] and not spare.exists()
    assert second.base_commit == await rev_parse(repo, "main")
    assert run(second.path, "symbolic-ref", "HEAD").strip() == "refs/heads/kairo/s2"
    assert (second.path / "README.md").read_text() == "# demo\n"
    assert (second.path / "docs" / "guide.md").is_file()  # in main, not in main~1
    assert not (second.path / "stray.txt").exists()
    assert (second.path / "build" / "cache.bin").is_file()
    assert run(second.path, "status", "--porcelain") == ""
    assert str(second.path) in listed(repo)


async def test_a_spare_goes_to_an_empty_target_directory_not_inside_it(
    repo: Path, worktree_root: Path
) -> None:
    provider = LocalWorktreeProvider(repo)
    await put_aside(provider, worktree_root, 1)
    target = worktree_root / "s1"
    target.mkdir(parents=True)
    made = await provider.create("s1", "kairo/s1", "main", target)
    assert made.path == target.resolve() and (target / "README.md").is_file()
    assert str(target) in listed(repo) and spares(repo) == []


async def test_spares_kept_are_capped_and_the_rest_removed(repo: Path, worktree_root: Path) -> None:
    provider = LocalWorktreeProvider(repo, spares_kept=1)
    made = [
        await provider.create(f"s{i}", f"kairo/s{i}", "main", worktree_root / f"s{i}")
        for i in range(3)
    ]
    for workspace in made:
        await provider.release(workspace.path)
    assert len(spares(repo)) == 1
    assert listed(repo) == [str(repo), str(spares(repo)[0])]
    assert not any(workspace.path.exists() for workspace in made)

    none_kept = LocalWorktreeProvider(repo, spares_kept=0)
    other = await none_kept.create("t", "kairo/t", "main", worktree_root / "t")
    await none_kept.release(other.path)
    assert len(spares(repo)) == 0  # it took the spare, and released it for good


async def test_an_existing_branch_is_refused_before_a_spare_is_moved(
    repo: Path, worktree_root: Path
) -> None:
    provider = LocalWorktreeProvider(repo)
    await provider.release(
        (await provider.create("s1", "kairo/s1", "main", worktree_root / "s1")).path
    )
    run(repo, "branch", "taken", "main")
    with pytest.raises(StepFailed, match="already exists"):
        await provider.create("s2", "taken", "main", worktree_root / "s2")
    assert len(spares(repo)) == 1 and not (worktree_root / "s2").exists()


async def test_a_create_cut_short_after_moving_a_spare_starts_again(
    repo: Path, worktree_root: Path
) -> None:
    provider = await with_one_spare(repo, worktree_root)
    # What a crash between the move and the switch leaves: the spare at the new path, on
    # the commit it was put aside at, and no new branch yet.
    path = worktree_root / "s2"
    run(repo, "worktree", "move", str(spares(repo)[0]), str(path))
    made = await provider.create("s2", "kairo/s2", "main", path)
    assert made.path == path.resolve() and made.base_commit == await rev_parse(repo, "main")
    assert (path / "docs" / "guide.md").is_file()
    assert run(path, "symbolic-ref", "HEAD").strip() == "refs/heads/kairo/s2"
    assert spares(repo) == []


def kill_during_move(repo: Path, source: Path, target: Path) -> None:
    """What a kill inside `git worktree move` leaves: the directory renamed, git's record
    of it not yet, and the move written down beforehand."""
    journal = repo / ".git" / "kairo" / "worktree-move"
    journal.write_text(json.dumps({"from": str(source), "to": str(target)}))
    source.rename(target)


async def test_a_kill_while_a_spare_was_moved_out_is_repaired(
    repo: Path, worktree_root: Path
) -> None:
    provider = await with_one_spare(repo, worktree_root)
    path = worktree_root / "s2"
    kill_during_move(repo, spares(repo)[0], path)

    made = await provider.create("s2", "kairo/s2", "main", path)
    assert made.path == path.resolve()
    assert run(path, "symbolic-ref", "HEAD").strip() == "refs/heads/kairo/s2"
    assert listed(repo) == [str(repo), str(path.resolve())]
    assert not (repo / ".git" / "kairo" / "worktree-move").exists()


async def test_a_kill_while_a_worktree_was_put_aside_leaves_a_spare(
    repo: Path, worktree_root: Path
) -> None:
    provider = LocalWorktreeProvider(repo)
    made = await provider.create("s1", "kairo/s1", "main", worktree_root / "s1")
    run(made.path, "switch", "--quiet", "--detach")
    spare = pool(repo) / "0123456789ab"  # the pool exists: the create added the worktree there
    kill_during_move(repo, made.path, spare)

    # Without the repair, git's prune would have forgotten it: an orphan on disk.
    assert await provider.remove_spares() == ([spare], [])
    assert not spare.exists() and listed(repo) == [str(repo)]


async def test_a_git_killed_inside_its_move_leaves_a_spare_git_still_knows(
    repo: Path, worktree_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = LocalWorktreeProvider(repo)
    made = await provider.create("s1", "kairo/s1", "main", worktree_root / "s1")
    # A worktree git must move (one locked since, say, or of git 2.48's relative paths).
    monkeypatch.setattr(spare_worktrees, "_move_by_hand", lambda *_: False)
    # The user's Ctrl-C reaches git too: this one dies after its rename, before it
    # rewrites its record (exit 130), while kairo-orch goes on.
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "git").write_text(
        "#!/bin/sh\n"
        'move=; prev=; last=; for a; do [ "$a" = move ] && move=1; prev=$last; last=$a; done\n'
        'if [ -n "$move" ]; then mv -- "$prev" "$last"; exit 130; fi\n'
        f'exec {shutil.which("git")} "$@"\n'
    )
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    await provider.release(made.path)
    monkeypatch.undo()

    [spare] = spares(repo)
    assert listed(repo) == [str(repo), str(spare)]  # not pruned: an orphan without the repair
    taken = await provider.create("s2", "kairo/s2", "main", worktree_root / "s2")
    assert run(taken.path, "status", "--porcelain") == "" and spares(repo) == []


async def test_a_create_cut_short_after_the_switch_is_adopted(
    repo: Path, worktree_root: Path
) -> None:
    provider = LocalWorktreeProvider(repo)
    old = await provider.create("s1", "kairo/s1", "main~1", worktree_root / "s1")
    write(old.path / "stray.txt", "left by the agent\n")
    await provider.release(old.path)
    # A crash after the switch made the branch, before WorkspaceCreated was recorded.
    path = worktree_root / "s2"
    run(repo, "worktree", "move", str(spares(repo)[0]), str(path))
    run(path, "switch", "--quiet", "--create", "kairo/s2", "main")
    with pytest.raises(StepFailed):
        await provider.create("s2", "kairo/s2", "main", path)
    adopted = await provider.adopt("s2", "kairo/s2", path)
    assert adopted is not None and adopted.base_commit == await rev_parse(repo, "main")
    assert run(path, "status", "--porcelain") == ""


async def test_concurrent_creates_share_out_the_spares(repo: Path, worktree_root: Path) -> None:
    provider = LocalWorktreeProvider(repo)
    await put_aside(provider, worktree_root, 2)
    assert len(spares(repo)) == 2
    async with trio.open_nursery() as nursery:
        for i in range(4):
            nursery.start_soon(
                provider.create, f"s{i}", f"kairo/s{i}", "main", worktree_root / f"s{i}"
            )
    assert spares(repo) == []
    for i in range(4):
        assert run(worktree_root / f"s{i}", "status", "--porcelain") == ""
        assert (worktree_root / f"s{i}" / "src" / "app.py").is_file()


async def test_remove_spares_removes_every_one(repo: Path, worktree_root: Path) -> None:
    provider = LocalWorktreeProvider(repo)
    await put_aside(provider, worktree_root, 2)
    kept = spares(repo)
    assert await provider.remove_spares() == (kept, []) and len(kept) == 2
    assert spares(repo) == [] and listed(repo) == [str(repo)]


def test_how_many_spares_are_kept_comes_from_the_environment() -> None:
    assert spares_to_keep({}) == SPARES_KEPT
    assert spares_to_keep({"KAIRO_SPARE_WORKTREES": " 4 "}) == 4
    assert spares_to_keep({"KAIRO_SPARE_WORKTREES": "0"}) == 0
    for bad in ("-1", "many", "2.5", "²"):
        with pytest.raises(UsageError, match="KAIRO_SPARE_WORKTREES"):
            spares_to_keep({"KAIRO_SPARE_WORKTREES": bad})


async def test_none_are_kept_when_the_environment_says_0(
    repo: Path, worktree_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAIRO_SPARE_WORKTREES", "0")
    provider = LocalWorktreeProvider(repo)
    made = await provider.create("s1", "kairo/s1", "main", worktree_root / "s1")
    await provider.release(made.path)
    assert spares(repo) == [] and listed(repo) == [str(repo)]


async def test_a_worktree_that_is_not_a_plain_checkout_is_removed_not_kept(
    repo: Path, worktree_root: Path
) -> None:
    provider = LocalWorktreeProvider(repo)
    flagged = await provider.create("s1", "kairo/s1", "main", worktree_root / "s1")
    run(flagged.path, "update-index", "--skip-worktree", "README.md")
    sparse = await provider.create("s2", "kairo/s2", "main", worktree_root / "s2")
    run(sparse.path, "sparse-checkout", "set", "src")
    for workspace in (flagged, sparse):
        await provider.release(workspace.path)
        assert not workspace.path.exists()
    # Kept, the next agent's edits to README.md would be invisible to its commit.
    assert spares(repo) == [] and listed(repo) == [str(repo)]


async def test_what_the_last_tree_ignored_does_not_reach_the_next_agent(
    repo: Path, worktree_root: Path
) -> None:
    run(repo, "switch", "--quiet", "-c", "ignores-generated")
    write(repo / ".gitignore", "*.log\nbuild/\ngenerated/\n")
    run(repo, "commit", "--quiet", "-am", "ignore generated/")
    run(repo, "switch", "--quiet", "main")
    provider = LocalWorktreeProvider(repo)
    first = await provider.create("s1", "kairo/s1", "ignores-generated", worktree_root / "s1")
    write(first.path / "generated" / "out.bin", "the last agent's output\n")
    write(first.path / "nested" / "file.txt", "a repository the agent made\n")
    run(first.path / "nested", "init", "--quiet")
    await provider.release(first.path)
    assert len(spares(repo)) == 1

    second = await provider.create("s2", "kairo/s2", "main", worktree_root / "s2")
    assert spares(repo) == []
    assert not (second.path / "generated").exists() and not (second.path / "nested").exists()
    assert run(second.path, "status", "--porcelain", "--untracked-files=all") == ""


async def test_a_spare_that_cannot_be_switched_gives_way_to_a_new_worktree(
    repo: Path, worktree_root: Path
) -> None:
    run(repo, "switch", "--quiet", "-c", "with-vendor")
    write(repo / "vendor" / "lib" / "x", "tracked here\n")
    run(repo, "add", "vendor")
    run(repo, "commit", "--quiet", "-m", "vendor")
    run(repo, "switch", "--quiet", "main")
    provider = LocalWorktreeProvider(repo)
    first = await provider.create("s1", "kairo/s1", "main", worktree_root / "s1")
    write(first.path / "vendor" / "lib" / "x", "an agent's own repository\n")
    run(first.path / "vendor" / "lib", "init", "--quiet")
    await provider.release(first.path)
    assert len(spares(repo)) == 1

    # git will not switch over a repository in the way: the spare goes, a new one is made.
    second = await provider.create("s2", "kairo/s2", "with-vendor", worktree_root / "s2")
    assert (second.path / "vendor" / "lib" / "x").read_text() == "tracked here\n"
    assert run(second.path, "symbolic-ref", "HEAD").strip() == "refs/heads/kairo/s2"
    assert spares(repo) == [] and sorted(listed(repo)) == sorted([str(repo), str(second.path)])


async def test_a_spare_is_moved_by_hand_as_git_would_move_it(
    repo: Path, worktree_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = await with_one_spare(repo, worktree_root)
    [spare] = spares(repo)
    admin = Path(run(spare, "rev-parse", "--absolute-git-dir").strip())
    commands = GitCommands(monkeypatch)
    path = worktree_root / "s2"
    made = await provider.create("s2", "kairo/s2", "main", path)
    monkeypatch.undo()
    ran = commands.taken()
    assert "worktree" not in ran and "read-tree" in ran
    # The record git keeps, as `git worktree move` writes it (git's own move of another
    # worktree below writes the same).
    assert (admin / "gitdir").read_bytes() == f"{path.resolve()}/.git\n".encode()
    other = await provider.create("s3", "kairo/s3", "main", worktree_root / "s3")
    run(repo, "worktree", "move", str(other.path), str(worktree_root / "moved"))
    theirs = Path(run(worktree_root / "moved", "rev-parse", "--absolute-git-dir").strip())
    assert (
        theirs / "gitdir"
    ).read_bytes() == f"{(worktree_root / 'moved').resolve()}/.git\n".encode()
    run(repo, "worktree", "prune")
    assert str(made.path) in listed(repo)
    repair = await git("worktree", "repair", cwd=repo)
    assert (repair.stdout, repair.stderr) == ("", "")  # nothing for git to put right
    assert not (repo / ".git" / "kairo" / "worktree-move").exists()


async def test_a_spare_locked_since_it_was_put_aside_is_left_alone(
    repo: Path, worktree_root: Path
) -> None:
    provider = await with_one_spare(repo, worktree_root)
    [spare] = spares(repo)
    run(repo, "worktree", "lock", "--reason", "the user's", str(spare))
    made = await provider.create("s2", "kairo/s2", "main", worktree_root / "s2")
    assert run(made.path, "status", "--porcelain") == "" and (made.path / "README.md").is_file()
    assert spares(repo) == [spare] and str(spare) in listed(repo)


async def test_a_locked_spare_is_not_counted_as_kept_nor_removed_by_clean(
    repo: Path, worktree_root: Path
) -> None:
    await with_one_spare(repo, worktree_root)
    [locked] = spares(repo)
    run(repo, "worktree", "lock", str(locked))
    provider = LocalWorktreeProvider(repo, spares_kept=1)
    made = await provider.create("s2", "kairo/s2", "main", worktree_root / "s2")
    await provider.release(made.path)
    # Kept: the one spare there is not one kairo-orch may take.
    [kept] = [spare for spare in spares(repo) if spare != locked]
    assert await provider.remove_spares() == ([kept], [locked])
    assert spares(repo) == [locked] and str(locked) in listed(repo)


def administrative_name(worktree: Path) -> str:
    """The name of the worktree's directory under .git/worktrees/, which agents see."""
    return (worktree / ".git").read_text().strip().rsplit("/", 1)[-1]


async def test_no_worktree_shows_an_agent_a_subtask_name_in_its_git_directory(
    repo: Path, worktree_root: Path
) -> None:
    provider = LocalWorktreeProvider(repo)
    first = await provider.create("fix-a", "kairo/fix-a", "main", worktree_root / "fix-a")
    name = administrative_name(first.path)
    assert "fix-a" not in name
    await provider.release(first.path)
    second = await provider.create("fix-b", "kairo/fix-b", "main", worktree_root / "fix-b")
    assert spares(repo) == []  # the spare was reused, and says nothing of either subtask
    assert administrative_name(second.path) == name


async def test_each_worktree_root_keeps_a_pool_of_its_own(repo: Path, tmp_path: Path) -> None:
    provider = LocalWorktreeProvider(repo)
    elsewhere = tmp_path / "other-root" / "01exec"
    made = await provider.create("s1", "kairo/s1", "main", elsewhere / "s1")
    await provider.release(made.path)
    other = pool(repo, tmp_path / "other-root")
    assert len([p for p in other.iterdir() if p.is_dir()]) == 1

    await provider.create("s2", "kairo/s2", "main", tmp_path / "worktrees" / "01exec" / "s2")

    assert len([p for p in other.iterdir() if p.is_dir()]) == 1  # not taken from there


async def test_repositories_sharing_a_worktree_root_never_share_a_spare(
    repo: Path, worktree_root: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other-repo"
    run(tmp_path, "clone", "--quiet", str(repo), str(other))
    mine = LocalWorktreeProvider(repo)
    made = await mine.create("s1", "kairo/s1", "main", worktree_root / "s1")
    await mine.release(made.path)

    theirs = await LocalWorktreeProvider(other).create(
        "s2", "kairo/s2", "main", worktree_root.parent / "01other" / "s2"
    )

    assert len(spares(repo)) == 1  # still mine
    assert run(theirs.path, "rev-parse", "--git-common-dir").strip() == str(other / ".git")
    assert "kairo/s2" not in run(repo, "branch", "--list", "kairo/s2")


async def test_clean_of_the_spares_empties_every_pool_the_old_one_too(
    repo: Path, worktree_root: Path, tmp_path: Path
) -> None:
    provider = LocalWorktreeProvider(repo)
    for root in (worktree_root, tmp_path / "other-root" / "01exec"):
        made = await provider.create(
            root.parent.name, f"kairo/{root.parent.name}", "main", root / "s"
        )
        await provider.release(made.path)
        root.rmdir()  # what clean leaves of an execution's directory
    old = repo / ".git" / "kairo" / "spare-worktrees" / "0123456789ab"  # kairo-orch 0.1's
    run(repo, "worktree", "add", "--quiet", "--detach", str(old), "main")

    removed, locked = await provider.remove_spares()

    assert (len(removed), locked) == (3, []) and listed(repo) == [str(repo)]
    assert not (tmp_path / "worktrees").exists() and not (tmp_path / "other-root").exists()


async def test_spares_are_kept_only_while_they_fit_the_disk_budget(
    repo: Path, worktree_root: Path
) -> None:
    provider = LocalWorktreeProvider(repo, spare_budget=1024 * 1024)
    small = await provider.create("small", "kairo/small", "main", worktree_root / "small")
    big = await provider.create("big", "kairo/big", "main", worktree_root / "big")
    write(big.path / "build" / "cache.bin", "x" * (2 * 1024 * 1024))  # ignored: goes with it

    await provider.release(big.path)  # 2 MB: past the budget, removed
    await provider.release(small.path)  # kept, its size written beside it

    assert len(spares(repo)) == 1  # the small one
    assert not big.path.exists() and str(big.path) not in listed(repo)
    assert 0 < pool_bytes(pool(repo)) < 1024 * 1024


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 2 * 1024**3), ("0", 0), ("500M", 500 * 1024**2), ("2g", 2 * 1024**3), ("1GB", 1024**3)],
)
def test_the_spares_disk_budget_is_a_setting(text: str, expected: int) -> None:
    assert spare_bytes({"KAIRO_SPARE_DISK": text}) == expected


def test_a_disk_budget_that_is_none_is_refused() -> None:
    with pytest.raises(UsageError, match="KAIRO_SPARE_DISK must be how much disk"):
        spare_bytes({"KAIRO_SPARE_DISK": "lots"})
