from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import StepFailed
from orchestrator.git.commit import commit_all, commit_message
from orchestrator.git.refs import rev_parse
from orchestrator.git.repo import Identity
from orchestrator.git.workspace import LocalWorktreeProvider
from orchestrator.git.workspace_port import Workspace
from tests.git.conftest import run, snapshot, user_git, write

TRAILERS = {"Kairo-Execution": "01J0EXEC", "Kairo-Subtask": "extract-auth", "Kairo-Attempt": "2"}
IDENTITY = Identity("kairo-orch", "kairo-orch@localhost")


def hooks_that_ran(repo: Path) -> list[str]:
    return sorted(p.name for p in repo.glob("*-ran"))


async def make_workspace(repo: Path, worktree_root: Path, subtask: str = "s1") -> Workspace:
    return await LocalWorktreeProvider(repo).create(
        subtask, f"kairo/{subtask}", "main", worktree_root / subtask
    )


async def commit(ws: Workspace, start: str | None = None) -> tuple[str, bool, int]:
    outcome = await commit_all(
        ws.path,
        message="extract-auth: attempt 2",
        trailers=TRAILERS,
        identity=IDENTITY,
        start_commit=start or ws.base_commit,
        expected_branch=ws.branch,
    )
    return outcome.head_commit, outcome.changed, outcome.files_changed


async def test_commits_untracked_and_modified_files_but_not_ignored_ones(
    repo: Path, worktree_root: Path
) -> None:
    ws = await make_workspace(repo, worktree_root)
    write(ws.path / "src" / "auth.py", "def login(): ...\n")  # untracked
    write(ws.path / "src" / "app.py", "def main():\n    return 3\n")  # modified
    (ws.path / "docs" / "guide.md").unlink()  # deleted
    write(ws.path / "build" / "out.o", "ignored\n")
    write(ws.path / "agent.log", "ignored\n")

    head, changed, files = await commit(ws)

    assert changed and files == 3
    assert head != ws.base_commit
    assert await rev_parse(ws.path, ws.branch) == head
    tree = (await user_git(ws.path, "ls-tree", "-r", "--name-only", head)).stdout.split()
    assert "src/auth.py" in tree
    assert "docs/guide.md" not in tree
    assert "agent.log" not in tree and "build/out.o" not in tree
    # The ignored files stay where the agent left them, uncommitted.
    assert (ws.path / "agent.log").exists()
    parents = (await user_git(ws.path, "rev-list", "--parents", "-n1", head)).stdout.split()
    assert parents == [head, ws.base_commit]


async def test_trailers_are_real_git_trailers(repo: Path, worktree_root: Path) -> None:
    ws = await make_workspace(repo, worktree_root)
    write(ws.path / "new.txt", "x\n")
    head, _, _ = await commit(ws)
    shown = await user_git(
        ws.path, "log", "-1", "--format=%s%n%(trailers:only,unfold)%an <%ae>", head
    )
    assert shown.stdout.splitlines() == [
        "extract-auth: attempt 2",
        "Kairo-Execution: 01J0EXEC",
        "Kairo-Subtask: extract-auth",
        "Kairo-Attempt: 2",
        "kairo-orch <kairo-orch@localhost>",
    ]
    body = (await user_git(ws.path, "log", "-1", "--format=%B", head)).stdout
    parsed = await user_git(ws.path, "interpret-trailers", "--parse", stdin=body.encode())
    assert parsed.stdout.splitlines() == [f"{k}: {v}" for k, v in TRAILERS.items()]


async def test_non_ascii_paths_and_messages_round_trip(repo: Path, worktree_root: Path) -> None:
    ws = await make_workspace(repo, worktree_root)
    write(ws.path / "données" / "café ☕.txt", "x\n")
    outcome = await commit_all(
        ws.path,
        message="Überarbeitung ✓",
        trailers={"Kairo-Subtask": "naïve"},
        identity=Identity("Zoë", "zoe@example.com"),
        start_commit=ws.base_commit,
    )
    shown = await user_git(ws.path, "log", "-1", "--format=%s|%an|%(trailers:only,unfold)")
    assert shown.stdout == "Überarbeitung ✓|Zoë|Kairo-Subtask: naïve\n\n"
    files = await user_git(ws.path, "ls-tree", "-r", "-z", "--name-only", outcome.head_commit)
    assert "données/café ☕.txt" in files.stdout.split("\0")


def test_commit_message_rejects_trailers_that_would_not_parse() -> None:
    assert commit_message("subject\n\n", {}) == "subject\n"
    with pytest.raises(ValueError, match="invalid trailer key"):
        commit_message("s", {"Bad Key": "v"})
    with pytest.raises(ValueError, match="one-line"):
        commit_message("s", {"Key": "two\nlines"})


