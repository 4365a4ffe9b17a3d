#!/usr/bin/env python3
"""When each step of bench.py's fan-out happens, from the times of its events.

    .venv/bin/python scripts/fanout_timeline.py [--runs N] [--cold]

Runs fanout_16's kairo side (`start --detach` of 16 sleeping shell agents on the 2,000-file
repository; each run stopped and cleaned, so the next one takes the spares) and prints,
for each kind of event, the median time of its first and last occurrence after `start`
began, beside when `start` returned and when every agent ran. `--cold` gives every run a
new copy of the repository instead. Where fanout_cpu.py says which processes cost CPU,
this says which stretch of the run is long.
"""

from __future__ import annotations

import argparse
import collections
import sqlite3
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

import bench


def event_times(repo: Path, after_rowid: int, t0: float) -> dict[str, list[float]]:
    """Each event type's times (seconds after `t0`), of the events after `after_rowid`."""
    times: dict[str, list[float]] = collections.defaultdict(list)
    with sqlite3.connect(repo / ".git" / "kairo" / "kairo.db") as db:
        query = "SELECT event_type, created_at FROM kairo_execution_events WHERE rowid > ?"
        for event_type, created_at in db.execute(query + " ORDER BY rowid", (after_rowid,)):
            times[event_type].append(datetime.fromisoformat(created_at).timestamp() - t0)
    return times


def last_rowid(repo: Path) -> int:
    path = repo / ".git" / "kairo" / "kairo.db"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        return int(
            db.execute("SELECT coalesce(max(rowid), 0) FROM kairo_execution_events").fetchone()[0]
        )


def one_run(lab: bench.Lab, repo: Path, n: int) -> dict[str, float]:
    plan = bench.write_plan(repo, "fanout", n, bench.SLEEPING_AGENT, max_parallel=n)
    earlier = bench.Lab.execution_dirs(repo)
    after = last_rowid(repo)
    t0 = time.time()
    lab.kairo("start", str(plan), "--detach", cwd=repo)
    marks = {"start returned": time.time() - t0}
    bench.wait_until(
        f"{n} agents to start", lambda: bench.started_agents(repo, besides=earlier) >= n
    )
    marks["every agent runs"] = time.time() - t0
    for event_type, times in event_times(repo, after, t0).items():
        marks[f"{event_type} (first)"] = times[0]
        if len(times) > 1:
            marks[f"{event_type} (last)"] = times[-1]
    lab.kairo("stop", "--now", "--wait", cwd=repo, check=False)
    lab.kairo("clean", "--force", cwd=repo)
    return marks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="a new repository for every run")
    parser.add_argument("--workdir", type=Path, help="where the temporary directory goes")
    args = parser.parse_args()
    lab = bench.Lab(args.workdir)
    runs: list[dict[str, float]] = []
    try:
        template = lab.template(bench.FULL.repo_files)
        repo = lab.copy_of(template, "timeline")
        one_run(lab, repo, bench.FULL.fanout)  # warm-up, which also leaves the spares
        for _ in range(args.runs):
            if args.cold:
                repo = lab.copy_of(template, "timeline")
            runs.append(one_run(lab, repo, bench.FULL.fanout))
    finally:
        lab.close()
    medians = {
        name: statistics.median(run[name] for run in runs if name in run)
        for name in {name for run in runs for name in run}
    }
    print(f"medians of {len(runs)} runs, seconds after `start` began:")
    for name, median in sorted(medians.items(), key=lambda item: item[1]):
        if median <= medians["every agent runs"]:  # later: the stop and its aftermath
            print(f"  {median:6.3f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
