"""Finding the repository, and the one function every other git call goes through.

All git work in kairo-orch happens by running the `git` binary: plumbing commands are
stable, cheap (a few milliseconds), and behave exactly like the user's own git. Async
code calls `git()`, which uses `trio.run_process`, so a slow git never blocks the
supervisor's event loop and a cancelled step kills its git process.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from orchestrator import kairo_dir
from orchestrator.errors import EnvironmentProblem, KairoError, StepFailed

#: `git merge-tree --write-tree`, which integration depends on, appeared in git 2.38.
MINIMUM_GIT_VERSION = (2, 38)

# Variables that point git at some other repository, index or object store. A supervisor
# started from inside a git hook (or a shell that exported GIT_DIR) would otherwise run
# every command against the wrong repository, or write the user's index from a worktree.
_LOCATING_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)

# Prepended to every command. The supervisor's own git calls never run repository hooks:
# a reference-transaction, post-commit or prepare-commit-msg hook must neither block a
# step nor change what it writes. The agents' own git calls are not affected.
_GLOBAL_OPTIONS = ("-c", "core.hooksPath=/dev/null")


class NotARepository(EnvironmentProblem):
    """The directory is in no git repository at all (not a bare one, not a broken one)."""


@dataclass(frozen=True)
class RepoPaths:
    """Where a repository lives; every path is absolute."""

    toplevel: Path
    git_dir: Path
    git_common_dir: Path

    @property
    def key(self) -> str:
        """This clone among every clone sharing one store (several machines may share a
        PostgreSQL one): its host and git common dir, as the execution rows record it."""
        return f"{socket.gethostname()}:{self.git_common_dir}"

    @property
    def runs(self) -> Path:
        """Where each execution's run folder (its logs, the agents' output) goes."""
        return kairo_dir.runs(self.git_common_dir)


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: str
    stderr: str


def parse_git_version(text: str) -> tuple[int, int, int]:
    """`git version 2.39.5` (also `2.39.3 (Apple Git-145)`, `2.40.1.windows.1`) as a tuple."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if match is None:
        raise EnvironmentProblem(f"cannot read the git version from {text.strip()!r}")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def check_git_version(version: tuple[int, int, int]) -> None:
    if version[:2] < MINIMUM_GIT_VERSION:
        found = ".".join(map(str, version))
        needed = ".".join(map(str, MINIMUM_GIT_VERSION))
        raise EnvironmentProblem(f"git {found} is too old: kairo-orch needs git {needed} or newer")


def _run_sync(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *_GLOBAL_OPTIONS, *args],
            cwd=cwd,
            env=git_environment(None),
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        raise EnvironmentProblem("git is not installed (no `git` on PATH)") from None


def discover_repo(path: Path) -> RepoPaths:
    """The repository that contains `path`, checked to be usable by kairo-orch.

    Synchronous and cheap (one short git process, and one more for the version the first
    time in a process): meant for start-up, before the trio loop, or through
    `trio.to_thread.run_sync`. Plain git rather than GitPython, because
    importing GitPython already fails when git is missing, which is one of the things
    this function must report clearly.
    """
    path = path.expanduser().absolute()
    if not path.exists():
        raise EnvironmentProblem(f"{path} does not exist")
    # Checked before asking git anything: a missing cwd also raises FileNotFoundError.
    start = path if path.is_dir() else path.parent

    _check_git_on_path()
    query = ["--path-format=absolute", "--is-bare-repository", "--git-dir", "--git-common-dir"]
    found = _run_sync(["rev-parse", *query, "--show-toplevel"], start)
    if found.returncode == 0:
        is_bare, git_dir, common_dir, top_level = found.stdout.splitlines()
        if is_bare == "false":  # the usual case: a working tree
            return RepoPaths(Path(top_level), Path(git_dir), Path(common_dir))
    # Not a working tree: the same questions one at a time, to say which it is.
    probe = _run_sync(["rev-parse", *query], start)
    if probe.returncode != 0:
        if "not a git repository" in probe.stderr:
            raise NotARepository(f"{path} is not inside a git repository")
        raise EnvironmentProblem(f"git cannot open the repository at {path}: {first_line(probe)}")
    is_bare, git_dir, common_dir = probe.stdout.splitlines()
    if is_bare == "true":
        raise EnvironmentProblem(f"{path} is a bare repository; kairo-orch needs a working tree")
    top = _run_sync(["rev-parse", "--show-toplevel"], start)
    if top.returncode != 0:
        # Inside the .git directory itself there is a repository but no working tree.
        raise EnvironmentProblem(f"{path} is not inside a working tree: {first_line(top)}")
    return RepoPaths(
        toplevel=Path(top.stdout.strip()),
        git_dir=Path(git_dir),
        git_common_dir=Path(common_dir),
    )


@functools.cache
def _check_git_on_path() -> None:
    """The git on PATH is new enough: asked once a process (a git call of its own), from the
    root directory, which exists wherever the asker is."""
    check_git_version(parse_git_version(_run_sync(["--version"], Path(os.sep)).stdout))


