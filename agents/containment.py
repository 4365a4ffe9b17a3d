"""Every process of an attempt held together, so that all of them end with it.

A process group does not hold them: `setsid` leaves it, and a daemon forked twice is no
descendant of the agent any more, so either outlived the attempt, `stop --now` and
`clean`, still writing into a worktree the supervisor commits. Two things do hold them:

- **A cgroup v2 of the attempt's own**, made below the runner's own cgroup where the
  machine mounts cgroup2 (found in /proc/self/mountinfo) and this user may write there.
  The runner joins it just before it starts the agent and steps back out right after, so
  that the agent and all it ever starts are in it, whatever their session or parent
  (only a process that moves itself into another cgroup leaves, on purpose: the user's
  own processes may), and `cgroup.kill` ends them all at once. The supervisor ends the
  same cgroup (`end_cgroup`) when the runner could not: after a `stop --now`, a crash,
  at `clean`.
- **Otherwise the runner as a child subreaper** (`prctl(PR_SET_CHILD_SUBREAPER)`): what
  the agent orphans is reparented to the runner instead of init, so the runner finds all
  of it among its descendants (/proc's `children` lists) and ends it. Only the runner's
  own death (SIGKILL) lets them go.

Standard library only, and cheap to import (agents/runner.py says why that counts): the
subreaper's `_ctypes` is imported only where no cgroup could be had.
"""

# os.path and a try/except-pass are free where pathlib and contextlib are not (runner.py):
# ruff: noqa: PTH102, PTH106, PTH112, PTH118, PTH208, SIM105

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # `typing` is a visible part of the runner's start (runner.py)
if TYPE_CHECKING:
    from collections.abc import Iterator

#: How long an end waits for what it killed to be gone (a process in an uninterruptible
#: sleep, a disk's write, dies only once that returns).
END_SECONDS = 5.0
_POLL_SECONDS = 0.01
_SIGKILL = 9
_PR_SET_CHILD_SUBREAPER = 36


def cgroup2_root(mountinfo: str) -> tuple[str, str] | None:
    """Where the cgroup v2 hierarchy is mounted, and which of its cgroups the mount shows
    at that place ("/" for the whole hierarchy), from /proc/self/mountinfo's text."""
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if "-" not in fields:
            continue
        separator = fields.index("-")
        if len(fields) > separator + 1 and fields[separator + 1] == "cgroup2":
            return _unescape(fields[4]), _unescape(fields[3])
    return None


def _unescape(field: str) -> str:
    """A mountinfo path, whose spaces, tabs, newlines and backslashes are octal escapes."""
    if "\\" not in field:
        return field
    for code in ("040", "011", "012", "134"):
        field = field.replace("\\" + code, chr(int(code, 8)))
    return field


def own_cgroup() -> str | None:
    """The directory of this process's cgroup v2, or None: no cgroup2 mounted, or this
    process's cgroup not under the mount (another cgroup namespace's)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            found = cgroup2_root(f.read())
        with open("/proc/self/cgroup", encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    path = next((line[3:] for line in lines if line.startswith("0::")), None)
    if found is None or path is None or path.endswith(" (deleted)"):
        return None
    mount, root = found
    if root != "/":
        if not (path == root or path.startswith(root.rstrip("/") + "/")):
            return None
        path = path[len(root.rstrip("/")) :]
    return os.path.join(mount, path.lstrip("/")).rstrip("/") or "/"


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read()


class Cgroup:
    """One cgroup v2 directory: its processes signalled, all killed, it removed."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def make(cls, parent: str, name: str) -> Cgroup:
        """Made below `parent` (or taken, if there already: one of an earlier runner's).
        OSError where this user may not."""
        path = os.path.join(parent, name)
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        return cls(path)

    def add(self, pid: int = 0) -> None:
        """Move process `pid` (0: the caller) into this cgroup; OSError where not allowed."""
        _write(os.path.join(self.path, "cgroup.procs"), str(pid).encode())

    def pids(self) -> list[int]:
        try:
            return [int(pid) for pid in _read(os.path.join(self.path, "cgroup.procs")).split()]
        except (OSError, ValueError):
            return []

    def populated(self) -> bool:
        """Whether a live process is in it (an exited one is not, reaped or not)."""
        try:
            return "populated 1" in _read(os.path.join(self.path, "cgroup.events"))
        except OSError:
            return False  # gone

    def signal(self, signum: int) -> None:
        """Every process in it; one forking meanwhile may leave a child unsignalled, which
        `kill` does not (SIGKILL is what ends them for sure)."""
        if signum == _SIGKILL:
            self.kill()
            return
        for pid in self.pids() if self.populated() else ():
            try:
                os.kill(pid, signum)
            except OSError:
                pass

    def kill(self) -> None:
        """SIGKILL to every process in it, those forked meanwhile too (`cgroup.kill`, Linux
        5.14; before it, process by process until none is left)."""
        try:
            _write(os.path.join(self.path, "cgroup.kill"), b"1")
        except FileNotFoundError:
            if not os.path.isdir(self.path):
                return
        except OSError:
            pass
        else:
            return
        deadline = time.monotonic() + END_SECONDS
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, _SIGKILL)
                except OSError:
                    pass
            time.sleep(_POLL_SECONDS)

    def end(self, seconds: float = END_SECONDS) -> bool:
        """Kill everything in it and remove it; whether it is gone."""
        deadline = time.monotonic() + seconds
        while True:
            if self.populated():
                self.kill()
            try:
                os.rmdir(self.path)
            except FileNotFoundError:
                return True
            except OSError:  # EBUSY until the kernel has seen every process in it die
                if time.monotonic() >= deadline:
                    return False
            else:
                return True
            time.sleep(_POLL_SECONDS)


