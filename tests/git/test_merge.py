from __future__ import annotations

from pathlib import Path

import pytest
import trio

from orchestrator.errors import StepFailed
from orchestrator.git import merge as merge_module
from orchestrator.git.commit import commit_all
from orchestrator.git.merge import (
    Conflicted,
    Merged,
    integration_tree,
    merge_branch,
    parse_merge_tree,
)
from orchestrator.git.refs import create_branch, is_ancestor, rev_parse, update_ref
from orchestrator.git.repo import Identity
from orchestrator.git.workspace import LocalWorktreeProvider
from tests.git.conftest import GitCommands, run, snapshot, user_git, write

IDENTITY = Identity("kairo-orch", "kairo-orch@localhost")
TARGET = "refs/heads/kairo/integration"


class Subtasks:
    """Branches made the way the supervisor makes them: worktree, edit, commit_all."""

    def __init__(self, repo: Path, root: Path) -> None:
        self.repo, self.root = repo, root
        self.provider = LocalWorktreeProvider(repo)

    async def branch(self, name: str, changes: dict[str, str | None], base: str = "main") -> str:
        ws = await self.provider.create(name, f"kairo/{name}", base, self.root / name)
        for path, text in changes.items():
            if text is None:
                (ws.path / path).unlink()
            else:
                write(ws.path / path, text)
        outcome = await commit_all(
            ws.path, message=name, trailers={}, identity=IDENTITY, start_commit=ws.base_commit
        )
        await self.provider.release(ws.path)
        return outcome.head_commit


@pytest.fixture
def subtasks(repo: Path, worktree_root: Path) -> Subtasks:
    return Subtasks(repo, worktree_root)


@pytest.fixture
async def integration(repo: Path) -> str:
    await create_branch(repo, TARGET, "main")
    return await rev_parse(repo, TARGET)


async def merge(repo: Path, source: str, message: str = "merge") -> Merged | Conflicted:
    """A merge as the supervisor makes it: told where the repository's git files are."""
    return await merge_branch(
        repo,
        target_ref=TARGET,
        source_commit=source,
        message=message,
        identity=IDENTITY,
        git_common_dir=repo / ".git",
    )


async def test_clean_merge_makes_a_two_parent_commit_and_moves_the_target(
    dirty_repo: Path, subtasks: Subtasks, integration: str
) -> None:
    # Covers the whole cycle: create, agent edits, commit, release, merge.
    before = snapshot(dirty_repo)
    a = await subtasks.branch("a", {"src/app.py": "def main():\n    return 'a'\n"})
    b = await subtasks.branch("b", {"docs/guide.md": None, "src/b.py": "b = 1\n"})

    first = await merge(dirty_repo, a, "Merge subtask a")
    assert isinstance(first, Merged)
    assert first.previous_commit == integration
    second = await merge(dirty_repo, b, "Merge subtask b\n\nKairo-Subtask: b")
    assert isinstance(second, Merged)
    assert second.previous_commit == first.merge_commit
    assert await rev_parse(dirty_repo, TARGET) == second.merge_commit

    parents = await user_git(dirty_repo, "rev-list", "--parents", "-n1", second.merge_commit)
    assert parents.stdout.split() == [second.merge_commit, first.merge_commit, b]
    body = await user_git(dirty_repo, "log", "-1", "--format=%B%an", second.merge_commit)
    assert body.stdout == "Merge subtask b\n\nKairo-Subtask: b\nkairo-orch\n"
    assert await integration_tree(dirty_repo, TARGET) == second.tree
    files = await user_git(dirty_repo, "ls-tree", "-r", "--name-only", TARGET)
    assert "src/b.py" in files.stdout.split() and "docs/guide.md" not in files.stdout.split()
    app = await user_git(dirty_repo, "show", f"{TARGET}:src/app.py")
    assert "'a'" in app.stdout
    assert snapshot(dirty_repo) == before


