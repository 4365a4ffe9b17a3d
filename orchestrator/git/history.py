"""Read-only questions about commits: which files, what changed, which commits.

Paths travel NUL-separated (`-z`) so names with spaces, quotes or newlines come back
exactly; diff options that user configuration could change (renames, `diff.relative`,
external diff drivers) are fixed on the command line so results are the same anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.git.invocation import git, git_sync

_DIFF_OPTIONS = ("--no-ext-diff", "--no-textconv", "--no-color", "--no-relative")


@dataclass(frozen=True)
class DiffStat:
    files: int
    insertions: int
    deletions: int
    #: git's own summary, e.g. "3 files changed, 10 insertions(+), 2 deletions(-)".
    text: str
    #: Every path the change touches, a rename's both paths, in git's (byte) order.
    paths: tuple[str, ...] = ()


#: Two commits of one tree: what `diffstat` says of them, without a git process.
NO_CHANGE = DiffStat(0, 0, 0, "")


@dataclass(frozen=True)
class CommitSummary:
    oid: str
    subject: str

    def __str__(self) -> str:
        return f"{self.oid[:12]} {self.subject}"


def _nul_fields(output: str) -> list[str]:
    return [field for field in output.split("\0") if field]


async def tracked_files(cwd: Path, commit: str) -> list[str]:
    """Every file path in `commit`, from the repository root, in git's (byte) order."""
    return _nul_fields((await git(*_ls_tree_args(commit), cwd=cwd)).stdout)


def tracked_files_sync(cwd: Path, commit: str) -> list[str]:
    """`tracked_files` without trio (git_sync)."""
    return _nul_fields(git_sync(*_ls_tree_args(commit), cwd=cwd).stdout)


def _ls_tree_args(commit: str) -> tuple[str, ...]:
    # --full-tree: without it, ls-tree run from a subdirectory lists only that subdirectory.
    return ("ls-tree", "-r", "--full-tree", "--name-only", "-z", "--end-of-options", commit)


async def diffstat(cwd: Path, base: str, head: str) -> DiffStat:
    """What changed from `base` to `head`, in one git process: the paths, and the size of
    the change, where a detected rename counts as one file.

    Binary files count as changed files with no line counts, as in `git diff --stat`.
    """
    result = await git(
        "diff-tree", "-r", "--numstat", "--shortstat", "-z", "-M", *_DIFF_OPTIONS, base, head,
        "--", cwd=cwd,
    )  # fmt: skip
    # NUL-ended numstat records, then the shortstat line (none when nothing changed).
    fields = result.stdout.split("\0")
    files = insertions = deletions = 0
    paths: list[str] = []
    i = 0
    while i < len(fields) - 1:
        added, deleted, path = fields[i].split("\t", 2)
        # A rename is "added<TAB>deleted<TAB>" followed by two fields: old and new path.
        paths += fields[i + 1 : i + 3] if path == "" else [path]
        i += 3 if path == "" else 1
        files += 1
        insertions += int(added) if added != "-" else 0
        deletions += int(deleted) if deleted != "-" else 0
    summary = fields[-1].strip()
    return DiffStat(
        files, insertions, deletions, summary, tuple(sorted(set(paths), key=_git_order))
    )


def _git_order(path: str) -> bytes:
    # git sorts paths by their bytes; str order differs only for undecodable ones.
    return path.encode("utf-8", "surrogateescape")


async def commits_between(cwd: Path, base: str, head: str) -> list[CommitSummary]:
    """Commits reachable from `head` but not from `base`, oldest first."""
    result = await git(
        "rev-list", "--reverse", "--no-commit-header", "--format=%H %s", "--end-of-options",
        f"{base}..{head}", "--", cwd=cwd,
    )  # fmt: skip
    summaries = []
    for record in result.stdout.splitlines():  # a subject is one line
        oid, _, subject = record.partition(" ")
        summaries.append(CommitSummary(oid, subject))
    return summaries
