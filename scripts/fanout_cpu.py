#!/usr/bin/env python3
"""Where the CPU of bench.py's fan-out goes, process by process.

    .venv/bin/python scripts/fanout_cpu.py [--runs N]

Runs fanout_16_cold's kairo side (`start --detach` of 16 sleeping shell agents on the
2,000-file repository) and, once every agent runs, reads the CPU time of each process still
alive from /proc: the supervisor, its live view, the in-pane runners, the tmux server.
`start` itself is a child of this script, so its CPU comes from rusage. git and whatever
else ran are the rest of the machine's busy time (/proc/stat) over the run. Linux only.

On a machine of few cores the fan-out is bound by CPU, not by waiting: this says which
processes to make cheaper. Like bench.py, it deletes nothing before the end.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import bench

HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a live process; 0 for one that is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / HZ


def kind_of(pid: int, supervisor: int | None) -> str:
    if pid == supervisor:  # forked from `start`: its command line is start's
        return "supervisor"
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    line = b" ".join(argv).decode(errors="replace")
    if "orchestrator.cli.main watch" in line:
        return "live view"
    if "agents.runner" in line:
        return "runners"
    return Path(argv[0].decode(errors="replace")).name or "gone"


def tmux_server_pid(lab: bench.Lab) -> int:
    done = lab.tmux("display-message", "-p", "-t", "bench-keepalive", "#{pid}")
    return int(done.stdout)


def one_run(lab: bench.Lab, template: Path, n: int) -> dict[str, float]:
    repo = lab.copy_of(template, "fanout")
    plan = bench.write_plan(repo, "fanout", n, bench.SLEEPING_AGENT, max_parallel=n)
    server = tmux_server_pid(lab)
    server_before = cpu_seconds(server)
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy_before = bench.machine_busy_s() or 0.0
    t0 = time.perf_counter()
    lab.kairo("start", str(plan), "--detach", cwd=repo)
    bench.wait_until(f"{n} agents to start", lambda: bench.started_agents(repo) >= n)
    split: dict[str, float] = collections.defaultdict(float)
    split["wall"] = time.perf_counter() - t0
    split["busy"] = (bench.machine_busy_s() or 0.0) - busy_before
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    split["start"] = (children.ru_utime + children.ru_stime) - (
        children_before.ru_utime + children_before.ru_stime
    )
    supervisor = lab.supervisor_pid(repo)
    for pid in lab.pids_under(repo.parent):
        split[kind_of(pid, supervisor)] += cpu_seconds(pid)
    split["tmux server"] = cpu_seconds(server) - server_before
    split["git and the rest"] = split["busy"] - sum(
        v for k, v in split.items() if k not in ("wall", "busy")
    )
    lab.retire(repo)
    return split


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path, help="where the temporary directory goes")
    args = parser.parse_args()
    lab = bench.Lab(args.workdir)
    runs: list[dict[str, float]] = []
    try:
        template = lab.template(bench.FULL.repo_files)
        one_run(lab, template, bench.FULL.fanout)  # warm-up
        for _ in range(args.runs):
            runs.append(one_run(lab, template, bench.FULL.fanout))
            bench.note(" ".join(f"{k} {v:.2f}" for k, v in runs[-1].items() if v))
    finally:
        lab.close()
    names = sorted({k for run in runs for k in run}, key=lambda k: -runs[0].get(k, 0))
    print(f"medians of {len(runs)} runs, CPU seconds (wall and busy: the whole run):")
    for name in names:
        median = statistics.median(run.get(name, 0.0) for run in runs)
        if median >= 0.005:  # a shell or a tmux client that exec'd or exited: nothing
            print(f"  {name:18s} {median:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
