"""Where a worktree may go: the path checked and resolved, its parent directory made.

Synchronous, run in a worker thread: it stats and creates directories, which can block on
a slow or network disk.
"""

from __future__ import annotations

import array
import fcntl
import hashlib
import os
import threading
from pathlib import Path

from orchestrator.errors import StepFailed

SUFFIX = ".kairo-worktrees"


def default_worktree_root(checkout: Path, *, parent_in_a_working_tree: bool = False) -> Path:
    """Where worktrees go when the plan names no `worktree_root`: a folder beside the
    checkout, `<parent>/<name>.kairo-worktrees` (docs/plan.md says why). Where that
    parent cannot be written, lies in a `.git` directory, or in another repository's
    working tree (a submodule's checkout, where the folder would show as untracked), a
    folder of the user's data directory named after the checkout."""
    beside = checkout.parent / f"{checkout.name}{SUFFIX}"
    writable = os.access(beside, os.W_OK) or (
        not beside.exists() and os.access(beside.parent, os.W_OK)
    )
    if writable and not parent_in_a_working_tree and not inside_git_directory(beside):
        return beside
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    digest = hashlib.sha256(os.fsencode(checkout)).hexdigest()[:8]
    return Path(data) / "kairo-orch" / "worktrees" / f"{checkout.name}-{digest}"


def inside_git_directory(path: Path) -> bool:
    """Whether any directory on `path` is a `.git` one, where Claude Code edits nothing."""
    return ".git" in path.parts


def resolve(path: Path) -> Path:
    """Absolute with symlinks resolved, so `/tmp/x` and `/private/tmp/x` compare equal."""
    return path.expanduser().resolve()


# Held while a worktree's parent is made and flagged: creates run in worker threads.
_making_parents = threading.Lock()


def prepare_target(path: Path, protected: tuple[Path, ...], reserved: Path) -> Path:
    """The resolved worktree path, its parent created; refuses unusable paths.

    `reserved` is the one place inside the protected roots that is ours: the directory of
    the git directory where worktrees went before (`kairo_dir.legacy_worktrees`), which
    executions of then still use.
    """
    path = resolve(path)
    inside_reserved = path.is_relative_to(resolve(reserved))
    for root in map(resolve, protected):
        if inside_reserved:
            break
        # A worktree inside the user's working tree would show up there as untracked
        # files, and be swept into the user's next `git add -A`.
        if path.is_relative_to(root):
            raise StepFailed(f"worktree path {path} lies inside {root}")
    # `worktree add` accepts an existing empty directory, which is fine; anything in
    # it might be someone's data.
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise StepFailed(f"cannot create a worktree at {path}: something is there already")
    with _making_parents:  # the flag is set before any worktree goes in
        if not path.parent.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            _spread_subdirectories(path.parent)
    return path


# ext4's "top of a directory hierarchy" flag (chattr +T): the directories made in a
# directory that has it go each to a block group of their own, with free inodes, rather
# than into their parent's. For worktrees that matters: filling one is mostly the kernel
# allocating inodes, and in one shared group two fills contend for its bitmaps and scan
# past every recently deleted inode (perf: find_inode_bit, recently_deleted). What the
# flag gives a fan-out is in docs/benchmarks.md ("Figures behind the code").
_FS_IOC_GETFLAGS = 0x80086601
_FS_IOC_SETFLAGS = 0x40086602
_FS_TOPDIR_FL = 0x00020000


def _spread_subdirectories(directory: Path) -> None:
    """Set the flag on a directory we made; a filesystem without it is left as it is."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
        flags[0] |= _FS_TOPDIR_FL
        fcntl.ioctl(fd, _FS_IOC_SETFLAGS, flags)
    except OSError:
        pass  # not ext2/3/4 (ENOTTY, EOPNOTSUPP): they place directories their own way
    finally:
        os.close(fd)
