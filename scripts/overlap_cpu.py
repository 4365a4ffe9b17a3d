#!/usr/bin/env python3
"""What the overlap looks (runtime/overlap_watch.py) cost the supervisor, in CPU.

    .venv/bin/python scripts/overlap_cpu.py [--runs N] [--window S]

Starts 16 shell agents on the 2,000-file repository, each of which edits a file of its own
and README.md (so every pair overlaps: 120 pairs to record) and then sleeps; once every
agent runs and the first looks are done, reads the supervisor's CPU (its own and that of
the git processes it ran and reaped, from /proc) over a window, with the looks at their
default interval and with them off (KAIRO_OVERLAP_EVERY=0), alternately. Prints each
mode's median, as a percentage of one core. Linux only; like bench.py, it deletes nothing
before the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import bench

HZ = os.sysconf("SC_CLK_TCK")
AGENTS = 16
AGENT = (
    'echo "# $KAIRO_SUBTASK_ID" >> README.md; '
    'echo "# $KAIRO_SUBTASK_ID" >> "src/pkg00/mod00$(echo $KAIRO_SUBTASK_ID | tr -d s).py"; '
    "sleep 600"
)
SETTLE_S = 12.0  # the fan-out's work and the first looks (which seed their index files)


def supervisor_cpu(pid: int) -> float:
    """utime + stime of the supervisor and of its children it has reaped (git)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return sum(int(field) for field in fields[11:15]) / HZ


def one_run(lab: bench.Lab, template: Path, every: str, window: float) -> float:
    lab.env["KAIRO_OVERLAP_EVERY"] = every
    repo = lab.copy_of(template, "overlaps")
    plan = bench.write_plan(repo, "overlaps", AGENTS, AGENT, max_parallel=AGENTS)
    lab.kairo("start", str(plan), "--detach", cwd=repo)
    bench.wait_until(f"{AGENTS} agents", lambda: bench.started_agents(repo) >= AGENTS)
    time.sleep(SETTLE_S)
    supervisor = lab.supervisor_pid(repo)
    assert supervisor is not None
    before, t0 = supervisor_cpu(supervisor), time.monotonic()
    time.sleep(window)
    used = supervisor_cpu(supervisor) - before
    elapsed = time.monotonic() - t0
    overlaps = len(lab.status(repo).get("overlaps", []))
    if every != "0" and overlaps != AGENTS * (AGENTS - 1) // 2:
        bench.warn(f"{overlaps} overlaps recorded, not {AGENTS * (AGENTS - 1) // 2}")
    lab.retire(repo)
    return 100 * used / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--window", type=float, default=30.0, help="seconds measured")
    parser.add_argument("--workdir", type=Path, help="where the temporary directory goes")
    args = parser.parse_args()
    lab = bench.Lab(args.workdir)
    percent: dict[str, list[float]] = {"looks on (default)": [], "looks off": []}
    try:
        template = lab.template(bench.FULL.repo_files)
        for i in range(args.runs):
            for mode, every in (("looks on (default)", ""), ("looks off", "0"))[:: 1 - 2 * (i % 2)]:
                percent[mode].append(one_run(lab, template, every, args.window))
                bench.note(f"{mode}: {percent[mode][-1]:.2f} % of a core")
    finally:
        lab.close()
    for mode, values in percent.items():
        print(f"{mode:20s} {statistics.median(values):5.2f} % of one core (runs: "
              + " ".join(f"{v:.2f}" for v in values) + ")")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
