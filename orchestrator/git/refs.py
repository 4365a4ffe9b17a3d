"""Commits and refs: resolving, creating, moving and deleting branches safely.

Every ref update goes through `git update-ref` with the value it expects to replace, so
two writers (two supervisors, or the user's own git) can never silently overwrite each
other: the loser gets a `StepFailed` and the ref keeps the winner's value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.os_strings import as_bytes
from orchestrator.errors import StepFailed, UsageError
from orchestrator.git.invocation import GitResult, first_line, git, git_sync
from orchestrator.git.repo import Identity

_REFLOG_MESSAGE = "kairo-orch"


def branch_ref(name: str) -> str:
    """`feature/x` -> `refs/heads/feature/x`; a full ref is returned as it is."""
    return name if name.startswith("refs/") else f"refs/heads/{name}"


def _require_full_ref(ref: str) -> None:
    # `git update-ref main X` would write a loose ref `.git/main` beside HEAD rather
    # than moving the branch; only full names are unambiguous.
    if not ref.startswith("refs/"):
        raise ValueError(f"expected a full ref name such as refs/heads/x, got {ref!r}")


_FULL_OID = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")  # SHA-1 or SHA-256


def is_full_oid(rev: str) -> bool:
    """Whether `rev` is a whole object id, which names one object and never moves."""
    return _FULL_OID.fullmatch(rev) is not None


async def rev_parse(cwd: Path, rev: str) -> str:
    """The commit oid `rev` names; `UsageError` when it names no commit.

    A usage error, because the revisions that can be wrong come from the user (a plan's
    `base`); internal callers only pass oids and refs they created.
    """
    return _commit(await git(*_rev_parse_args(rev), cwd=cwd, check=False), cwd, rev)


def rev_parse_sync(cwd: Path, rev: str) -> str:
    """`rev_parse` without trio (git_sync)."""
    return _commit(git_sync(*_rev_parse_args(rev), cwd=cwd, check=False), cwd, rev)


def _rev_parse_args(rev: str) -> tuple[str, ...]:
    return ("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")


def _commit(result: GitResult, cwd: Path, rev: str) -> str:
    if result.returncode != 0:
        raise UsageError(f"{rev!r} does not name a commit in the repository at {cwd}")
    return result.stdout.strip()


async def commit_and_tree(cwd: Path, rev: str) -> tuple[str, str]:
    """The commit `rev` (a full ref or an object id: never an option) names and its
    tree, in one git process."""
    found = await git(
        "rev-parse", f"{rev}^{{commit}}", f"{rev}^{{tree}}",
        cwd=cwd, check=False,
    )  # fmt: skip
    lines = found.stdout.split()
    if found.returncode != 0 or len(lines) != 2:
        raise StepFailed(f"{rev!r} names no commit in {cwd}: {first_line(found)}")
    return lines[0], lines[1]


async def commit_tree(
    cwd: Path, tree: str, parents: Sequence[str], *, identity: Identity, message: str
) -> str:
    """A new commit of `tree` on `parents`, by `identity`, never signed (a signing prompt
    would hang the supervisor); no ref moves. The message as its bytes (`as_bytes`): an
    agent's summary in it may hold any, even an escape in its JSON that stands for none."""
    made = await git(
        "commit-tree", "--no-gpg-sign", tree, *(a for p in parents for a in ("-p", p)),
        "-F", "-", cwd=cwd, env=identity.env(), stdin=as_bytes(message),
    )  # fmt: skip
    return made.stdout.strip()


async def tree_of(cwd: Path, rev: str) -> str:
    result = await git("rev-parse", "--verify", "--end-of-options", f"{rev}^{{tree}}", cwd=cwd)
    return result.stdout.strip()


async def branch_exists(cwd: Path, name: str) -> bool:
    result = await git("show-ref", "--verify", "--quiet", branch_ref(name), cwd=cwd, check=False)
    return result.returncode == 0


def branch_exists_sync(cwd: Path, name: str) -> bool:
    result = git_sync("show-ref", "--verify", "--quiet", branch_ref(name), cwd=cwd, check=False)
    return result.returncode == 0


class BranchExists(StepFailed):
    """`create_branch` found the branch there already, and left it as it was."""


