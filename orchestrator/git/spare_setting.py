"""How many spare worktrees to keep (spare_worktrees.py): a setting of the environment.

Apart from spare_worktrees.py, which imports trio, because `start` and `resume` check the
setting before they hand over to a supervisor, and run no trio loop themselves.
"""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.errors import UsageError

#: How many released worktrees are kept for reuse, at most, unless the environment says.
SPARES_KEPT = 32
#: The environment variable that says (0: none, every released worktree is removed).
SPARES_VARIABLE = "KAIRO_SPARE_WORKTREES"


def spares_to_keep(environment: Mapping[str, str]) -> int:
    """How many spares to keep: a repository whose checkout is large may want fewer."""
    text = environment.get(SPARES_VARIABLE, "").strip()
    if not text:
        return SPARES_KEPT
    if not (text.isascii() and text.isdigit()):
        raise UsageError(
            f"{SPARES_VARIABLE} must be how many spare worktrees to keep (0 for none), not {text!r}"
        )
    return int(text)
