"""Real git repositories under tmp_path, isolated from the machine's git configuration."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from orchestrator.git.invocation import GitResult
from orchestrator.git.repo import discover_repo

USER_NAME = "Test User"
USER_EMAIL = "test@example.com"


def run(cwd: Path, *args: str) -> str:
    """Synchronous git for fixtures and snapshots (outside the code under test)."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout


async def user_git(
    cwd: Path,
    *args: str,
    check: bool = True,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> GitResult:
    """The user's own git, as they would run it in `cwd` (for a test to look with, or to
    set a scene): none of kairo-orch's hardening."""
    done = await trio.run_process(
        ["git", *args],
        cwd=cwd,
        stdin=stdin if stdin is not None else b"",
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    result = GitResult(
        done.returncode,
        done.stdout.decode("utf-8", "surrogateescape"),
        done.stderr.decode("utf-8", "surrogateescape"),
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr}")
    return result


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture(autouse=True)
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No global or system config, no identity from the environment: each test's repo
    has only the configuration the test gives it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    # Repositories under tmp_path must not be found as part of some enclosing repo.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for name in (
        "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL", "EMAIL", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE",
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return home


def _make_repo(path: Path, *, identity: bool) -> Path:
    path.mkdir()
    run(path, "init", "--quiet", "--initial-branch=main")
    env = []
    if identity:
        run(path, "config", "user.name", USER_NAME)
        run(path, "config", "user.email", USER_EMAIL)
    else:
        # Only the fixture's own commits need a name; the code under test gets none.
        env = ["-c", "user.name=Fixture", "-c", "user.email=fixture@example.com"]
    write(path / ".gitignore", "*.log\nbuild/\n")
    write(path / "README.md", "# demo\n")
    write(path / "src" / "app.py", "def main():\n    return 1\n")
    write(path / "src" / "util.py", "".join(f"line {i}\n" for i in range(1, 11)))
    run(path, *env, "add", "-A")
    run(path, *env, "commit", "--quiet", "-m", "initial")
    write(path / "docs" / "guide.md", "guide\n")
    run(path, *env, "add", "-A")
    run(path, *env, "commit", "--quiet", "-m", "add docs")
    discover_repo(path)  # the repository the user names: git commands may run in it
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The user's checkout: `main` with two commits, a git identity in its config."""
    return _make_repo(tmp_path / "repo", identity=True)


@pytest.fixture
def repo_without_identity(tmp_path: Path) -> Path:
    """A checkout on a machine where nobody configured user.name or user.email."""
    return _make_repo(tmp_path / "bare-machine", identity=False)


@pytest.fixture
def dirty_repo(repo: Path) -> Path:
    """The user is in the middle of work: staged, unstaged and untracked changes."""
    write(repo / "README.md", "# demo\nstaged edit\n")
    run(repo, "add", "README.md")
    write(repo / "src" / "app.py", "def main():\n    return 2  # unstaged\n")
    write(repo / "notes.txt", "untracked\n")
    write(repo / "debug.log", "ignored\n")
    return repo


@pytest.fixture
def worktree_root(tmp_path: Path) -> Path:
    """Where an execution's worktrees go, `<root>/<execution>/`: beside the checkout, never
    inside it. The root's spare pool is `<root>/.spares`."""
    return tmp_path / "worktrees" / "01exec"


def snapshot(checkout: Path) -> dict[str, str]:
    """Every byte that makes up the user's checkout: HEAD, its branch, index, files.

    Read straight from disk: `git status` would refresh (rewrite) the index itself.
    """
    git_dir = checkout / ".git"
    state = {}
    for name in ("HEAD", "index", "config", "refs/heads/main"):
        state[f".git/{name}"] = hashlib.sha256((git_dir / name).read_bytes()).hexdigest()
    for path in sorted(checkout.rglob("*")):
        if git_dir in path.parents or path == git_dir:
            continue
        rel = path.relative_to(checkout).as_posix()
        if path.is_file():
            state[rel] = hashlib.sha256(path.read_bytes()).hexdigest() + oct(path.stat().st_mode)
        else:
            state[rel] = "dir"
    return state


class GitCommands:
    """The git subcommands run while it is installed, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        run_process = trio.run_process

        async def counting(argv: list[str], **kwargs: Any) -> Any:
            rest = argv[1:]
            while rest[0] == "-c":  # the hardened settings (git/invocation.py)
                rest = rest[2:]
            self.names.append(rest[0])
            return await run_process(argv, **kwargs)

        monkeypatch.setattr(trio, "run_process", counting)

    def taken(self) -> list[str]:
        names, self.names = self.names, []
        return names
