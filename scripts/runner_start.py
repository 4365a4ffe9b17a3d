#!/usr/bin/env python3
"""What holding an attempt's processes costs the in-pane runner, three ways: its CPU, the
time until its agent runs, and the time until it has exited, for an agent that only says
the time (`date`).

    .venv/bin/python scripts/runner_start.py [--runs N] [--burst K] [--baseline CHECKOUT]

- `cgroup`: this checkout's runner, making, joining, leaving and removing a cgroup of the
  attempt's own (agents/containment.py), where this user may;
- `subreaper`: the same runner without a cgroup to make: the runner as the subreaper;
- `baseline`: the runner of another checkout (CHECKOUT, say a `git archive` of main),
  which holds nothing but the agent's process group.

Each run starts K runners at once (1 by default; a fan-out starts 16), directly (no tmux,
no wake-up), as `python -I -S -c ...` the way a pane starts one, the three ways in turn
(each first in turn) so that the machine's drift falls on all alike. A run's figures are
its runners' CPU summed (their own and their agents', from wait4), the time until its
last agent ran and until its last runner exited; the table gives their medians over N
runs. bench.py's fan-out rows hold what the same costs in a whole start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def argv(checkout: Path, spec: Path) -> list[str]:
    bootstrap = (
        f"import sys; sys.path.insert(0, {str(checkout)!r}); "
        "from agents.runner import main; sys.exit(main())"
    )
    return [sys.executable, "-I", "-S", "-c", bootstrap, str(spec)]


def write_spec(directory: Path, *, cgroup: str | None) -> Path:
    directory.mkdir(parents=True)
    spec = {
        "argv": ["date", "+%s.%N"],
        "cwd": str(directory),
        "env": {"PATH": "/usr/bin:/bin"},
        "output_log": str(directory / "output.log"),
        "started_path": str(directory / "started.json"),
        "exit_path": str(directory / "exit.json"),
        "tmux_socket": None,
        "wake_channel": None,
        "title": "bench",
        **({"cgroup": cgroup} if cgroup else {}),
    }
    path = directory / "runner.json"
    path.write_text(json.dumps(spec))
    return path


def burst(commands: list[list[str]]) -> tuple[float, float, float, bool]:
    """The runners' CPU seconds, the seconds until the last agent ran and until the last
    runner exited, and whether each said it made a cgroup."""
    began, wall_began = time.time(), time.perf_counter()
    running = [
        subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for c in commands
    ]
    cpu = 0.0
    for process in running:
        _, status, usage = os.wait4(process.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        cpu += usage.ru_utime + usage.ru_stime
    wall = time.perf_counter() - wall_began
    directories = [Path(c[-1]).parent for c in commands]
    ran = max(float((d / "output.log").read_text().split()[-1]) for d in directories) - began
    made = all(json.loads((d / "started.json").read_text()).get("cgroup") for d in directories)
    return cpu, ran, wall, made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--burst", type=int, default=1, help="runners started at once")
    parser.add_argument("--baseline", type=Path, help="another checkout's runner to compare")
    args = parser.parse_args()
    ways = {"cgroup": ROOT, "subreaper": ROOT}
    if args.baseline:
        ways["baseline"] = args.baseline.resolve()
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in ways}
    made = True
    with tempfile.TemporaryDirectory() as scratch:
        commands = {
            name: [
                argv(
                    checkout,
                    write_spec(
                        Path(scratch, name, str(i)),
                        cgroup=f"kairo-attempt.bench{os.getpid()}.r.{i}"
                        if name == "cgroup"
                        else None,
                    ),
                )
                for i in range(args.burst)
            ]
            for name, checkout in ways.items()
        }
        names = list(ways)
        for run in range(args.runs):
            # Each way first in turn: one leaves the kernel work (a removed cgroup's) that
            # the next would otherwise always pay for.
            for name in names[run % len(names) :] + names[: run % len(names)]:
                cpu, ran, wall, cgroups = burst(commands[name])
                figures[name].append((cpu, ran, wall))
                made = made and (cgroups if name == "cgroup" else True)
    if not made:
        print("no cgroup could be made here: the `cgroup` row is the subreaper's too")
    print(f"{args.burst} runner(s) at once, medians of {args.runs} runs")
    print(f"{'way':<10}{'CPU ms':>8}{'last agent ran ms':>19}{'last exit ms':>14}")
    for name, runs in figures.items():
        cpu, ran, wall = (statistics.median(run[i] for run in runs) * 1000 for i in range(3))
        print(f"{name:<10}{cpu:>8.1f}{ran:>19.1f}{wall:>14.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
