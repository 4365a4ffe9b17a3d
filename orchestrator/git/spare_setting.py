"""How many spare worktrees to keep, and how much disk they may take (spare_worktrees.py):
settings of the environment.

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
#: How much disk a repository's spares in one worktree root may take, unless the
#: environment says: 32 spares of a 1 GB checkout would silently hold 32 GB.
SPARE_BYTES = 2 * 1024**3
SPARE_BYTES_VARIABLE = "KAIRO_SPARE_DISK"
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


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


def spare_bytes(environment: Mapping[str, str]) -> int:
    """How many bytes of disk the spares of one pool may take (KAIRO_SPARE_DISK: 500M, 2G)."""
    text = environment.get(SPARE_BYTES_VARIABLE, "").strip().upper().removesuffix("B")
    if not text:
        return SPARE_BYTES
    number, unit = text.rstrip("KMGT"), text[len(text.rstrip("KMGT")) :]
    if not (number.isascii() and number.isdigit()) or unit not in _UNITS:
        raise UsageError(
            f"{SPARE_BYTES_VARIABLE} must be how much disk spare worktrees may take, "
            f"e.g. 500M or 2G (0 for none), not {environment[SPARE_BYTES_VARIABLE]!r}"
        )
    return int(number) * _UNITS[unit]