def git_environment(overrides: Mapping[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LOCATING_VARIABLES}
    # Messages are parsed (merge conflicts, "already exists"), so they must not be
    # translated; prompts would hang an unattended supervisor.
    env.update(LC_ALL="C", LANGUAGE="C", GIT_TERMINAL_PROMPT="0")
    if overrides:
        env.update(overrides)
    return env


async def git(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    stdin: bytes | None = None,
) -> GitResult:
    """Run `git ARGS` in `cwd`; with `check`, a non-zero exit raises `StepFailed`.

    Output is decoded as UTF-8 with `surrogateescape`, so a path that is not valid UTF-8
    still round-trips when it is passed back to git.
    """
    # Imported here: `status` and the live view use only this module's synchronous half,
    # and trio would be a good part of their start-up (callers of this one have it already).
    import trio

    try:
        done = await trio.run_process(
            ["git", *_GLOBAL_OPTIONS, *args],
            cwd=cwd,
            env=git_environment(env),
            # /dev/null rather than an empty pipe: the same end of input, one pipe and one
            # feeding task fewer per process, a few percent of what a git call costs.
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    except FileNotFoundError:
        raise _not_run(args, cwd) from None
    return _result(args, cwd, done.returncode, done.stdout, done.stderr, check=check)


def git_sync(*args: str, cwd: Path, check: bool = True) -> GitResult:
    """`git()` for code that runs no trio loop: the few queries of a CLI command's start
    (`start` and `validate` read a plan with them), where importing trio would cost more
    than the git processes."""
    try:
        done = subprocess.run(
            ["git", *_GLOBAL_OPTIONS, *args],
            cwd=cwd,
            env=git_environment(None),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
    except FileNotFoundError:
        raise _not_run(args, cwd) from None
    return _result(args, cwd, done.returncode, done.stdout, done.stderr, check=check)


def _not_run(args: Sequence[str], cwd: Path) -> KairoError:
    if not cwd.is_dir():
        return StepFailed(f"cannot run git {args[0]}: {cwd} does not exist")
    return EnvironmentProblem("git is not installed (no `git` on PATH)")


def _result(
    args: tuple[str, ...], cwd: Path, returncode: int, stdout: bytes, stderr: bytes, *, check: bool
) -> GitResult:
    result = GitResult(
        returncode=returncode,
        stdout=stdout.decode("utf-8", "surrogateescape"),
        stderr=stderr.decode("utf-8", "surrogateescape"),
    )
    if check and result.returncode != 0:
        raise StepFailed(f"git {_describe(args)} failed in {cwd}: {first_line(result)}")
    return result


def _describe(args: tuple[str, ...]) -> str:
    # Enough of the command to recognise it, without dumping long path lists into logs.
    shown = " ".join(a for a in args[:4] if "\n" not in a)
    return shown + (" ..." if len(args) > 4 else "")


def first_line(result: GitResult | subprocess.CompletedProcess[str]) -> str:
    """git's `fatal:`/`error:` line, the part a user can act on, else its first line.

    Progress lines such as "Preparing worktree (new branch ...)" come first on stderr.
    """
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line
    return lines[0] if lines else f"exit status {result.returncode}"


@contextmanager
def error_context(*, subtask_id: str | None = None, branch: str | None = None) -> Iterator[None]:
    """Fill in the context fields a `KairoError` raised inside the block leaves empty."""
    try:
        yield
    except KairoError as exc:
        exc.subtask_id = exc.subtask_id or subtask_id
        exc.branch = exc.branch or branch
        raise


@dataclass(frozen=True)
class Identity:
    """Who the supervisor's own commits are by (agents' commits keep their authors)."""

    name: str
    email: str

    DEFAULT_NAME = "kairo-orch"
    DEFAULT_EMAIL = "kairo-orch@localhost"

    @classmethod
    async def for_repo(cls, cwd: Path) -> Identity:
        """user.name and user.email as git sees them in `cwd`, each with a fallback.

        The fallback lets a supervisor commit on a machine (CI, container) where nobody
        configured git; `git commit` would otherwise stop with "Author identity unknown".
        """
        name = await git("config", "--get", "user.name", cwd=cwd, check=False)
        email = await git("config", "--get", "user.email", cwd=cwd, check=False)
        return cls(
            name=name.stdout.strip() or cls.DEFAULT_NAME,
            email=email.stdout.strip() or cls.DEFAULT_EMAIL,
        )

    def env(self) -> dict[str, str]:
        """Environment for commit and commit-tree; it overrides any configured identity."""
        return {
            "GIT_AUTHOR_NAME": self.name,
            "GIT_AUTHOR_EMAIL": self.email,
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": self.email,
        }


def all_paths_but(paths: Sequence[str]) -> list[str]:
    """Pathspecs for the whole worktree less `paths` (literal, from the top), for `add`
    and `clean`: files kairo-orch put there that are no part of the agent's work."""
    return [":/", *(f":(top,literal,exclude){path}" for path in paths)]


async def add_all_but(
    worktree: Path, leave_out: Sequence[str], *, env: Mapping[str, str] | None = None
) -> None:
    """`git add --all` of the worktree less `leave_out`. Paths git ignores (a copied-in
    `.env`, say) are not named: `add` takes no ignored file anyway, and a pathspec that
    names one, even to exclude it, makes it fail (exit 1, though it added the rest)."""
    named = list(leave_out)
    if named:
        found = await git(
            "check-ignore", "-z", "--stdin", cwd=worktree, env=env, check=False,
            stdin=b"".join(path.encode(errors="surrogateescape") + b"\0" for path in named),
        )  # fmt: skip
        if found.returncode not in (0, 1):  # 1: none is ignored
            raise StepFailed(f"git check-ignore failed in {worktree}: {first_line(found)}")
        ignored = set(found.stdout.split("\0"))
        named = [path for path in named if path not in ignored]
    await git("add", "--all", "--", *all_paths_but(named), cwd=worktree, env=env)


async def has_uncommitted_work(worktree: Path) -> bool:
    """Whether `worktree` holds changes or untracked files not ignored (or cannot say)."""
    result = await git(
        "status", "--porcelain", "--untracked-files=normal", cwd=worktree, check=False
    )
    return result.returncode != 0 or bool(result.stdout.strip())
