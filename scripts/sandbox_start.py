#!/usr/bin/env python3
"""What starting an agent under bubblewrap costs, step by step, beside starting it bare.

    .venv/bin/python scripts/sandbox_start.py [--runs N] [--burst K]

On a worktree of bench.py's generated 2,000-file repository, with the sandbox of a plan
that names none (runtime/sandbox.py), each of these in turn, the order rotated from one
round to the next so that the machine's drift falls on all alike:

- `wrap`: `BwrapSandbox.wrap`, which the supervisor runs for each attempt: the scratch
  made anew, the repository's config reduced, the worktree's git directory copied (its
  index: 2,000 entries) and the command line built; in process;
- `git dir`: of which the worktree's git directory copied, alone;
- `probe`: `_bwrap_problem`, the sandbox `start` makes once to learn whether bubblewrap
  runs here (`true` inside);
- `sandbox`: the command line `wrap` gives, with `echo` for the agent: what a runner
  starts;
- `bare`: `echo` alone, the same agent without a sandbox;

and then K of `sandbox` and of `bare` at once, as a fan-out starts them. A figure is the
median wall time until the agents ran (had printed) and until they had exited, and CPU
(this process's for `wrap`; the children's, from wait4, otherwise) over N rounds.
docs/benchmarks.md holds what they were.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench  # noqa: E402  (the generated repository and its lab)

from orchestrator.git.repo import discover_repo  # noqa: E402
from orchestrator.runtime import sandbox  # noqa: E402

#: One step; the time from its start until its agents ran, where it starts agents.
Step = Callable[[], float | None]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu() -> float:
    return time.process_time()


def timed(step: Step, cpu: Callable[[], float]) -> tuple[float | None, float, float]:
    """The time until the agents of one `step` ran, its wall time and its CPU."""
    c0, t0 = cpu(), time.perf_counter()
    running = step()
    return running, time.perf_counter() - t0, cpu() - c0


def run_all(argvs: list[list[str]]) -> float:
    """Start every command line at once and wait for them all, each to print and to
    succeed; the time until every one had printed."""
    t0 = time.perf_counter()
    processes = [
        subprocess.Popen(a, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE) for a in argvs
    ]
    for process in processes:
        assert process.stdout is not None and process.stdout.read(1), process.args
    running = time.perf_counter() - t0
    for process in processes:
        process.communicate()
        assert process.returncode == 0, process.args
    return running


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=40, help="rounds (default 40)")
    parser.add_argument("--burst", type=int, default=16, help="started at once (default 16)")
    parser.add_argument("--workdir", type=Path, help="where the temporary directory goes")
    args = parser.parse_args()
    problem = sandbox.bwrap_unavailable()
    if problem is not None:
        print(f"sandbox_start: {problem}", file=sys.stderr)
        return 1
    binary = shutil.which("bwrap")
    assert binary is not None

    lab = bench.Lab(args.workdir)
    try:
        repo = lab.copy_of(lab.template(bench.FULL.repo_files), "sandbox")
        worktree = repo.parent / "worktree"
        lab.git(repo, "worktree", "add", "-q", "--detach", str(worktree), "HEAD")
        head = lab.git(repo, "rev-parse", "HEAD").strip()
        discover_repo(repo)  # the repository the user names, as `start` finds it
        run_dir = repo / ".git" / "kairo" / "runs" / "bench" / "s00" / "1"
        run_dir.mkdir(parents=True)
        place = sandbox.AgentPlace(
            worktree=worktree,
            run_dir=run_dir,
            git_common_dir=repo / ".git",
            state_dir=run_dir.parent / "agent-state",
            start_commit=head,
            checkout=repo,
        )
        chosen = sandbox.BwrapSandbox(binary=binary)
        wrapped = chosen.wrap(["echo", "running"], place)
        private = sandbox._private_git_dir(worktree)
        assert private is not None
        copies = itertools.count()

        def wrap() -> None:
            chosen.wrap(["echo", "running"], place)

        def copy_git_dir() -> None:
            sandbox._scratch_git_dir(private, run_dir / "copies" / str(next(copies)), head)

        def probe() -> None:
            sandbox._bwrap_problem.__wrapped__(binary)  # uncached: what each `start` pays

        bare = ["echo", "running"]

        steps: dict[str, tuple[Step, Callable[[], float]]] = {
            "wrap": (wrap, own_cpu),
            "git dir": (copy_git_dir, own_cpu),
            "probe": (probe, children_cpu),
            "sandbox": (lambda: run_all([wrapped]), children_cpu),
            "bare": (lambda: run_all([bare]), children_cpu),
            f"sandbox x{args.burst}": (lambda: run_all([wrapped] * args.burst), children_cpu),
            f"bare x{args.burst}": (lambda: run_all([bare] * args.burst), children_cpu),
        }
        names = list(steps)
        runs: dict[str, list[float]] = {name: [] for name in names}
        walls: dict[str, list[float]] = {name: [] for name in names}
        cpus: dict[str, list[float]] = {name: [] for name in names}
        for i in range(args.runs + 1):  # the first round warms up, unmeasured
            first = i % len(names)
            for name in [*names[first:], *names[:first]]:
                running, wall, cpu = timed(*steps[name])
                if i:
                    runs[name] += [] if running is None else [running]
                    walls[name].append(wall)
                    cpus[name].append(cpu)
        size = (private / "index").stat().st_size
    finally:
        lab.close()

    print(f"{args.runs} rounds, load average {os.getloadavg()[0]:.2f}; index {size} bytes")
    print(f"{'':<16} {'ran ms':>9} {'wall ms':>9} {'CPU ms':>9}")
    for name in names:
        ran = f"{statistics.median(runs[name]) * 1e3:>9.2f}" if runs[name] else f"{'':>9}"
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"{name:<16} {ran} {wall * 1e3:>9.2f} {cpu * 1e3:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
