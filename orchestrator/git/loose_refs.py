"""A branch's tip read from git's own files, where their layout makes that safe.

The merge step runs once per finished subtask, and asking git what the integration branch
points at, and whether some worktree has it checked out, is one of its four git processes.
Both answers are in small files that git replaces atomically (a lock file, then a rename):
the loose ref `refs/heads/NAME`, which `update-ref` leaves after every merge, and each
worktree's `HEAD`. `plain_tip` reads them, and answers None (ask git) wherever the layout
is not the plain one: a packed or symbolic ref, a reftable repository, a file it cannot
read, a HEAD that is a symlink (`core.preferSymlinkRefs`) or names the branch through
another symbolic ref, or a HEAD that names the branch (git words that refusal, with the
worktree's path).

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
    """Whether a HEAD (the main worktree's or a linked one's) may name `ref`: it does, or it
    cannot be read, or it is a symlink, or it names a ref that is itself symbolic.

    The same HEADs `for-each-ref`'s `%(worktreepath)` reads. One that is missing is a
    worktree half-way through being added or removed, which git's own answer could not
    count on either."""
    for head in (git_common_dir / "HEAD", *git_common_dir.glob("worktrees/*/HEAD")):
        try:
            if head.is_symlink():
                return True
            text = head.read_bytes().strip()
        except FileNotFoundError:
            continue
        except OSError:
            return True
        if not text.startswith(b"ref: "):
            continue  # detached
        named = text.removeprefix(b"ref: ").decode("utf-8", "surrogateescape")
        if named == ref or _symbolic(git_common_dir / named):
            return True
    return False


def _symbolic(ref_file: Path) -> bool:
    """Whether the loose ref at `ref_file` points at another ref (absent: a packed ref,
    which never does)."""
    try:
        return ref_file.is_symlink() or ref_file.read_bytes().startswith(b"ref:")
    except FileNotFoundError:
        return False
    except OSError:
        return True