async def test_merging_again_changes_nothing(
    repo: Path, subtasks: Subtasks, integration: str
) -> None:
    a = await subtasks.branch("a", {"a.txt": "a\n"})
    first = await merge(repo, a)
    assert isinstance(first, Merged)
    # The tip is that very merge (its writer died before recording it, say): it is found
    # as the merge it was, on the commit it was made on, and nothing is written.
    again = await merge(repo, a)
    assert again == Merged(
        first.merge_commit, first.previous_commit, first.tree, already_merged=True
    )
    assert await rev_parse(repo, TARGET) == first.merge_commit
    # A subtask that changed nothing (its branch is the base) merges as a no-op too.
    empty = await merge(repo, integration)
    assert empty == Merged(first.merge_commit, first.merge_commit, first.tree, True)


async def test_conflicts_are_classified_and_leave_the_target_alone(
    dirty_repo: Path, subtasks: Subtasks, integration: str
) -> None:
    ours = await subtasks.branch(
        "ours",
        {"src/util.py": "line 1\nOURS\n", "new.txt": "ours\n", "docs/guide.md": "edited\n"},
    )
    theirs = await subtasks.branch(
        "theirs",
        {"src/util.py": "line 1\nTHEIRS\n", "new.txt": "theirs\n", "docs/guide.md": None},
    )
    assert isinstance(await merge(dirty_repo, ours), Merged)
    moved_to = await rev_parse(dirty_repo, TARGET)
    before = snapshot(dirty_repo)

    outcome = await merge(dirty_repo, theirs)

    assert isinstance(outcome, Conflicted)
    assert [(c.path, c.kind) for c in outcome.conflicts] == [
        ("docs/guide.md", "modify/delete"),
        ("new.txt", "add/add"),
        ("src/util.py", "content"),
    ]
    assert outcome.conflicts[1].message == "CONFLICT (add/add): Merge conflict in new.txt"
    assert await rev_parse(dirty_repo, TARGET) == moved_to
    assert snapshot(dirty_repo) == before


async def test_binary_and_rename_delete_conflicts(
    repo: Path, subtasks: Subtasks, integration: str
) -> None:
    app = "def main():\n    return 1\n"
    base = await subtasks.branch("base", {"blob.bin": "\0base"})
    assert isinstance(await merge(repo, base), Merged)
    ours = await subtasks.branch(
        "ours", {"blob.bin": "\0ours", "src/app.py": None, "src/main.py": app}, base=TARGET
    )
    theirs = await subtasks.branch(
        "theirs", {"blob.bin": "\0theirs", "src/app.py": None}, base=TARGET
    )
    assert isinstance(await merge(repo, ours), Merged)
    outcome = await merge(repo, theirs)
    assert isinstance(outcome, Conflicted)
    assert [(c.path, c.kind) for c in outcome.conflicts] == [
        # git words this one "warning: Cannot merge binary files: ..." with no "(kind)"
        # in the message; the kind comes from its type token, CONFLICT (binary).
        ("blob.bin", "binary"),
        ("src/main.py", "rename/delete"),
    ]
    assert outcome.conflicts[0].message.startswith("warning: Cannot merge binary files")


async def test_merge_refuses_a_checked_out_target(repo: Path, subtasks: Subtasks) -> None:
    a = await subtasks.branch("a", {"a.txt": "a\n"})
    main = await rev_parse(repo, "main")
    with pytest.raises(StepFailed, match="checked out at") as info:
        await merge_branch(
            repo, target_ref="refs/heads/main", source_commit=a, message="m", identity=IDENTITY
        )
    assert info.value.branch == "main"
    assert await rev_parse(repo, "main") == main


async def test_merge_into_a_missing_target_is_a_failed_step(repo: Path) -> None:
    with pytest.raises(StepFailed, match="does not name a commit"):
        await merge(repo, "main")