async def create_branch(cwd: Path, name: str, commit: str) -> None:
    """Create branch `name` at `commit`; `BranchExists` if the branch exists already,
    `StepFailed` if it cannot be made.

    Create-only by construction (an empty expected old value), so a branch that appears
    between a check and the write is never overwritten. A revision is resolved to its
    commit; a whole oid is taken as it is and must name a commit: update-ref itself
    refuses one that is missing or names anything else (a tree, or an annotated tag).
    """
    ref = branch_ref(name)
    oid = commit if is_full_oid(commit) else await rev_parse(cwd, commit)
    result = await git(
        "update-ref", "-m", f"{_REFLOG_MESSAGE}: create", ref, oid, "", cwd=cwd, check=False
    )
    if result.returncode != 0:
        if await branch_exists(cwd, name):
            raise BranchExists(f"branch {name!r} already exists", branch=name)
        raise StepFailed(f"cannot create branch {name!r}: {first_line(result)}", branch=name)


async def update_ref(cwd: Path, ref: str, new: str, old: str) -> None:
    """Move `ref` from `old` to `new`, or raise `StepFailed` if it no longer is at `old`."""
    _require_full_ref(ref)
    result = await git(
        "update-ref", "-m", f"{_REFLOG_MESSAGE}: update", ref, new, old, cwd=cwd, check=False
    )
    if result.returncode != 0:
        current = await git("rev-parse", "--verify", "--quiet", ref, cwd=cwd, check=False)
        now = current.stdout.strip() or "nothing"
        raise StepFailed(
            f"{ref} moved while kairo-orch was updating it: expected {old}, found {now}",
            branch=ref.removeprefix("refs/heads/"),
        )


async def delete_branch(cwd: Path, name: str) -> bool:
    """Delete branch `name`; False if there was none. Idempotent, for cleanup.

    `git branch -D` rather than `update-ref -d`: it refuses to delete a branch that is
    checked out in some worktree, the user's checkout included.
    """
    if not await branch_exists(cwd, name):
        return False
    short = branch_ref(name).removeprefix("refs/heads/")
    result = await git("branch", "-D", "--", short, cwd=cwd, check=False)
    if result.returncode != 0:
        raise StepFailed(f"cannot delete branch {short!r}: {first_line(result)}", branch=short)
    return True


async def is_ancestor(cwd: Path, ancestor: str, descendant: str) -> bool:
    """Whether `ancestor` is reachable from `descendant` (a commit is its own ancestor)."""
    result = await git("merge-base", "--is-ancestor", ancestor, descendant, cwd=cwd, check=False)
    if result.returncode in (0, 1):
        return result.returncode == 0
    raise StepFailed(f"cannot compare {ancestor} and {descendant}: {first_line(result)}")


async def parents_of(cwd: Path, commit: str) -> list[str]:
    """The parents of `commit`, first parent first."""
    result = await git("rev-list", "--parents", "-n", "1", commit, "--", cwd=cwd, check=False)
    if result.returncode != 0:
        raise StepFailed(f"cannot read the parents of {commit}: {first_line(result)}")
    return result.stdout.split()[1:]


@dataclass(frozen=True)
class RefTip:
    """One ref as `for-each-ref` reads it."""

    oid: str
    #: commit, tag, tree or blob: what `oid` is.
    type: str
    #: For a commit, its tree; empty otherwise.
    tree: str
    #: The worktree, the main one included, that has this branch checked out.
    worktree: Path | None


_TIP_FORMAT = "%00".join(
    (
        "%(refname)",
        "%(objectname)",
        "%(objecttype)",
        "%(tree)",
        "%(worktreepath)",
        "",  # each record ends in NUL + newline: a worktree path may hold a newline
    )
)


async def read_refs(cwd: Path, refs: Sequence[str]) -> dict[str, RefTip]:
    """Full ref -> its tip, for those of `refs` (exact full names) that exist; one process.

    `%(worktreepath)` reads the worktrees the way `worktree list` does, and fails like it
    ("failed to read .git/worktrees/N/commondir") while another process is half-way
    through adding or removing a worktree; the merge step runs beside worktree creation,
    so it looks again a few times before it gives up.
    """
    import trio  # here: `start` and `validate` import this module but run no trio loop

    for name in refs:
        _require_full_ref(name)
    for wait in (0.02, 0.05, 0.1, 0.2, 0.5):
        result = await git(
            "for-each-ref", f"--format={_TIP_FORMAT}", "--", *refs, cwd=cwd, check=False
        )
        if result.returncode == 0 or "failed to read" not in result.stderr:
            break
        await trio.sleep(wait)
    if result.returncode != 0:
        raise StepFailed(f"cannot read {', '.join(refs)} in {cwd}: {first_line(result)}")
    wanted = set(refs)
    tips: dict[str, RefTip] = {}
    for record in result.stdout.split("\0\n")[:-1]:
        name, oid, type_, tree, worktree = record.split("\0")
        # A pattern also matches the refs below it (refs/heads/a matches refs/heads/a/b).
        if name in wanted:
            tips[name] = RefTip(oid, type_, tree, Path(worktree) if worktree else None)
    return tips
