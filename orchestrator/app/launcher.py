"""How a supervisor is started: the caller makes the launcher before it imports anything
heavy or opens a store, and passes it to `start`, `resume` or `stop`
(runtime/supervisor_process.py says why a fork of the command, and when it is safe).

Standard library only, as supervisor_process.py is: the CLI imports this first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from orchestrator.runtime.supervisor_process import imports_out_of_gc, pending_supervisor

__all__ = ["Launcher", "imports_out_of_gc", "pending_supervisor"]


class Launcher(Protocol):
    """A supervisor waiting for its execution: handed it once, watched until it runs."""

    pid: int

    def hand_over(self, arguments: list[str], *, log_path: Path) -> None: ...

    def failure(self) -> str | None:
        """Why it is gone, once it exited; None while it lives."""
        ...

    def kill(self) -> None: ...
