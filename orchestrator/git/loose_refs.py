"""A branch's tip read from git's own files, where their layout makes that safe.

The merge step runs once per finished subtask, and asking git what the integration branch
points at, and whether some worktree has it checked out, is one of its four git processes.
Both answers are in small files that git replaces atomically (a lock file, then a rename):
the loose ref `refs/heads/NAME`, which `update-ref` leaves after every merge, and each
worktree's `HEAD`. `plain_tip` reads them, and answers None (ask git) wherever the layout
is not the plain one: a packed or symbolic ref, a reftable repository, a file it cannot
read, or a HEAD that names the branch (git words that refusal, with the worktree's path).

A tip read here is never trusted for a write: the merge moves the branch with
`update-ref NEW OLD`, which fails if the tip had moved since.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.git.refs import is_full_oid


def plain_tip(git_common_dir: Path, ref: str) -> str | None:
    """The oid of the loose branch `ref` (a full name) when no worktree's HEAD names it;
    None when only git can tell."""
    try:
        oid = (git_common_dir / ref).read_bytes().decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not is_full_oid(oid) or _may_be_checked_out(git_common_dir, ref):
        return None
    return oid


def _may_be_checked_out(git_common_dir: Path, ref: str) -> bool:
    """Whether a HEAD (the main worktree's or a linked one's) names `ref`, or cannot be read.

    The same HEADs `for-each-ref`'s `%(worktreepath)` reads. One that is missing is a
    worktree half-way through being added or removed, which git's own answer could not
    count on either."""
    symbolic = f"ref: {ref}".encode()
    for head in (git_common_dir / "HEAD", *git_common_dir.glob("worktrees/*/HEAD")):
        try:
            if head.read_bytes().strip() == symbolic:
                return True
        except FileNotFoundError:
            continue
        except OSError:
            return True
    return False
