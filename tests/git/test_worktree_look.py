"""A look at a worktree an agent works in (its changed paths, whether they would merge),
and the conflict map of branches: real git, and the worktree's own index never touched."""

from __future__ import annotations

import hashlib
from pathlib import Path

import trio

from orchestrator.git.conflict_map import BranchToMap, conflict_map
from orchestrator.git.worktree_look import conflicts_with, worktree_change
from tests.git.conftest import run, write


def worktree(repo: Path, name: str) -> Path:
    path = repo.parent / "worktrees" / name
    run(repo, "worktree", "add", "--quiet", "-b", name, str(path), "main")
    return path


def index_bytes(worktree: Path) -> str:
    git_dir = Path(run(worktree, "rev-parse", "--absolute-git-dir").strip())
    return hashlib.sha256((git_dir / "index").read_bytes()).hexdigest()


async def test_the_paths_a_worktree_changed_are_seen_without_its_index(
    repo: Path, tmp_path: Path
) -> None:
    work = worktree(repo, "fix-a")
    start = run(repo, "rev-parse", "main").strip()
    write(work / "src" / "app.py", "def main():\n    return 2\n")  # modified
    write(work / "new.txt", "new\n")  # untracked
    (work / "README.md").unlink()  # deleted
    write(work / "debug.log", "ignored\n")
    run(work, "add", "src/app.py")  # the agent staged part of it
    before = index_bytes(work)
    index = tmp_path / "looks" / "fix-a.index"
    change = await worktree_change(work, start_commit=start, index=index)
    assert change.paths == {"src/app.py", "new.txt", "README.md"}
    assert index_bytes(work) == before  # the agent's index is as it left it
    assert run(work, "status", "--porcelain").splitlines() == [
        " D README.md",
        "M  src/app.py",
        "?? new.txt",
    ]
    # The next look, the index kept: a file changed back and another edited.
    write(work / "src" / "app.py", "def main():\n    return 1\n")
    write(work / "src" / "util.py", "changed\n")
    again = await worktree_change(work, start_commit=start, index=index)
    assert again.paths == {"src/util.py", "new.txt", "README.md"}
    # Committed by the agent, the same work is the same change since the start.
    run(work, "add", "-A")
    run(work, "commit", "--quiet", "-m", "agent")
    committed = await worktree_change(work, start_commit=start, index=index, last=again)
    assert (committed.tree, committed.paths) == (again.tree, again.paths)
    # Nothing changed since: `add` leaves the index as it was, and the last look holds
    # (once the index is a second newer than the files: git refreshes racily clean ones).
    await trio.sleep(1.1)
    committed = await worktree_change(work, start_commit=start, index=index, last=committed)
    assert await worktree_change(work, start_commit=start, index=index, last=committed) is (
        committed
    )
    write(work / "c.txt", "c\n")
    assert (
        "c.txt"
        in (await worktree_change(work, start_commit=start, index=index, last=committed)).paths
    )


async def test_a_worktree_change_that_would_conflict_with_merged_work(
    repo: Path, tmp_path: Path
) -> None:
    start = run(repo, "rev-parse", "main").strip()
    work = worktree(repo, "fix-b")
    write(work / "src" / "util.py", "theirs\n")
    write(work / "docs" / "guide.md", "guide, edited\n")
    change = await worktree_change(work, start_commit=start, index=tmp_path / "b.index")
    # What was merged meanwhile: another edit of util.py, on a branch of main.
    run(repo, "checkout", "--quiet", "-b", "merged")
    write(repo / "src" / "util.py", "ours\n")
    run(repo, "commit", "--quiet", "-am", "merged work")
    onto = run(repo, "rev-parse", "HEAD").strip()
    (conflict,) = await conflicts_with(repo, change.tree, start_commit=start, onto=onto)
    assert (conflict.path, conflict.kind) == ("src/util.py", "content")
    assert await conflicts_with(repo, change.tree, start_commit=start, onto=start) == ()


async def test_the_conflict_map_merges_only_pairs_that_share_a_path(repo: Path) -> None:
    start = run(repo, "rev-parse", "main").strip()
    heads = {}
    edits = {
        "a": {"src/util.py": "a\n", "a.txt": "a\n"},
        "b": {"src/util.py": "b\n"},  # conflicts with a
        "c": {"a.txt": "a\n"},  # the same edit as a's: overlaps, merges clean
        "d": {"d.txt": "d\n"},  # alone
    }
    for name, files in edits.items():
        work = worktree(repo, name)
        for path, text in files.items():
            write(work / path, text)
        run(work, "add", "-A")
        run(work, "commit", "--quiet", "-m", name)
        heads[name] = run(work, "rev-parse", "HEAD").strip()
    write(repo.parent / "worktrees" / "d" / "src" / "util.py", "d, uncommitted\n")
    branches = [BranchToMap(name, "succeeded", start, heads[name]) for name in ("a", "b", "c")] + [
        BranchToMap("d", "running", start, heads["d"], repo.parent / "worktrees" / "d")
    ]
    found = await conflict_map(repo, branches)
    assert [b.subtask_id for b in found.branches] == ["a", "b", "c", "d"]
    assert found.branches[3].worktree_included and "src/util.py" in found.branches[3].paths
    pairs = {(p.first, p.second): p for p in found.pairs}
    assert set(pairs) == {("a", "b"), ("a", "c"), ("a", "d"), ("b", "d")}
    assert [(c.path, c.kind) for c in pairs[("a", "b")].conflicts] == [("src/util.py", "content")]
    assert pairs[("a", "c")].clean and pairs[("a", "c")].shared == ("a.txt",)
    assert not pairs[("b", "d")].clean  # d's uncommitted edit counts
    assert [(p.first, p.second) for p in found.conflicting] == [("a", "b"), ("a", "d"), ("b", "d")]
