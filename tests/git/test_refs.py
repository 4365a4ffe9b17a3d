from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import StepFailed, UsageError
from orchestrator.git.history import DiffStat, commits_between, diffstat, tracked_files
from orchestrator.git.refs import (
    BranchExists,
    branch_exists,
    create_branch,
    delete_branch,
    is_ancestor,
    rev_parse,
    update_ref,
)
from tests.git.conftest import run, user_git, write


async def test_rev_parse_resolves_names_to_commit_oids(repo: Path) -> None:
    head = run(repo, "rev-parse", "HEAD").strip()
    assert await rev_parse(repo, "main") == head
    assert await rev_parse(repo, head[:10]) == head
    # An annotated tag resolves to the commit, not to the tag object.
    run(repo, "tag", "-a", "-m", "v1", "v1")
    assert await rev_parse(repo, "v1") == head


@pytest.mark.parametrize("rev", ["no-such-branch", "-n", "HEAD~99", "HEAD:README.md"])
async def test_rev_parse_unknown_revision_is_a_usage_error(repo: Path, rev: str) -> None:
    with pytest.raises(UsageError, match="does not name a commit"):
        await rev_parse(repo, rev)


async def test_create_branch_refuses_an_existing_branch(repo: Path) -> None:
    first = await rev_parse(repo, "HEAD~1")
    await create_branch(repo, "kairo/a", first)
    assert await branch_exists(repo, "kairo/a")
    assert await rev_parse(repo, "kairo/a") == first
    with pytest.raises(BranchExists, match="already exists") as info:
        await create_branch(repo, "kairo/a", "HEAD")
    assert info.value.branch == "kairo/a"
    assert await rev_parse(repo, "kairo/a") == first


async def test_update_ref_is_compare_and_swap(repo: Path) -> None:
    first, second = await rev_parse(repo, "HEAD~1"), await rev_parse(repo, "HEAD")
    await create_branch(repo, "integration", first)
    await update_ref(repo, "refs/heads/integration", second, first)
    assert await rev_parse(repo, "integration") == second
    # Someone else's idea of the old value is stale now: the swap fails, the ref stays.
    with pytest.raises(StepFailed, match="moved") as info:
        await update_ref(repo, "refs/heads/integration", first, first)
    assert info.value.branch == "integration"
    assert await rev_parse(repo, "integration") == second


async def test_update_ref_wants_a_full_ref_name(repo: Path) -> None:
    head = await rev_parse(repo, "HEAD")
    with pytest.raises(ValueError, match="full ref"):
        await update_ref(repo, "main", head, head)
    assert not (repo / ".git" / "main").exists()


async def test_delete_branch_is_idempotent_and_spares_checked_out_branches(repo: Path) -> None:
    await create_branch(repo, "gone", "HEAD")
    assert await delete_branch(repo, "gone") is True
    assert await delete_branch(repo, "gone") is False
    with pytest.raises(StepFailed, match="cannot delete branch 'main'"):
        await delete_branch(repo, "main")
    assert await branch_exists(repo, "main")


async def test_is_ancestor(repo: Path) -> None:
    assert await is_ancestor(repo, "HEAD~1", "HEAD")
    assert await is_ancestor(repo, "HEAD", "HEAD")
    assert not await is_ancestor(repo, "HEAD", "HEAD~1")


async def test_tracked_files_lists_the_whole_tree_from_a_subdirectory(repo: Path) -> None:
    write(repo / "odd name\nwith newline.txt", "x\n")
    run(repo, "add", "-A")
    run(repo, "commit", "--quiet", "-m", "odd")
    files = await tracked_files(repo / "src", "HEAD")
    assert files == [
        ".gitignore",
        "README.md",
        "docs/guide.md",
        "odd name\nwith newline.txt",
        "src/app.py",
        "src/util.py",
    ]


async def test_diffstat_and_commits_between(repo: Path) -> None:
    base = await rev_parse(repo, "HEAD")
    run(repo, "mv", "docs/guide.md", "docs/manual.md")
    run(repo, "commit", "--quiet", "-m", "rename guide")
    write(repo / "src" / "util.py", "line 1\nchanged\n")
    write(repo / "data.bin", "\0\1\2")
    run(repo, "add", "-A")
    run(repo, "commit", "--quiet", "-m", "edit util")
    head = await rev_parse(repo, "HEAD")

    stat = await diffstat(repo, base, head)
    assert stat.paths == ("data.bin", "docs/guide.md", "docs/manual.md", "src/util.py")
    # The rename counts once; util.py: 1 line changed, 8 removed; binary has no counts.
    assert (stat.files, stat.insertions, stat.deletions) == (3, 1, 9)
    assert stat.text == "3 files changed, 1 insertion(+), 9 deletions(-)"

    commits = await commits_between(repo, base, head)
    assert [c.subject for c in commits] == ["rename guide", "edit util"]
    assert commits[-1].oid == head
    assert str(commits[-1]) == f"{head[:12]} edit util"
    assert await commits_between(repo, head, head) == []


async def test_diffstat_lists_odd_paths_in_git_order_once_each(repo: Path) -> None:
    base = await rev_parse(repo, "HEAD")
    assert await diffstat(repo, base, base) == DiffStat(0, 0, 0, "", ())
    # A rename whose old path gets a new file: both paths once; names git would quote.
    run(repo, "mv", "docs/guide.md", "docs/manual.md")
    write(repo / "docs" / "guide.md", "a new guide\n")
    # "\udcff" is the byte 0xff, which is no UTF-8: it sorts after "\ue000" (0xee 0x80
    # 0x80) as bytes, as git sorts, and before it as text.
    odd = (
        "with space.txt",
        "tab\there.txt",
        "line\nbreak.txt",
        "z.txt",
        "\udcff.txt",
        "\ue000.txt",
    )
    for name in odd:
        (repo / name).write_bytes(b"odd\n")
    run(repo, "add", "-A")
    run(repo, "commit", "--quiet", "-m", "odd names")
    head = await rev_parse(repo, "HEAD")
    listed = await user_git(repo, "diff", "--name-only", "-z", "--no-renames", base, head)
    stat = await diffstat(repo, base, head)
    assert stat.paths == tuple(p for p in listed.stdout.split("\0") if p)
    assert stat.paths.index("\ue000.txt") < stat.paths.index("\udcff.txt")
    assert "line\nbreak.txt" in stat.paths and stat.files == 8