async def test_plan_order_gives_the_same_tree_every_time(repo: Path, subtasks: Subtasks) -> None:
    heads = [await subtasks.branch(f"s{i}", {f"f{i}.txt": f"{i}\n"}) for i in range(4)]
    trees = []
    for run_no in range(2):
        target = f"refs/heads/kairo/run{run_no}"
        await create_branch(repo, target, "main")
        for head in heads:
            await merge_branch(
                repo, target_ref=target, source_commit=head, message="m", identity=IDENTITY
            )
        trees.append(await integration_tree(repo, target))
    assert trees[0] == trees[1]


async def test_concurrent_writer_loses_the_compare_and_swap(
    repo: Path, subtasks: Subtasks, integration: str
) -> None:
    a = await subtasks.branch("a", {"a.txt": "a\n"})
    b = await subtasks.branch("b", {"b.txt": "b\n"})
    results: list[object] = []

    async def attempt(source: str) -> None:
        try:
            results.append(await merge(repo, source))
        except StepFailed as exc:
            results.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(attempt, a)
        nursery.start_soon(attempt, b)
    # Either both went through one after the other, or one saw the other's move and
    # failed; never does one overwrite the other (a lost update).
    final = await rev_parse(repo, TARGET)
    merged = [r for r in results if isinstance(r, Merged)]
    assert merged
    for m in merged:
        assert await is_ancestor(repo, m.merge_commit, final)
    for failure in (r for r in results if isinstance(r, StepFailed)):
        assert "moved while kairo-orch was updating it" in failure.message
    with pytest.raises(StepFailed, match="moved"):
        await update_ref(repo, TARGET, integration, integration)


async def test_a_source_whose_changes_are_in_already_still_gets_a_merge_commit(
    repo: Path, subtasks: Subtasks, integration: str
) -> None:
    # Two subtasks make the same edit: merging the second gives the target's own tree,
    # but the target does not contain it, so it is merged (a commit), not skipped.
    a = await subtasks.branch("a", {"a.txt": "same\n"})
    b = await subtasks.branch("b", {"a.txt": "same\n"})
    first = await merge(repo, a)
    assert isinstance(first, Merged)
    second = await merge(repo, b)
    assert isinstance(second, Merged) and not second.already_merged
    assert second.tree == first.tree
    parents = await user_git(repo, "rev-list", "--parents", "-n1", TARGET)
    assert parents.stdout.split() == [second.merge_commit, first.merge_commit, b]
    again = await merge(repo, b)
    assert again == Merged(second.merge_commit, first.merge_commit, first.tree, True)


@pytest.mark.parametrize("source", ["nope", "refs/heads/nope", "0" * 40, "main^{tree}", "main~9"])
async def test_merging_a_missing_source_is_a_failed_step_naming_it(
    repo: Path, integration: str, source: str
) -> None:
    if source == "main^{tree}":
        source = (await user_git(repo, "rev-parse", "main^{tree}")).stdout.strip()
    with pytest.raises(StepFailed) as info:
        await merge(repo, source)
    assert info.value.message == f"{source!r} does not name a commit in the repository at {repo}"
    assert info.value.branch == "kairo/integration"
    assert await rev_parse(repo, TARGET) == integration


async def test_a_named_source_is_the_commit_rev_parse_names(
    repo: Path, subtasks: Subtasks, integration: str
) -> None:
    heads = [await subtasks.branch(f"s{i}", {f"f{i}.txt": f"{i}\n"}) for i in range(5)]
    await user_git(repo, "branch", "x", heads[0])
    await user_git(repo, "tag", "x", heads[1])  # a tag comes before a branch of its name
    await user_git(repo, "tag", "-a", "-m", "annotated", "ann", heads[2])
    await user_git(repo, "branch", "y", heads[3])
    await user_git(repo, "update-ref", "y", heads[4])  # .git/y comes before refs/heads/y
    expected = {
        "x": heads[1],
        "ann": heads[2],
        "refs/tags/ann": heads[2],
        "y": heads[4],
        "refs/heads/y": heads[3],
        "kairo/s0": heads[0],
        "kairo/s3~0": heads[3],
    }
    for name, head in expected.items():
        await update_ref(repo, TARGET, integration, await rev_parse(repo, TARGET))
        outcome = await merge(repo, name)
        assert isinstance(outcome, Merged) and not outcome.already_merged, name
        parents = await user_git(repo, "rev-list", "--parents", "-n1", TARGET)
        assert parents.stdout.split() == [outcome.merge_commit, integration, head], name