async def test_nothing_left_means_no_commit(repo: Path, worktree_root: Path) -> None:
    ws = await make_workspace(repo, worktree_root)
    write(ws.path / "scratch.log", "ignored only\n")
    assert await commit(ws) == (ws.base_commit, False, 0)
    assert await rev_parse(ws.path, "HEAD") == ws.base_commit


async def test_the_agents_own_commits_stay(repo: Path, worktree_root: Path) -> None:
    ws = await make_workspace(repo, worktree_root)
    write(ws.path / "a.txt", "by the agent\n")
    run(ws.path, "add", "a.txt")
    run(ws.path, "-c", "user.name=Agent", "-c", "user.email=a@x", "commit", "-qm", "agent")
    agents = await rev_parse(ws.path, "HEAD")

    # Committed everything itself: counts as changed, and nothing is added on top.
    assert await commit(ws) == (agents, True, 1)

    # Committed some, left some: the leftovers go on top of the agent's commit.
    write(ws.path / "b.txt", "left behind\n")
    _, changed, files = await commit(ws)
    assert changed and files == 2
    assert (await user_git(ws.path, "rev-parse", "HEAD~1")).stdout.strip() == agents
    author = await user_git(ws.path, "log", "-1", "--format=%an", agents)
    assert author.stdout.strip() == "Agent"


async def test_a_later_attempt_counts_from_its_own_start(repo: Path, worktree_root: Path) -> None:
    ws = await make_workspace(repo, worktree_root)
    write(ws.path / "a.txt", "attempt 1\n")
    first, _, _ = await commit(ws)
    assert await commit(ws, start=first) == (first, False, 0)


async def test_hooks_and_signing_config_do_not_block_the_commit(
    repo: Path, worktree_root: Path
) -> None:
    hooks = repo / ".git" / "hooks"
    for name in ("pre-commit", "commit-msg", "prepare-commit-msg", "post-commit"):
        write(hooks / name, f"#!/bin/sh\ntouch {repo}/{name}-ran\nexit 1\n")
        (hooks / name).chmod(0o755)
    run(repo, "config", "commit.gpgSign", "true")
    run(repo, "config", "gpg.program", "false")
    ws = await make_workspace(repo, worktree_root)
    write(ws.path / "x.txt", "x\n")
    _, changed, _ = await commit(ws)
    assert changed
    assert hooks_that_ran(repo) == []


async def test_works_with_no_identity_configured(
    repo_without_identity: Path, worktree_root: Path
) -> None:
    ws = await make_workspace(repo_without_identity, worktree_root)
    write(ws.path / "x.txt", "x\n")
    identity = await Identity.for_repo(ws.path)
    outcome = await commit_all(
        ws.path, message="m", trailers={}, identity=identity, start_commit=ws.base_commit
    )
    shown = await user_git(ws.path, "log", "-1", "--format=%an <%ae>|%cn", outcome.head_commit)
    assert shown.stdout.strip() == "kairo-orch <kairo-orch@localhost>|kairo-orch"


async def test_detached_head_is_refused(repo: Path, worktree_root: Path) -> None:
    ws = await make_workspace(repo, worktree_root)
    run(ws.path, "checkout", "--quiet", "--detach")
    write(ws.path / "x.txt", "x\n")
    with pytest.raises(StepFailed, match="detached HEAD") as info:
        await commit(ws)
    assert info.value.branch == ws.branch


async def test_unfinished_merge_is_refused(repo: Path, worktree_root: Path) -> None:
    ws = await make_workspace(repo, worktree_root)
    theirs = await make_workspace(repo, worktree_root, "s2")
    write(theirs.path / "README.md", "theirs\n")
    run(theirs.path, "commit", "-qam", "theirs")
    write(ws.path / "README.md", "mine\n")
    run(ws.path, "commit", "-qam", "mine")
    merging = await user_git(ws.path, "merge", theirs.branch, check=False)
    assert merging.returncode == 1  # conflicted, MERGE_HEAD left behind
    with pytest.raises(StepFailed, match="left a merge unfinished") as info:
        await commit(ws)
    assert info.value.branch == ws.branch


async def test_switched_branch_is_refused(repo: Path, worktree_root: Path) -> None:
    ws = await make_workspace(repo, worktree_root)
    run(ws.path, "checkout", "--quiet", "-b", "elsewhere")
    with pytest.raises(StepFailed, match="is on 'elsewhere', not on its branch 'kairo/s1'"):
        await commit(ws)


async def test_user_checkout_unchanged_by_commit(dirty_repo: Path, worktree_root: Path) -> None:
    before = snapshot(dirty_repo)
    ws = await make_workspace(dirty_repo, worktree_root)
    write(ws.path / "README.md", "agent edit\n")
    write(ws.path / "notes.txt", "agent's own notes\n")
    await commit(ws)
    assert snapshot(dirty_repo) == before
