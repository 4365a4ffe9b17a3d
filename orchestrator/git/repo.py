"""Finding the repository the user named, who commits, and what a worktree holds.

Every git command goes through git/invocation.py, which says how it is hardened: this
module finds the user's repository (and trusts it: `discover_repo`) and asks the few
questions of a worktree that the commit, recovery and look steps share.
"""

from __future__ import annotations

import functools
import os
import re
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from orchestrator import kairo_dir
from orchestrator.errors import EnvironmentProblem, KairoError, StepFailed
from orchestrator.git.invocation import (
    GitDirs,
    first_line,
    git,
    git_discovering_sync,
    git_isolated,
    git_isolated_sync,
    git_sync,
    locate,
    trust_repository,
)

#: `git merge-tree --write-tree`, which integration depends on, appeared in git 2.38.
MINIMUM_GIT_VERSION = (2, 38)


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
    found = git_discovering_sync("rev-parse", *query, "--show-toplevel", cwd=start)
    if found.returncode == 0:
        is_bare, git_dir, common_dir, top_level = found.stdout.splitlines()
        if is_bare == "false":  # the usual case: a working tree
            return trusted(RepoPaths(Path(top_level), Path(git_dir), Path(common_dir)))
    # Not a working tree: the same questions one at a time, to say which it is.
    probe = git_discovering_sync("rev-parse", *query, cwd=start)
    if probe.returncode != 0:
        if "not a git repository" in probe.stderr:
            raise NotARepository(f"{path} is not inside a git repository")
        raise EnvironmentProblem(f"git cannot open the repository at {path}: {first_line(probe)}")
    is_bare, git_dir, common_dir = probe.stdout.splitlines()
    if is_bare == "true":
        raise EnvironmentProblem(f"{path} is a bare repository; kairo-orch needs a working tree")
    top = git_discovering_sync("rev-parse", "--show-toplevel", cwd=start)
    if top.returncode != 0:
        # Inside the .git directory itself there is a repository but no working tree.
        raise EnvironmentProblem(f"{path} is not inside a working tree: {first_line(top)}")
    return trusted(
        RepoPaths(
            toplevel=Path(top.stdout.strip()),
            git_dir=Path(git_dir),
            git_common_dir=Path(common_dir),
        )
    )


def trusted(paths: RepoPaths) -> RepoPaths:
    """The repository the user named is the one git commands may run in (invocation.py):
    found by `discover_repo`, or handed to a supervisor by the command that found it."""
    trust_repository(paths.toplevel, paths.git_dir, paths.git_common_dir)
    return paths


def inside_work_tree(path: Path) -> bool:
    """Whether `path` is inside some working tree git finds from there (its own lookup)."""
    found = git_discovering_sync("rev-parse", "--is-inside-work-tree", cwd=path)
    return found.returncode == 0 and found.stdout.strip() == "true"


@functools.cache
def _check_git_on_path() -> None:
    """The git on PATH is new enough: asked once a process (a git call of its own), from the
    root directory, which exists wherever the asker is."""
    check_git_version(parse_git_version(git_discovering_sync("--version", cwd=Path(os.sep)).stdout))


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


def worktree_dirs(worktree: Path) -> GitDirs:
    """The git directories of a worktree (linked, or a checkout), found as `git()` finds
    them: refused where its `.git` file names another repository's."""
    dirs = locate(worktree)
    if dirs.work_tree is None:
        raise StepFailed(f"{worktree} is a git directory, not a worktree")
    return dirs


def own_index(dirs: GitDirs) -> Path:
    return dirs.git_dir / "index"


async def add_all_but(
    worktree: Path, leave_out: Sequence[str], *, index: Path | None = None
) -> None:
    """`git add --all` of the worktree less `leave_out`, into `index` (by default the
    worktree's own), isolated: no filter, fsmonitor or hook of the repository runs.

    Paths git ignores (a copied-in `.env`, say) are not named: `add` takes no ignored file
    anyway, and a pathspec that names one, even to exclude it, makes it fail (exit 1,
    though it added the rest)."""
    dirs = worktree_dirs(worktree)
    index = index if index is not None else own_index(dirs)
    named = list(leave_out)
    if named:
        found = await git_isolated(
            "check-ignore", "-z", "--stdin",
            common=dirs.common, work_tree=worktree, index=index, check=False,
            stdin=b"".join(path.encode(errors="surrogateescape") + b"\0" for path in named),
        )  # fmt: skip
        if found.returncode not in (0, 1):  # 1: none is ignored
            raise StepFailed(f"git check-ignore failed in {worktree}: {first_line(found)}")
        ignored = set(found.stdout.split("\0"))
        named = [path for path in named if path not in ignored]
    await git_isolated(
        "add", "--all", "--", *all_paths_but(named),
        common=dirs.common, work_tree=worktree, index=index,
    )  # fmt: skip


async def write_tree(worktree: Path, *, index: Path | None = None) -> str:
    """The tree of `index` (by default the worktree's own), written to the objects."""
    dirs = worktree_dirs(worktree)
    index = index if index is not None else own_index(dirs)
    return (await git_isolated("write-tree", common=dirs.common, index=index)).stdout.strip()


async def has_uncommitted_work(worktree: Path) -> bool:
    """Whether `worktree` holds changes or untracked files not ignored (or cannot say):
    asked as `git status` would, isolated and without writing its index."""
    dirs = worktree_dirs(worktree)
    head = await git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=worktree, check=False)
    if head.returncode != 0:
        return True
    for question in _change_questions(head.stdout.strip()):
        found = await git_isolated(
            *question, common=dirs.common, work_tree=worktree, index=own_index(dirs),
            env=_NO_LOCKS, check=False,
        )  # fmt: skip
        if found.returncode != 0 or found.stdout.strip():
            return True
    return False


# Each says something changed by its exit status (--quiet) or output: what is staged, what
# the work tree changed, what is untracked and not ignored.
def _change_questions(head: str) -> tuple[tuple[str, ...], ...]:
    return (
        ("diff-index", "--cached", "--quiet", "--no-ext-diff", head, "--"),
        ("diff-files", "--quiet", "--no-ext-diff", "--"),
        ("ls-files", "--others", "--exclude-standard", "--directory", "--no-empty-directory"),
    )


# `status` and `diff-files` refresh an index they may then write: not another's.
_NO_LOCKS = {"GIT_OPTIONAL_LOCKS": "0"}


def has_uncommitted_changes(paths: RepoPaths) -> bool:
    """Whether the user's checkout has changes to tracked files, staged or not: asked
    isolated, without writing the user's index."""
    head = git_sync("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=paths.toplevel)
    for question in _change_questions(head.stdout.strip())[:2]:
        found = git_isolated_sync(
            *question, common=paths.git_common_dir, work_tree=paths.toplevel,
            index=paths.git_dir / "index", env=_NO_LOCKS, check=False,
        )  # fmt: skip
        if found.returncode != 0:
            return True
    return False
