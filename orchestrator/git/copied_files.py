"""Which files of the main checkout `worktree.copy_files` brings into a new worktree: those
its globs match that git does not carry (untracked or ignored), files only."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from types import ModuleType


def files_to_copy(checkout: Path, patterns: Sequence[str], tracked: Collection[str]) -> list[str]:
    """Their paths relative to `checkout`, sorted; `tracked` are the base commit's files."""
    glob, flags = _wcmatch()
    return [
        relative
        for relative in sorted(set(glob.glob(list(patterns), root_dir=checkout, flags=flags)))
        if relative not in tracked
        and ".git" not in Path(relative).parts
        and (checkout / relative).is_file()  # directories come with their files
    ]


def unmatched_patterns(
    checkout: Path, patterns: Sequence[str], tracked: Collection[str]
) -> list[str]:
    """The patterns that match no file to copy (one walk of the checkout for them all)."""
    if not patterns:
        return []
    glob, flags = _wcmatch()
    found = files_to_copy(checkout, patterns, set(tracked))
    return [p for p in patterns if not any(glob.globmatch(f, p, flags=flags) for f in found)]


def _wcmatch() -> tuple[ModuleType, int]:
    # Imported here, by the few plans that copy files, not by every supervisor's start-up.
    from wcmatch import glob

    return glob, glob.GLOBSTAR | glob.BRACE | glob.DOTMATCH  # `**`, `{a,b}`, `.env`