def end_cgroup(path: str, seconds: float = END_SECONDS) -> bool:
    """End every process of the cgroup at `path` and remove it; whether it is gone."""
    return Cgroup(path).end(seconds)


def cgroups_named(mount: str, wanted: str) -> list[str]:
    """Every cgroup below `mount` whose name starts with `wanted` (not looked into)."""
    found: list[str] = []
    for directory, names, _files in os.walk(mount):
        for name in [n for n in names if n.startswith(wanted)]:
            found.append(os.path.join(directory, name))
            names.remove(name)
    return found


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans; whether it could (Linux
    3.4 and later). By prctl(2) through `_ctypes` alone: `ctypes` itself would cost the
    runner some 4 ms of its start, its C half under one."""
    try:
        import _ctypes

        libc = _ctypes.dlopen(None)  # type: ignore[arg-type]  # None: the program itself
        prctl = _ctypes.dlsym(libc, "prctl")
        return bool(_ctypes.call_function(prctl, (_PR_SET_CHILD_SUBREAPER, 1)) == 0)
    except (ImportError, OSError, AttributeError):
        return False


def children(pid: int) -> list[int]:
    """The children of process `pid`, of every one of its threads."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            found += [int(c) for c in _read(f"/proc/{pid}/task/{task}/children").split()]
        except (OSError, ValueError):
            continue
    return found


def descendants(pid: int) -> Iterator[int]:
    """The processes below `pid`, parents before their children."""
    todo = children(pid)
    while todo:
        child = todo.pop()
        yield child
        todo += children(child)


def _is_zombie(pid: int) -> bool:
    try:
        return _read(f"/proc/{pid}/stat").rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return True  # gone


class Subreaper:
    """The runner as the reaper of all the agent orphans: what is left of an attempt is
    what is below the runner."""

    def __init__(self) -> None:
        self.pid = os.getpid()

    def signal(self, signum: int) -> None:
        for pid in descendants(self.pid):
            try:
                os.kill(pid, signum)
            except OSError:
                pass

    def populated(self, agent: int) -> bool:
        """Whether anything but the agent (exited, not yet reaped) still runs below us."""
        return any(pid != agent and not _is_zombie(pid) for pid in descendants(self.pid))

    def reap(self, agent: int) -> None:
        """Reap the orphans that ended, never the agent: its pid is its group's id, which
        must not be reused while the runner may still signal the group."""
        for pid in children(self.pid):
            if pid != agent:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass

    def end(self, agent: int, seconds: float = END_SECONDS) -> bool:
        """SIGKILL to everything below us but the agent, again as long as any is left (an
        orphan comes to us only once its parent died); whether none is."""
        deadline = time.monotonic() + seconds
        while True:
            self.reap(agent)
            left = [pid for pid in descendants(self.pid) if pid != agent]
            if not left:
                return True
            if time.monotonic() >= deadline:
                return False
            for pid in left:
                try:
                    os.kill(pid, _SIGKILL)
                except OSError:
                    pass
            time.sleep(_POLL_SECONDS)
