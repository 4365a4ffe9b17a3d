"""The `tmux wait-for` clients of this user, found by the channel they wait on: a
supervisor killed with -9 leaves its own waiting, one per agent it awaited, until each
channel is signalled (server.py's `release_waiters` signals them)."""

from __future__ import annotations

import os


def waited_channels(prefix: str) -> set[str]:
    """The channels starting with `prefix` that some `tmux ... wait-for CHANNEL` process of
    this user waits on (none, of course, of the caller's own, which has not begun)."""
    found = set()
    me = os.getuid()
    for proc in os.scandir("/proc"):
        if not proc.name.isdigit():
            continue
        try:
            if proc.stat().st_uid != me:
                continue
            with open(os.path.join(proc.path, "cmdline"), "rb") as f:  # noqa: PTH118
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"wait-for" in argv[:-2] and argv[-2:-1] and argv[-2].startswith(prefix.encode()):
            found.add(argv[-2].decode(errors="replace"))
    return found
