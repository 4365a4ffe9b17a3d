"""Rich marked absent in a supervisor, before structlog is imported (supervisor_process.py
forks one, daemon.py runs one directly): both call this first."""

from __future__ import annotations

import sys


def without_rich() -> None:
    """Mark rich absent, unless it is loaded already: a supervisor writes only to its log,
    and structlog.dev imports rich, on the way to the first worktree of every start, only
    to draw console tracebacks. Marked absent (an ImportError for `import
    rich`), structlog does without. Call it before structlog is imported."""
    sys.modules.setdefault("rich", None)  # type: ignore[arg-type]  # None: not importable
