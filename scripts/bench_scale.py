#!/usr/bin/env python3
"""`make bench-scale`: does a supervisor's cost per subtask stay the same as plans grow?

    .venv/bin/python scripts/bench_scale.py [--small 64] [--large 1024] [--out bench-scale.json]

One run of a `--small` and one of a `--large` plan of trivial shell agents (each writes
one file), both at `max_parallel` 32 (`--parallel`), in the same process on the same
repository template, so that a noisy machine slows both alike. Then, on a second run of
the large plan, a `kill -9` of its supervisor once `--kill-at` subtasks have merged, and
a `resume`.

bench-scale.json holds `scale_<large>`:

    ratio        wall time per subtask, large over small (target <= 1.3)
    cpu_ratio    supervisor CPU (its own utime + stime) per subtask, large over small (<= 1.3)
    rss_mb       the large run's supervisor peak RSS, VmHWM (<= 200)
    backlog_max  the most subtasks accepted and not yet merged at once, from its log (<= 8);
                 each run's `mergeable_backlog_max` says how many of them the merge queue
                 could have taken (not waiting for an earlier subtask, in plan order)
    status_ms    `status --json` of the ended large execution, median of 5 (<= 500)
    resume_first_attempt_s
                 after the kill, from `resume` to the first new attempt_started (<= 3)

and every run's raw figures beside them. Long (several minutes): one run each, not the
five of `make bench`. Like bench.py it works in a temporary directory of its own (put it
in a quiet /var/tmp: `--workdir`), with a private tmux server, and removes it at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import bench

HZ = os.sysconf("SC_CLK_TCK")
PARALLEL = 32  # `--parallel`
REPO_FILES = 200
AGENT = 'echo "$KAIRO_SUBTASK_ID" > "scale-$KAIRO_SUBTASK_ID.txt"'
SAMPLE_S = 0.1
TARGETS = {
    "ratio": 1.3,
    "cpu_ratio": 1.3,
    "rss_mb": 200,
    "backlog_max": 8,
    "status_ms": 500,
    "resume_first_attempt_s": 3,
}


@dataclass(frozen=True)
class Run:
    subtasks: int
    status: str
    merged: int
    wall_s: float
    cpu_s: float  # the supervisor's own
    children_cpu_s: float  # the git and tmux clients it waited for
    rss_mb: float
    backlog_max: int
    mergeable_backlog_max: int

    @property
    def wall_per_subtask_ms(self) -> float:
        return 1e3 * self.wall_s / self.subtasks

    @property
    def cpu_per_subtask_ms(self) -> float:
        return 1e3 * self.cpu_s / self.subtasks


class Sampler:
    """A process's CPU and peak RSS, read from /proc until it exits."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.cpu_s = 0.0
        self.children_cpu_s = 0.0
        self.peak_kb = 0

    def sample(self) -> bool:
        """False once the process is gone (its last figures kept)."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return False
        if stat[0] == "Z":
            return False
        self.cpu_s = (int(stat[11]) + int(stat[12])) / HZ
        self.children_cpu_s = (int(stat[13]) + int(stat[14])) / HZ
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                self.peak_kb = max(self.peak_kb, int(line.split()[1]))
        return True


def events(repo: Path) -> list[tuple[int, str, dict[str, Any]]]:
    db = sqlite3.connect(f"file:{repo / '.git' / 'kairo' / 'kairo.db'}?mode=ro", uri=True)
    try:
        (execution_id,) = db.execute(
            "SELECT execution_id FROM kairo_execution_events ORDER BY rowid DESC LIMIT 1"
        ).fetchone()
        rows = db.execute(
            "SELECT seq, event_type, payload_json FROM kairo_execution_events"
            " WHERE execution_id = ? ORDER BY seq",
            (execution_id,),
        ).fetchall()
    finally:
        db.close()
    return [(seq, kind, json.loads(payload)) for seq, kind, payload in rows]


def backlogs(log: list[tuple[int, str, dict[str, Any]]]) -> tuple[int, int]:
    """The most subtasks at once that were accepted and not yet merged (or given up), and
    the most of those at once that the merge queue could have taken: the accepted ones
    right behind its head, not those waiting for an earlier subtask to finish (a plan
    without dependencies merged in plan order)."""
    order = [subtask["id"] for subtask in log[0][2]["plan"]["subtasks"]]
    waiting: set[str] = set()
    done: set[str] = set()
    head = 0
    most = most_mergeable = 0
    for _, kind, payload in log:
        sid = payload.get("subtask_id")
        if kind == "attempt_judged" and payload.get("accepted"):
            waiting.add(sid)
        elif kind in ("subtask_merged", "subtask_conflicted", "subtask_failed", "subtask_skipped"):
            waiting.discard(sid)
            done.add(sid)
        while head < len(order) and order[head] in done:
            head += 1
        mergeable = 0
        while head + mergeable < len(order) and order[head + mergeable] in waiting:
            mergeable += 1
        most = max(most, len(waiting))
        most_mergeable = max(most_mergeable, mergeable)
    return most, most_mergeable


def merged_count(repo: Path) -> int:
    with contextlib.suppress(sqlite3.Error):
        db = sqlite3.connect(f"file:{repo / '.git' / 'kairo' / 'kairo.db'}?mode=ro", uri=True)
        try:
            (count,) = db.execute(
                "SELECT count(*) FROM kairo_execution_events WHERE event_type = 'subtask_merged'"
            ).fetchone()
            return int(count)
        finally:
            db.close()
    return 0


def start(lab: bench.Lab, n: int, name: str, parallel: int) -> tuple[Path, Sampler, float]:
    repo = lab.copy_of(lab.template(REPO_FILES), name)
    plan = bench.write_plan(repo, name, n, AGENT, max_parallel=parallel)
    t0 = time.perf_counter()
    lab.kairo("start", str(plan), "--detach", cwd=repo)
    pid = lab.supervisor_pid(repo)
    assert pid is not None, "the supervisor was gone before it could be measured"
    return repo, Sampler(pid), t0


def one_run(lab: bench.Lab, n: int, parallel: int) -> tuple[Run, Path]:
    repo, sampler, t0 = start(lab, n, f"scale-{n}", parallel)
    while sampler.sample():
        time.sleep(SAMPLE_S)
    wall = time.perf_counter() - t0
    outcome = lab.status(repo)
    merged = sum(s["state"] == "merged" for s in outcome["subtasks"])
    if outcome["status"] != "COMPLETED":
        bench.warn(f"the {n}-subtask run ended {outcome['status']} ({merged} merged)")
    backlog, mergeable = backlogs(events(repo))
    run = Run(
        subtasks=n,
        status=outcome["status"],
        merged=merged,
        wall_s=wall,
        cpu_s=sampler.cpu_s,
        children_cpu_s=sampler.children_cpu_s,
        rss_mb=sampler.peak_kb / 1024,
        backlog_max=backlog,
        mergeable_backlog_max=mergeable,
    )
    bench.note(f"{n} subtasks: {json.dumps(asdict(run))}")
    return run, repo


def status_ms(lab: bench.Lab, repo: Path) -> float:
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        lab.kairo("status", "--json", cwd=repo)
        samples.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(samples)


def resume_after_kill(lab: bench.Lab, n: int, kill_at: int, parallel: int) -> float:
    """Seconds from `resume` to its first attempt_started, after a kill -9 of a supervisor
    with `kill_at` subtasks merged."""
    repo, sampler, _ = start(lab, n, f"resume-{n}", parallel)
    bench.wait_until(f"{kill_at} merges", lambda: merged_count(repo) >= kill_at)
    bench.kill(sampler.pid)
    bench.wait_until("the supervisor to die", lambda: not sampler.sample())
    last_seq = events(repo)[-1][0]
    t0 = time.perf_counter()
    lab.kairo("resume", "--detach", cwd=repo)

    def attempt_started_or_ended() -> bool:
        later = [kind for seq, kind, _ in events(repo) if seq > last_seq]
        return "attempt_started" in later or "execution_ended" in later

    bench.wait_until("the first attempt after the resume", attempt_started_or_ended)
    took = time.perf_counter() - t0
    if not any(k == "attempt_started" and s > last_seq for s, k, _ in events(repo)):
        raise RuntimeError(f"every attempt had started before {kill_at} merges: kill earlier")
    lab.kairo("stop", "--now", cwd=repo, check=False)
    lab.retire(repo)
    return took


def _round(x: float) -> float:
    return float(f"{x:.4g}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--small", type=int, default=64)
    parser.add_argument("--large", type=int, default=1024)
    parser.add_argument("--kill-at", type=int, default=600, help="merges before the kill -9")
    parser.add_argument("--parallel", type=int, default=PARALLEL, help="max_parallel")
    parser.add_argument("--out", type=Path, default=Path("bench-scale.json"))
    parser.add_argument("--workdir", type=Path, help="where the temporary directory goes")
    args = parser.parse_args(argv)
    if not 0 < args.kill_at < args.large:
        parser.error("--kill-at must be between 0 and --large")

    lab = bench.Lab(args.workdir)
    try:
        small, small_repo = one_run(lab, args.small, args.parallel)
        lab.retire(small_repo)
        large, large_repo = one_run(lab, args.large, args.parallel)
        status = status_ms(lab, large_repo)
        lab.retire(large_repo)
        resume_s = resume_after_kill(lab, args.large, args.kill_at, args.parallel)
    finally:
        lab.close()
    figures = {
        "ratio": large.wall_per_subtask_ms / small.wall_per_subtask_ms,
        "cpu_ratio": large.cpu_per_subtask_ms / small.cpu_per_subtask_ms,
        "rss_mb": large.rss_mb,
        "backlog_max": large.backlog_max,
        "status_ms": status,
        "resume_first_attempt_s": resume_s,
    }
    document = {
        f"scale_{args.large}": {
            **{k: _round(v) for k, v in figures.items()},
            "ok": {k: figures[k] <= target for k, target in TARGETS.items()},
            "targets": TARGETS,
            "runs": [
                {
                    **asdict(run),
                    "wall_per_subtask_ms": _round(run.wall_per_subtask_ms),
                    "cpu_per_subtask_ms": _round(run.cpu_per_subtask_ms),
                }
                for run in (small, large)
            ],
        }
    }
    args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(document, indent=2))
    bench.note(f"wrote {args.out}")
    return 0 if small.status == large.status == "COMPLETED" else 1


if __name__ == "__main__":
    sys.exit(main())
