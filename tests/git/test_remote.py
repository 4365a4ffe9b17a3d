"""The integration branch between hosts: pushes leased against the head the log records,
so that an owner cut off and back can never move the remote's branch after a new owner
pushed on (git/remote.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import StepFailed
from orchestrator.git.remote import fetch_branch, push_leased
from orchestrator.git.repo import discover_repo
from tests.git.conftest import run, write

BRANCH = "kairo/plan/E1"


def _commit_on(repo: Path, parent: str, name: str) -> str:
    """A commit of `parent` plus one file, on no branch (as merge_branch makes them)."""
    run(repo, "checkout", "-q", "--detach", parent)
    write(repo / name, f"{name}\n")
    run(repo, "add", name)
    run(repo, "commit", "-q", "-m", name)
    return run(repo, "rev-parse", "HEAD").strip()


def _remote_head(remote: Path) -> str:
    return run(remote, "rev-parse", f"refs/heads/{BRANCH}").strip()


async def test_an_old_owners_leased_push_is_refused_once_a_new_owner_pushed_on(
    repo: Path, tmp_path: Path
) -> None:
    remote = tmp_path / "remote.git"
    run(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    url = str(remote)
    old, new = repo, tmp_path / "new-owner"
    run(tmp_path, "clone", "-q", url, str(new))
    for key, value in (("user.name", "New"), ("user.email", "new@example.com")):
        run(new, "config", key, value)
    discover_repo(new)  # the new owner's clone, as its `resume` names it
    base = run(old, "rev-parse", "main").strip()

    first = _commit_on(old, base, "first.txt")
    await push_leased(old, url, BRANCH, first, None)  # no branch there yet
    await push_leased(old, url, BRANCH, first, None)  # again, as after a crash: fine

    # The new owner starts from the head the log records, fetched from the remote.
    assert await fetch_branch(new, url, BRANCH) == first
    second = _commit_on(new, first, "second.txt")
    await push_leased(new, url, BRANCH, second, first)

    # The old owner, back, merges on from what it recorded: refused, nothing moved.
    stale = _commit_on(old, first, "stale.txt")
    with pytest.raises(StepFailed, match="moved on from"):
        await push_leased(old, url, BRANCH, stale, first)
    assert _remote_head(remote) == second
    # Nor can it push its head back over the new one.
    with pytest.raises(StepFailed, match="moved on from"):
        await push_leased(old, url, BRANCH, first, first)
    assert _remote_head(remote) == second
