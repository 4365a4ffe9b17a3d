"""What kairo-orch keeps in a repository's git directory, all under `.git/kairo/` (the
common one, shared by every worktree and never shown in a working tree): one place that
knows the layout."""

from __future__ import annotations

from pathlib import Path


def kairo_dir(git_common_dir: Path) -> Path:
    return git_common_dir / "kairo"


def default_store(git_common_dir: Path) -> Path:
    """The SQLite store, when no `--store` or KAIRO_STORE names another."""
    return kairo_dir(git_common_dir) / "kairo.db"


def runs(git_common_dir: Path) -> Path:
    """Each execution's run folder, `runs/<id>/`: its supervisor's log, the agents'
    prompts, output and results, its report."""
    return kairo_dir(git_common_dir) / "runs"


def start_lock(git_common_dir: Path) -> Path:
    """Held by a `start` from its look for a running execution of the plan until the new
    supervisor runs."""
    return kairo_dir(git_common_dir) / "start.lock"


def worktree_lock(git_common_dir: Path) -> Path:
    """Held by every `git worktree` command kairo-orch runs on the repository."""
    return kairo_dir(git_common_dir) / "worktrees.lock"


def move_journal(git_common_dir: Path) -> Path:
    """A spare's move under way, for whoever takes the worktree lock next to finish."""
    return kairo_dir(git_common_dir) / "worktree-move"


def legacy_worktrees(git_common_dir: Path) -> Path:
    """Where worktrees went before they moved out of the git directory (Claude Code edits
    nothing under it): executions made then still have theirs there."""
    return kairo_dir(git_common_dir) / "worktrees"


def legacy_spares(git_common_dir: Path) -> Path:
    """Where every spare was kept while worktrees lived in the git directory."""
    return kairo_dir(git_common_dir) / "spare-worktrees"


def store_file(run_folder: Path) -> Path:
    """The store URL an execution runs with, empty for the default store: the live view
    reads it (daemon.write_live_view_store), and `clean` removes it, since a URL may hold
    a password."""
    return run_folder / "live-view-store"


def log_hashes(git_common_dir: Path, execution_id: str) -> Path:
    """The hash of every event this repository's supervisors of the execution wrote, one
    line a seq (runtime/log_witness.py): in its run folder, not in the store."""
    return runs(git_common_dir) / execution_id / "log-hashes"


def run_folders_of(git_common_dir: Path, short: str) -> list[Path]:
    """The run folders of the executions whose short id is `short`."""
    return sorted(p for p in runs(git_common_dir).glob("*") if p.name.lower().endswith(short))


def started_with_another_store(git_common_dir: Path, short: str, store_url: str | None) -> bool:
    """Whether a run folder of `short` says its execution runs with a store other than
    `store_url` (None: the default one): its log is there, not lost."""
    for folder in run_folders_of(git_common_dir, short):
        try:
            recorded = store_file(folder).read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if recorded != (store_url or ""):
            return True
    return False


def isolated_git(git_common_dir: Path) -> Path:
    """kairo-orch's own git directory for the commands that read files or merge: the
    repository's objects, none of its configuration (git/invocation.py)."""
    return kairo_dir(git_common_dir) / "isolated-git"
