"""bench.py's guard_compare_ms: what one look of the guard at what the user owns costs.

The generated repository (2,000 files) as a user's checkout mid-work: ten files edited,
five untracked, a stash entry, and 1,000 refs (900 branches, 100 annotated tags, packed).
What is timed is runtime/guard.py's comparison as the supervisor runs it after every
attempt, finding nothing (the refs, the stash, the git directory's files, the checkout's
tree through the guard's own index, the index's entries); the baseline, in the same run,
is one `git status` in the same checkout, what a user pays to look at it once. The bench
also gives, beside it (medians of the same runs):

    record_ms          taking the record at the start (guard refs, copies, snapshot)
    changed_ms         a comparison that finds one file of the checkout edited, its
                       change worked out and said (a new change each run)
    ignored_walk_ms    a stat of every file of a 5,000-file ignored folder (a `.venv`),
                       which the guard does not do: what guarding ignored files would add

bench.py runs it (`--only guard_compare_ms`); `--tiny` makes it of 20 files and 10 refs.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

IGNORED_FILES = 5_000


class _Journal:
    """What the guard asks of a journal: the state, and appending what it found."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.appended: list[Any] = []

    async def append(self, events: Sequence[Any]) -> Any:
        from orchestrator.core.state import apply

        for event in events:
            self.state = apply(self.state, event, self.state.seq + 1)
            self.appended.append(event)
        return self.state


def _state(repo: Path, run_root: Path) -> Any:
    from orchestrator.core import events as ev
    from orchestrator.core.plan import AgentSpec, ResolvedPlan, ResolvedSubtask
    from orchestrator.core.state import initial_state

    plan = ResolvedPlan.model_validate(
        {
            "name": "bench",
            "subtasks": [
                ResolvedSubtask(
                    id="a", title="a", prompt="", agent=AgentSpec(kind="shell", run="true")
                )
            ],
        }
    )
    created = ev.ExecutionCreated(
        plan=plan,
        plan_path=str(repo.parent / "plan.yaml"),
        repo_root=str(repo),
        git_common_dir=str(repo / ".git"),
        base_commit="0" * 40,
        integration_branch="kairo/bench/guard1",
        tmux_socket=None,
        tmux_session="kairo-bench-guard1",
        worktree_root=str(repo.parent / "worktrees"),
        run_root=str(run_root),
    )
    return initial_state("01BENCHGUARD000000000GUARD1", created)


def busy_checkout(lab: Any, template: Path, files: int, refs: int) -> Path:
    """A copy of `template` as a user leaves it mid-work, with `refs` refs."""
    repo: Path = lab.copy_of(template, "guard")
    modules = sorted((repo / "src").rglob("*.py"))
    (repo / "README.md").write_text("stashed work\n", encoding="utf-8")
    lab.git(repo, "stash", "push", "-q", "-m", "user wip")
    for module in modules[:10]:
        module.write_text(module.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    for i in range(5):
        (repo / f"notes-{i}.txt").write_text(f"untracked {i}\n", encoding="utf-8")
    head = lab.git(repo, "rev-parse", "HEAD").strip()
    tags = max(1, refs // 10)
    lines = "".join(f"create refs/heads/topic/b{i:04d} {head}\n" for i in range(refs - tags))
    subprocess.run(["git", "update-ref", "--stdin"], cwd=repo, input=lines, text=True, check=True)
    for i in range(tags):
        lab.git(repo, "tag", "-a", "-m", f"release {i}", f"v{i:04d}")
    lab.git(repo, "pack-refs", "--all")
    venv = repo / ".venv"
    for i in range(IGNORED_FILES if files > 100 else 20):
        folder = venv / f"lib{i // 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"m{i:04d}.py").write_text("x = 1\n", encoding="utf-8")
    (repo / ".git" / "info" / "exclude").write_text(".venv/\n", encoding="utf-8")
    lab.git(repo, "update-index", "-q", "--refresh")
    return repo


def _stat_walk(root: Path | str) -> int:
    """lstat every file under `root`, as a stat fingerprint of ignored files would."""
    seen = 0
    with os.scandir(root) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                seen += _stat_walk(entry.path)
            else:
                entry.stat(follow_symlinks=False)
                seen += 1
    return seen


def guard_compare_pair(
    lab: Any, files: int, refs: int
) -> tuple[Callable[[bool], tuple[float, float | None]], dict[str, list[float]]]:
    """One run of a comparison and of its baseline (the baseline first when asked), for
    bench.py's `repeat`; and the further measurements of each run, by name."""
    import trio

    from orchestrator.git.repo import Identity, discover_repo
    from orchestrator.runtime.guard import UserGuard

    repo = busy_checkout(lab, lab.template(files), files, refs)
    paths = discover_repo(repo)
    identity = Identity("Bench User", "bench@example.com")
    details: dict[str, list[float]] = {"record_ms": [], "changed_ms": [], "ignored_walk_ms": []}
    edited = sorted((repo / "src").rglob("*.py"))[-1]
    runs = [0]

    def measured() -> float:
        runs[0] += 1
        run_root = lab.fresh_dir(f"guard-run-{runs[0]}")
        guard = UserGuard(paths, identity, os.environ)
        journal = _Journal(_state(repo, run_root))

        async def look() -> float:
            t0 = time.perf_counter()
            await guard.begin(journal)  # type: ignore[arg-type]
            details["record_ms"].append((time.perf_counter() - t0) * 1000)
            await guard.compare("attempt")  # the first look fills the guard's own index
            t0 = time.perf_counter()
            found = await guard.compare("attempt")
            elapsed = time.perf_counter() - t0
            assert found is None, found
            edited.write_text(edited.read_text(encoding="utf-8") + f"# run {runs[0]}\n")
            t0 = time.perf_counter()
            changed = await guard.compare("attempt")
            details["changed_ms"].append((time.perf_counter() - t0) * 1000)
            assert changed is not None and len(changed.changes) == 1, changed
            return elapsed

        elapsed = trio.run(look)
        t0 = time.perf_counter()
        _stat_walk(repo / ".venv")
        details["ignored_walk_ms"].append((time.perf_counter() - t0) * 1000)
        return elapsed

    def status() -> float:
        t0 = time.perf_counter()
        subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, check=True)
        return time.perf_counter() - t0

    def run(baseline_first: bool) -> tuple[float, float | None]:
        if baseline_first:
            theirs = status()
            return measured(), theirs
        ours = measured()
        return ours, status()

    return run, details
