"""Making a new worktree ready to work in: the files git does not carry, and a setup command.

A fresh worktree has the tracked files only. What a developer's checkout also has (a
`.env`, local config, installed dependencies) is what the plan's `worktree` key brings in:
`copy_files` copies the main checkout's untracked or ignored files that match, and `setup`
runs once per worktree (`npm ci`, `uv sync`). Copied files are never the agent's work:
they are left out of its commits and of the refs that keep partial work (commit.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio

from orchestrator.errors import StepFailed
from orchestrator.git.copied_files import files_to_copy
from orchestrator.runtime.ports import Processes, Repository
from orchestrator.runtime.processes import CheckSandbox, CheckScope

SETUP_LOG = "setup.log"
SETUP_DONE = "setup.done"


def _copy(
    source_root: Path, worktree: Path, patterns: Sequence[str], tracked: set[str]
) -> list[str]:
    copied = files_to_copy(source_root, patterns, tracked)  # git brings the tracked ones
    for relative in copied:
        target = worktree / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source_root / relative, target)
    return copied


async def copy_files(
    repository: Repository,
    source_root: Path,
    worktree: Path,
    patterns: Sequence[str],
    commit: str,
) -> tuple[str, ...]:
    """Copy the untracked files of `source_root` matching `patterns`; return their paths."""
    if not patterns:
        return ()
    tracked = set(await repository.tracked_files(worktree, commit))
    return tuple(await trio.to_thread.run_sync(_copy, source_root, worktree, patterns, tracked))


async def run_setup(
    processes: Processes,
    command: str,
    *,
    worktree: Path,
    run_dir: Path,
    env: Mapping[str, str],
    subtask_id: str,
    scope: CheckScope | None = None,
    sandbox: CheckSandbox | None = None,
) -> None:
    """Run `command` in the new worktree once; a failure is the subtask's `setup_failed`.
    `scope`: how what it leaves running is found, and ended with it; `sandbox`: the one
    it runs in.

    Its marker in `run_dir` makes a supervisor that resumes after a crash skip a setup
    that finished, and run again one that was cut short.
    """
    done = trio.Path(run_dir / SETUP_DONE)
    if await done.exists():
        return
    await trio.Path(run_dir).mkdir(parents=True, exist_ok=True)
    result = await processes.run_shell(command, cwd=worktree, env=env, scope=scope, sandbox=sandbox)
    log = run_dir / SETUP_LOG
    await trio.Path(log).write_text(result.output, encoding="utf-8")
    if result.exit_code != 0:
        last = next(iter(reversed(result.output.strip().splitlines())), "no output")
        raise StepFailed(
            f"`{command}` exited with status {result.exit_code} in the new worktree of "
            f"{subtask_id} ({last.strip()[:200]}); its output is in {log}",
            subtask_id=subtask_id,
        )
    await done.touch()
