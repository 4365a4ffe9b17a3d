"""One `git worktree` command at a time in a repository, across tasks and processes.

`git worktree add`, `move`, `remove`, `list` and `prune` read and write the shared
`worktrees/` administrative directory without locking it: concurrent adds fail with
"failed to read .git/worktrees/N/commondir", a prune can delete a half-written entry, and
two movers can take the same spare. A supervisor's tasks share a trio lock; another process
on the same repository (`kairo-orch clean --spares` while a run goes on, a second
execution) is kept out by an `flock` on `kairo/worktrees.lock` in the git directory, which
the kernel lets go of when the holder dies, kill -9 included.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import ClassVar

import trio

from orchestrator import kairo_dir

#: How often a task waiting on another process's lock tries again: the commands it waits
#: on take milliseconds, and the wait is rare (another kairo-orch on the same repository).
_RETRY_SECONDS = 0.002


class WorktreeLock:
    """The lock of the repository whose git directory is `git_common_dir`; `for_repository`
    gives every caller in the process the same one."""

    _by_repository: ClassVar[dict[Path, WorktreeLock]] = {}

    def __init__(self, git_common_dir: Path) -> None:
        self.path = kairo_dir.worktree_lock(git_common_dir)
        self._in_process = trio.Lock()

    @classmethod
    def for_repository(cls, git_common_dir: Path) -> WorktreeLock:
        return cls._by_repository.setdefault(git_common_dir, cls(git_common_dir))

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        async with self._in_process:
            # Not in a thread: opening a file in the git directory takes microseconds, and
            # a thread's round trip would be most of every lock's cost.
            descriptor = self._open()
            try:
                # Polled, not a blocking flock in a thread: a cancelled wait must not leave a
                # thread behind that takes the lock later and holds it for good.
                while not _try_lock(descriptor):  # noqa: ASYNC110 (no event to wait on)
                    await trio.sleep(_RETRY_SECONDS)
                yield
            finally:
                os.close(descriptor)  # which lets go of the flock

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def _try_lock(descriptor: int) -> bool:
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
