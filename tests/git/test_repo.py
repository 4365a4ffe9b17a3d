from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import EnvironmentProblem, StepFailed, UsageError
from orchestrator.git.invocation import git
from orchestrator.git.repo import (
    Identity,
    check_git_version,
    discover_repo,
    error_context,
    has_uncommitted_changes,
    has_uncommitted_work,
    parse_git_version,
)
from tests.git.conftest import USER_EMAIL, USER_NAME, run


def test_discover_repo_from_a_subdirectory(repo: Path) -> None:
    paths = discover_repo(repo / "src")
    assert paths.toplevel == repo
    assert paths.git_common_dir == repo / ".git"
    assert paths.git_common_dir.is_absolute()


def test_discover_repo_from_a_linked_worktree_finds_the_shared_git_dir(
    repo: Path, tmp_path: Path
) -> None:
    run(repo, "worktree", "add", "--quiet", "-b", "side", str(tmp_path / "side"))
    paths = discover_repo(tmp_path / "side")
    assert paths.toplevel == tmp_path / "side"
    assert paths.git_common_dir == repo / ".git"
    assert paths.git_dir == repo / ".git" / "worktrees" / "side"


def test_not_a_repository_is_an_environment_problem(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(EnvironmentProblem, match="is not inside a git repository") as info:
        discover_repo(plain)
    assert info.value.exit_code == 5


def test_missing_directory_is_not_mistaken_for_missing_git(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="does not exist"):
        discover_repo(tmp_path / "nowhere")


def test_bare_repository_is_refused(tmp_path: Path) -> None:
    run(tmp_path, "init", "--quiet", "--bare", "bare.git")
    with pytest.raises(EnvironmentProblem, match="bare repository"):
        discover_repo(tmp_path / "bare.git")


async def test_git_not_installed(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(EnvironmentProblem, match="git is not installed"):
        discover_repo(repo)
    with pytest.raises(EnvironmentProblem, match="git is not installed"):
        await git("rev-parse", "HEAD", cwd=repo)


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("git version 2.39.5\n", (2, 39, 5)),
        ("git version 2.39.3 (Apple Git-145)", (2, 39, 3)),
        ("git version 2.40.1.windows.1", (2, 40, 1)),
        ("git version 2.38", (2, 38, 0)),
    ],
)
def test_parse_git_version(text: str, version: tuple[int, int, int]) -> None:
    assert parse_git_version(text) == version


def test_git_older_than_2_38_is_an_environment_problem() -> None:
    check_git_version((2, 38, 0))
    with pytest.raises(EnvironmentProblem, match=r"git 2\.37\.9 is too old.*2\.38"):
        check_git_version((2, 37, 9))


async def test_failed_git_raises_step_failed_with_its_first_stderr_line(repo: Path) -> None:
    # git explains this one over three lines; the first is the one that says what is wrong.
    with pytest.raises(StepFailed, match="fatal: ambiguous argument 'nope'") as info:
        await git("rev-parse", "nope", cwd=repo)
    assert "\n" not in info.value.message
    assert "Use '--'" not in info.value.message
    result = await git("rev-parse", "nope", cwd=repo, check=False)
    assert result.returncode == 128
    assert result.stderr.count("\n") == 3


async def test_git_reads_stdin_and_takes_env(repo: Path) -> None:
    result = await git("mktree", cwd=repo, stdin=b"")
    assert result.stdout.strip() == "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # the empty tree
    env = await git("var", "GIT_AUTHOR_IDENT", cwd=repo, env={"GIT_AUTHOR_NAME": "Someone"})
    assert env.stdout.startswith("Someone <")


async def test_git_ignores_an_inherited_git_dir(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    run(tmp_path, "init", "--quiet", str(other))
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    result = await git("rev-parse", "--absolute-git-dir", cwd=repo)
    assert Path(result.stdout.strip()) == repo / ".git"


async def test_git_never_runs_repository_hooks(repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text("#!/bin/sh\nexit 1\n")
    hook.chmod(0o755)
    await git("update-ref", "refs/heads/hooked", "HEAD", cwd=repo)


async def test_identity_from_the_repository_config(repo: Path) -> None:
    identity = await Identity.for_repo(repo)
    assert identity == Identity(USER_NAME, USER_EMAIL)
    assert identity.env()["GIT_COMMITTER_EMAIL"] == USER_EMAIL


async def test_identity_falls_back_when_none_is_configured(repo_without_identity: Path) -> None:
    identity = await Identity.for_repo(repo_without_identity)
    assert identity == Identity("kairo-orch", "kairo-orch@localhost")
    assert set(identity.env()) == {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
    }


def test_error_context_fills_only_missing_fields() -> None:
    with pytest.raises(StepFailed) as info, error_context(subtask_id="s1", branch="b1"):
        raise StepFailed("boom", branch="kept")
    assert (info.value.subtask_id, info.value.branch) == ("s1", "kept")
    with pytest.raises(UsageError) as usage, error_context(subtask_id="s2"):
        raise UsageError("bad")
    assert usage.value.subtask_id == "s2"


async def test_uncommitted_work_is_seen_staged_unstaged_or_untracked_and_nothing_written(
    repo: Path,
) -> None:
    paths = discover_repo(repo)
    index = (repo / ".git" / "index").read_bytes()
    assert not has_uncommitted_changes(paths)
    assert not await has_uncommitted_work(repo)
    (repo / "notes.txt").write_text("untracked\n")
    assert not has_uncommitted_changes(paths)  # tracked files only
    assert await has_uncommitted_work(repo)
    (repo / "notes.txt").unlink()
    (repo / "README.md").write_text("changed\n")
    assert has_uncommitted_changes(paths)
    assert await has_uncommitted_work(repo)
    assert (repo / ".git" / "index").read_bytes() == index  # asked, never written
    run(repo, "add", "README.md")
    (repo / "README.md").write_text("# demo\n")  # staged, then changed back in the tree
    assert has_uncommitted_changes(paths)
    assert await has_uncommitted_work(repo)