MERGE = ["merge-tree", "commit-tree", "update-ref"]


@pytest.fixture
def no_tree_known(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose merges have seen no commit yet: the tests' repositories are made
    alike, so an earlier test's commits have the same oids."""
    monkeypatch.setattr(merge_module, "_TREES", merge_module._CommitTrees(size=64))


@pytest.mark.usefixtures("no_tree_known")
async def test_a_merge_onto_its_own_last_merge_runs_three_git_processes(
    repo: Path, subtasks: Subtasks, integration: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    heads = [await subtasks.branch(f"s{i}", {f"f{i}.txt": f"{i}\n"}) for i in range(3)]
    commands = GitCommands(monkeypatch)
    await merge(repo, heads[0])
    assert commands.taken() == ["for-each-ref", *MERGE]  # the first: its tree is not known
    await merge(repo, heads[1])
    assert commands.taken() == MERGE
    await merge(repo, "kairo/s2")  # a name costs one rev-parse
    assert commands.taken() == ["rev-parse", *MERGE]
    outcome = await merge(repo, heads[2])
    assert isinstance(outcome, Merged) and outcome.already_merged
    assert commands.taken() == ["merge-tree", "rev-list"]
    # Without the git directory, or where the branch is not a loose ref, git is asked.
    await update_ref(repo, TARGET, integration, await rev_parse(repo, TARGET))
    commands.taken()
    await merge_branch(
        repo, target_ref=TARGET, source_commit=heads[0], message="m", identity=IDENTITY
    )
    assert commands.taken() == ["for-each-ref", *MERGE]
    await user_git(repo, "pack-refs", "--all")
    commands.taken()
    await merge(repo, heads[1])
    assert commands.taken() == ["for-each-ref", *MERGE]


async def test_a_tip_moved_by_someone_else_is_merged_onto(
    repo: Path, subtasks: Subtasks, integration: str
) -> None:
    a, b, c = [await subtasks.branch(n, {f"{n}.txt": f"{n}\n"}) for n in "abc"]
    first = await merge(repo, a)
    assert isinstance(first, Merged)
    # The user commits onto the integration branch between two merges: a tip no merge of
    # this process wrote.
    await user_git(repo, "branch", "-f", "kairo/integration", b)
    second = await merge(repo, c)
    assert isinstance(second, Merged) and second.previous_commit == b
    # ...or moves it back to a commit a merge wrote: its tree is known, and still right.
    await user_git(repo, "branch", "-f", "kairo/integration", first.merge_commit)
    third = await merge(repo, c)
    assert isinstance(third, Merged) and third.previous_commit == first.merge_commit
    assert third.tree == await integration_tree(repo, TARGET)
    again = await merge(repo, a)
    assert isinstance(again, Merged) and again.already_merged


@pytest.mark.parametrize(
    "where",
    ["the main worktree", "a linked worktree", "a symlinked HEAD", "HEAD through another ref"],
)
async def test_a_target_checked_out_after_a_merge_is_refused(
    repo: Path, subtasks: Subtasks, integration: str, worktree_root: Path, where: str
) -> None:
    a, b = [await subtasks.branch(n, {f"{n}.txt": f"{n}\n"}) for n in "ab"]
    assert isinstance(await merge(repo, a), Merged)
    tip = await rev_parse(repo, TARGET)
    checkout = repo
    if where == "the main worktree":
        await user_git(repo, "switch", "--quiet", "kairo/integration")
    elif where == "a symlinked HEAD":  # as git writes it with core.preferSymlinkRefs
        await user_git(repo, "-c", "core.preferSymlinkRefs=true", "symbolic-ref", "HEAD", TARGET)
        assert (repo / ".git" / "HEAD").is_symlink()
    elif where == "HEAD through another ref":
        await user_git(repo, "symbolic-ref", "refs/heads/alias", TARGET)
        await user_git(repo, "symbolic-ref", "HEAD", "refs/heads/alias")
    else:
        checkout = worktree_root / "user"
        await user_git(repo, "worktree", "add", "--quiet", str(checkout), "kairo/integration")
    with pytest.raises(StepFailed, match=f"checked out at {checkout}"):
        await merge(repo, b)
    assert await rev_parse(repo, TARGET) == tip


# The parser on output captured from git 2.39 (see merge.py for the format).
CAPTURED = (
    "79483699a5366aee0b82ca2c4120a49145d6102e\x00"
    "100644 de98 1\tc.txt\x00100644 77f2 2\tc.txt\x00100644 7be7 3\tc.txt\x00"
    "100644 587b 3\tfd/inner\x00100644 59f2 2\tfd~A\x00"
    "100644 587b 1\tr.txt\x00100644 587b 2\trA.txt\x00"
    "\x00"
    "1\x00c.txt\x00Auto-merging\x00Auto-merging c.txt\n\x00"
    "1\x00c.txt\x00CONFLICT (contents)\x00CONFLICT (content): Merge conflict in c.txt\n\x00"
    "2\x00fd~A\x00fd\x00CONFLICT (file/directory)\x00CONFLICT (file/directory): directory in the "
    "way of fd from A; moving it to fd~A instead.\n\x00"
    "3\x00r.txt\x00rA.txt\x00fd/inner\x00CONFLICT (rename/rename)\x00"
    "CONFLICT (rename/rename): r.txt renamed to rA.txt in A and to fd/inner in B.\n\x00"
)


def test_parse_merge_tree_keeps_the_most_specific_kind_per_path() -> None:
    tree, conflicts = parse_merge_tree(CAPTURED)
    assert tree == "79483699a5366aee0b82ca2c4120a49145d6102e"
    assert [(c.path, c.kind) for c in conflicts] == [
        ("c.txt", "content"),
        ("fd/inner", "rename/rename"),
        ("fd~A", "file/directory"),
        ("r.txt", "rename/rename"),
        ("rA.txt", "rename/rename"),
    ]


def test_parse_merge_tree_clean_output() -> None:
    assert parse_merge_tree("abc\x00") == ("abc", ())
    assert parse_merge_tree("abc\x00\x00") == ("abc", ())
    assert parse_merge_tree("abc\x00\x001\x00f\x00Auto-merging\x00Auto-merging f\n\x00") == (
        "abc",
        (),
    )


async def test_gits_own_merge_drivers_apply_as_the_checkout_says_and_no_other_runs(
    repo: Path, subtasks: Subtasks, tmp_path: Path
) -> None:
    """`merge=union` in the checkout's .gitattributes still merges two appends; a driver of
    the repository's config named beside it is not run (the merge is git's own three-way,
    which conflicts)."""
    ran = tmp_path / "driver-ran"
    write(repo / ".gitattributes", "log.txt merge=union\nother.txt merge=custom\n")
    write(repo / "log.txt", "first\n")
    write(repo / "other.txt", "first\n")
    run(repo, "add", ".")
    run(repo, "commit", "-q", "-m", "attributes")
    run(repo, "config", "merge.custom.driver", f"touch {ran}; true")
    await create_branch(repo, TARGET, "main")
    a = await subtasks.branch("a", {"log.txt": "first\na\n", "other.txt": "first\na\n"})
    b = await subtasks.branch("b", {"log.txt": "first\nb\n", "other.txt": "first\nb\n"})
    assert isinstance(await merge(repo, a), Merged)
    outcome = await merge(repo, b)
    assert isinstance(outcome, Conflicted)
    assert [c.path for c in outcome.conflicts] == ["other.txt"]  # log.txt merged by union
    assert not ran.exists()
    # The user's own git would have run the driver (and taken its word for a clean merge).
    run(repo, "merge-tree", "--write-tree", a, b)
    assert ran.exists()
