"""Where spare worktrees are kept, and what they take: the pools' paths, their spares,
their sizes on disk. Synchronous and without trio, for `list` and the like to read;
spare_worktrees.py moves worktrees in and out of them.

A pool is `<root>/.spares/<repository>/` for worktrees laid out as
`<root>/<execution>/<subtask>`; in it, each spare is a directory with a neutral name, and
beside it a `<name>.bytes` file that says what it took on disk when it was put aside.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

from orchestrator import kairo_dir
from orchestrator.errors import StepFailed
from orchestrator.git.invocation import git_sync, locate

POOL = ".spares"


_NEW = ".new"  # a worktree being added, not yet a spare (workspace.py's neutral names)


def spare_pool(worktree: Path, git_common_dir: Path) -> Path:
    """The pool of the repository at `git_common_dir` in the root that holds `worktree`
    (laid out as `<root>/<execution>/<name>`)."""
    digest = hashlib.sha256(os.fsencode(git_common_dir)).hexdigest()[:8]
    return worktree.parent.parent / POOL / f"{git_common_dir.parent.name}-{digest}"


def spares_in(pool: Path, *, adding: bool = False) -> list[Path]:
    """The spares in `pool`; with `adding`, the worktrees being added there as well."""
    try:
        entries = [entry for entry in pool.iterdir() if entry.is_dir()]
    except FileNotFoundError:
        return []
    return sorted(entry for entry in entries if adding or entry.suffix != _NEW)


def has_spares(pool: Path) -> bool:
    return bool(spares_in(pool))


def count_spares(pool: Path) -> int:
    """The spares that count towards those kept: not one a user locked since it was put
    aside, which is theirs until they unlock it (it is neither taken nor removed)."""
    return sum(1 for spare in spares_in(pool) if not is_locked(spare))


def is_locked(worktree: Path) -> bool:
    admin = administrative_directory(worktree)
    return admin is not None and (admin / "locked").exists()


# Each spare's size on disk, measured once when it is put aside, in a file beside it.
_SIZE = ".bytes"


def disk_usage(worktree: Path) -> int:
    """Bytes on disk of the files under `worktree` (what `du` says, roughly), symlinks not
    followed: installed dependencies and build caches included, which are what grows."""
    total = 0
    for directory, _, files in os.walk(worktree):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512  # noqa: PTH118
    return total


def write_size(spare: Path, size: int) -> None:
    with contextlib.suppress(OSError):
        spare.with_name(spare.name + _SIZE).write_text(str(size), encoding="utf-8")


def pool_bytes(pool: Path) -> int:
    """What the spares of `pool` take on disk, as measured when each was put aside."""
    total = 0
    for spare in spares_in(pool, adding=True):
        with contextlib.suppress(OSError, ValueError):
            total += int(spare.with_name(spare.name + _SIZE).read_text(encoding="utf-8"))
    return total


def forget_size(spare: Path) -> None:
    spare.with_name(spare.name + _SIZE).unlink(missing_ok=True)


def pool_place(pool: Path, *, new: bool = False) -> Path:
    """A new name in `pool`, which says nothing of the subtasks the worktree will serve:
    git names a worktree's administrative directory after the directory it is added at,
    and agents see that name (Aider prints it). `new`: for a worktree being added, which
    no create takes for a spare, even one a crash left there."""
    return pool / (uuid.uuid4().hex[:12] + (_NEW if new else ""))


def administrative_directory(worktree: Path) -> Path | None:
    """The directory under `.git/worktrees/` of the worktree; None where its `.git` file
    names none of a trusted repository's (invocation.locate)."""
    try:
        dirs = locate(worktree)
    except StepFailed:
        return None
    return dirs.git_dir if dirs.git_dir != dirs.common else None


def read_path(file: Path, *, prefix: bytes = b"") -> Path | None:
    """The path `file` holds after `prefix`, as written, in the file system's own bytes."""
    try:
        text = file.read_bytes().rstrip(b"\n")
    except OSError:
        return None
    return Path(os.fsdecode(text.removeprefix(prefix))) if text.startswith(prefix) else None


def pools_of(worktrees: Iterable[Path], git_common_dir: Path) -> list[Path]:
    """The pools that hold some of `worktrees` (git's list of one repository's): in each
    root it used, and the old one."""
    legacy = kairo_dir.legacy_spares(git_common_dir)
    return sorted(
        {w.parent for w in worktrees if w.parent.parent.name == POOL or w.parent == legacy}
    )


def remove_if_empty(pool: Path) -> None:
    """The pool, and `.spares` and the worktree root if it was the last thing in them."""
    for directory in (pool, pool.parent, pool.parent.parent):
        try:
            directory.rmdir()
        except OSError:
            return


def make_pool(pool: Path) -> bool:
    try:
        pool.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return True


def spares_kept(repo_root: Path, git_common_dir: Path) -> tuple[int, int]:
    """How many spares the repository keeps, in every pool, and the bytes they take (as
    measured when each was put aside): for `list`, from git's list of worktrees."""
    listed = git_sync("worktree", "list", "--porcelain", "-z", cwd=repo_root, check=False)
    worktrees = [
        Path(field.removeprefix("worktree "))
        for field in listed.stdout.split("\0")
        if field.startswith("worktree ")
    ]
    pools = pools_of(worktrees, git_common_dir)
    return sum(len(spares_in(pool)) for pool in pools), sum(pool_bytes(pool) for pool in pools)


def place_to_add(pool: Path, path: Path) -> Path:
    """Where to add a new worktree meant for `path`: a neutral place in `pool`, on its file
    system, to be moved to `path` once added; `path` itself where that cannot be."""
    if make_pool(pool) and pool.stat().st_dev == path.parent.stat().st_dev:
        return pool_place(pool, new=True)
    return path
