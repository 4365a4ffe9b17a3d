#!/usr/bin/env python3
"""`make bench`: kairo-orch's performance targets, each beside a raw baseline, in one run.

A user fanning a refactor out to 16 or 64 agents waits on worktree creation, merges and
recovery, and the supervisor must cost next to nothing beside git itself. So every figure
here is taken from the real thing (the `kairo-orch` command, real git repositories, a
real tmux server, the real SQLite store) and, where there is one, next to what the same
job costs done by hand with git, tmux or sqlite3:

    fanout_16      `start` until all 16 agents' processes run (a 2,000-file repository),
                   in a repository where an earlier execution ran and was cleaned: its
                   16 released worktrees kept as spares, as after any earlier run; the
                   plan says `sandbox: {kind: local}`, as the loop has no sandbox either;
                   baseline: a shell loop of `git worktree add` + `tmux new-window`
    fanout_16_cold the same in a repository kairo-orch never ran in: every worktree new
    fanout_16_sandboxed  the same as fanout_16 under the default sandbox (bubblewrap), until
                   every agent runs inside its own; baseline: fanout_16's kairo side, in
                   the same rounds, until its agents run; with the memory of each agent's
                   bwrap processes
    checkpoint_us  one durable safe-point append (`SqliteStore.append`);
                   baseline: a bare sqlite3 INSERT, same WAL + synchronous=FULL, same hashing
    verify_100k_s  `SqliteStore.verify` of a 100,000-event log;
                   baseline: a bare sqlite3 SELECT of the same columns from the same file,
                   plus the SHA-256 chain over the canonical bytes (already in memory)
    merge_32       merge.py's merge (merge-tree + commit-tree) of 32 finished branches;
                   baseline: `git checkout` + `git merge --no-ff` of each in one worktree
    resume_32_s    `resume` after `kill -9` until all 32 running agents are re-attached
    rss_64_mb      the supervisor's peak RSS (VmHWM) over a 64-subtask run
    status_ms      `status --json` on an execution of 64 subtasks;
                   baseline: `git status` in the same repository
    merge_queue_32 the time 32 merges spend in `integration_verify` (a check that sleeps 2 s,
                   one culprit) checked in batches; baseline: checked one by one
                   (`integration_batch: 1`); the final trees must be equal:
                   scripts/bench_merge_queue.py
    merge_queue_32_clean  the same without a culprit, in checks' worth (one check's worth:
                   the mean of the one-by-one run's)
    report_html_1024  Debian's chromium rendering `report --html`'s page of a 1,024-subtask
                   execution (synthesized in process): scripts/bench_report_html.py
    conflict_map_32  the conflict map of 32 branches, one pair in ten sharing a file
                   (scripts/bench_conflicts.py); baseline: merge-tree of every pair
    guard_compare_ms  one look of the guard at what the user owns, finding nothing: a
                   2,000-file checkout mid-work, 1,000 refs (scripts/bench_guard.py);
                   baseline: `git status` in the same checkout
    hosts_3x4_speedup  `start --wait` of 24 subtasks whose agents sleep 10 s
                   (`max_parallel` 12, `placement: workers`) on workers of 4 slots on three
                   hosts of the lab of tests/hosts (network namespaces; root and initdb);
                   baseline: the same on one worker of 4 slots: scripts/bench_hosts.py

Each measurement runs `--warmup` times unmeasured, then `--runs` times; the figure is the
median. A baseline runs in the same process, alternating with its measurement (kairo
first in even runs, the baseline first in odd ones, or op by op for the store; the warm
fan-out's three sides each begin a round in turn), so that a noisy two-core machine slows
both alike and the ratio holds. `ratio` is value/baseline.

Nothing here touches the user's tmux server or repositories: everything lives in a
temporary directory, tmux runs as `tmux -L kairo-bench-<pid>` with a TMUX_TMPDIR of its
own, and that server, the supervisors and the agents started here are ended at the end.

The temporary directory is made in $TMPDIR (or `--workdir`), and nothing in it is deleted
before the end. On ext4 mounted with `discard` (this machine's root), creating files in
a directory near one where tens of thousands were just deleted is several times slower
for many minutes (2,000 small files: 0.08 s fresh, 0.6-1.0 s there), which would measure
the file system rather than kairo-orch. After a test run has churned /tmp, point the
bench elsewhere: `TMPDIR=/var/tmp make bench`. The bench's own deletion of its directory at
the end is such a mass deletion: `--keep` leaves the directory (its path is printed) so
that measurements run one after another do not slow each other; remove it when done.

Output: a table on stdout and `bench.json` (`--out`), one object per name with `value`,
`baseline`, `ratio`, `unit`, `target` and `ok`. The exit status is 0 when every
measurement ran, whatever the figures; `ok` says which targets hold. `--tiny` runs every
measurement at toy sizes in seconds (the smoke test), and its figures mean nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shlex
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `python scripts/bench.py` from a checkout

from bench_conflicts import conflict_map_pair  # noqa: E402  (a measurement of its own)
from bench_guard import guard_compare_pair  # noqa: E402  (likewise)

# The orchestrator is imported lazily, inside the measurements that call it in-process:
# the CLI figures must not depend on what this process happens to have imported.

POLL_S = 0.01
WAIT_S = 600.0  # the longest any single wait may take before the run is abandoned
SLEEPING_AGENT = "sleep 600"  # ended with its tmux session once measured
# The same, saying that it runs: its first line in its output log is the sign that it does,
# inside its sandbox if it has one.
ANNOUNCED_SLEEP = f"echo running; exec {SLEEPING_AGENT}"
SHORT_AGENT = 'sleep 0.2; echo "$KAIRO_SUBTASK_ID" > "bench-$KAIRO_SUBTASK_ID.txt"'


# ---------------------------------------------------------------------------------------
# Sizes, targets, results


@dataclass(frozen=True)
class Sizes:
    repo_files: int = 2_000  # the generated repository of fanout, merge, rss and status
    fanout: int = 16
    appends: int = 500  # safe-point appends per run of checkpoint_us
    events: int = 100_000
    branches: int = 32
    resume: int = 32
    rss: int = 64
    rss_parallel: int = 16
    queue: int = 32  # subtasks of merge_queue_32
    check_s: float = 2.0  # how long its integration check sleeps
    report_subtasks: int = 1024
    hosts_subtasks: int = 24  # of hosts_3x4_speedup
    hosts_sleep_s: float = 10.0  # how long each of its agents sleeps
    hosts_slots: int = 4  # each worker's
    guard_refs: int = 1_000  # of guard_compare_ms
    runs: int = 5
    warmup: int = 1


FULL = Sizes()
TINY = Sizes(
    repo_files=20,
    fanout=2,
    appends=20,
    events=200,
    branches=2,
    resume=2,
    rss=2,
    rss_parallel=2,
    queue=4,
    check_s=0.1,
    report_subtasks=16,
    hosts_subtasks=6,
    hosts_sleep_s=0.2,
    hosts_slots=2,
    guard_refs=10,
    runs=1,
    warmup=0,
)


@dataclass(frozen=True)
class Target:
    text: str
    max_value: float | None = None
    max_ratio: float | None = None

    def holds(self, value: float, ratio: float | None) -> bool:
        if self.max_value is not None and value > self.max_value:
            return False
        return self.max_ratio is None or (ratio is not None and ratio <= self.max_ratio)


TARGETS: dict[str, tuple[str, Target]] = {
    "fanout_16": ("s", Target("ratio <= 1.10", max_ratio=1.10)),
    "fanout_16_cold": ("s", Target("ratio <= 1.10", max_ratio=1.10)),
    "fanout_16_sandboxed": ("s", Target("ratio <= 1.15", max_ratio=1.15)),
    "checkpoint_us": ("µs", Target("<= 500 µs and ratio <= 1.5", max_value=500, max_ratio=1.5)),
    "verify_100k_s": ("s", Target("<= 1.0 s and ratio <= 1.5", max_value=1.0, max_ratio=1.5)),
    "merge_32": ("s", Target("ratio <= 0.35", max_ratio=0.35)),
    "resume_32_s": ("s", Target("<= 2 s", max_value=2.0)),
    "rss_64_mb": ("MB", Target("<= 150 MB", max_value=150)),
    "status_ms": ("ms", Target("<= 500 ms", max_value=500)),
    "merge_queue_32": ("s", Target("ratio <= 0.25 (8 checks of 32)", max_ratio=0.25)),
    "merge_queue_32_clean": ("checks", Target("<= 2 checks' worth", max_value=2.0)),
    "report_html_1024": ("s", Target("<= 3 s", max_value=3.0)),
    "conflict_map_32": ("s", Target("<= 1.5 s", max_value=1.5)),
    "hosts_3x4_speedup": ("s", Target("ratio <= 0.4 (2.5x faster)", max_ratio=0.4)),
    "guard_compare_ms": ("ms", Target("<= 50 ms", max_value=50)),
}


@dataclass(frozen=True)
class Figure:
    name: str
    value: float
    baseline: float | None
    samples: tuple[float, ...]  # every measured run, for the table's spread column
    # Further medians that explain the figure, written to bench.json beside it.
    details: dict[str, float] = field(default_factory=dict)

    @property
    def unit(self) -> str:
        return TARGETS[self.name][0]

    @property
    def target(self) -> Target:
        return TARGETS[self.name][1]

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline <= 0:
            return None
        return self.value / self.baseline

    def to_json(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "value": _round(self.value),
            "baseline": None if self.baseline is None else _round(self.baseline),
            "ratio": None if ratio is None else round(ratio, 3),
            "unit": self.unit,
            "target": self.target.text,
            "ok": self.target.holds(self.value, ratio),
            **{key: _round(value) for key, value in self.details.items()},
        }


def _round(x: float) -> float:
    """Four significant digits: enough for a median of a noisy machine."""
    return float(f"{x:.4g}")


def note(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


WARNINGS: list[str] = []


def warn(message: str) -> None:
    """Something that went wrong in kairo-orch while it was measured: repeated at the end."""
    WARNINGS.append(message)
    note(f"WARNING {message}")


Pair = Callable[[bool], tuple[float, float | None]]


def alternate(measure: Callable[[], float], baseline: Callable[[], float] | None) -> Pair:
    """One run of a measurement and its baseline: the baseline first when asked."""

    def run(baseline_first: bool) -> tuple[float, float | None]:
        if baseline is None:
            return measure(), None
        if baseline_first:
            theirs = baseline()
            return measure(), theirs
        ours = measure()
        return ours, baseline()

    return run


def repeat(name: str, sizes: Sizes, run: Pair, unit: str = "s") -> Figure:
    """`warmup` unmeasured runs, then `runs` measured ones, the baseline first in every
    other run; the medians of both."""
    values: list[float] = []
    baselines: list[float] = []
    for i in range(sizes.warmup + sizes.runs):
        value, baseline = run(i % 2 == 1)
        measured = i >= sizes.warmup
        label = f"run {i - sizes.warmup + 1}/{sizes.runs}" if measured else "warm-up"
        shown = f"{value:.4g} {unit}"
        if baseline is not None:
            shown += f" (baseline {baseline:.4g} {unit})"
        note(f"{name} {label}: {shown}")
        if measured:
            values.append(value)
            if baseline is not None:
                baselines.append(baseline)
    return Figure(
        name,
        statistics.median(values),
        statistics.median(baselines) if baselines else None,
        tuple(values),
    )


def scaled(figure: Figure, factor: float) -> Figure:
    """The same figure in another unit (seconds to ms or µs)."""
    return replace(
        figure,
        value=figure.value * factor,
        baseline=None if figure.baseline is None else figure.baseline * factor,
        samples=tuple(s * factor for s in figure.samples),
    )


# ---------------------------------------------------------------------------------------
# The lab: temporary directories, a private tmux server, the command line, cleanup


def wait_until(what: str, done: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(POLL_S)


def process_alive(pid: int) -> bool:
    """Running and not a zombie (a zombie's cmdline is empty)."""
    try:
        return bool(Path(f"/proc/{pid}/cmdline").read_bytes())
    except OSError:
        return False


def machine_busy_s() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (all cores, /proc/stat);
    None where there is no /proc/stat."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            ticks = [int(t) for t in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle, iowait = ticks[3], ticks[4]
    return (sum(ticks) - idle - iowait) / os.sysconf("SC_CLK_TCK")


class BusyCpu:
    """The machine's busy CPU seconds over each run of a measurement, for its medians."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._start: float | None = None

    def begin(self) -> None:
        self._start = machine_busy_s()

    def end(self) -> None:
        now = machine_busy_s()
        if self._start is not None and now is not None:
            self.samples.append(now - self._start)

    def median_of_last(self, runs: int) -> float | None:
        measured = self.samples[-runs:]  # the warm-ups came first
        return statistics.median(measured) if len(measured) == runs else None


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


class Lab:
    """Where every measurement works, and what is ended and removed afterwards."""

    def __init__(self, workdir: Path | None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="kairo-bench-", dir=workdir)).resolve()
        # Kept short and in /tmp: a unix socket path may not exceed 107 bytes.
        self.tmux_dir = Path(tempfile.mkdtemp(prefix="kairo-bench-tmux-", dir="/tmp"))
        self.socket = f"kairo-bench-{os.getpid()}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KAIRO_", "TMUX", "GIT_"))}
        env.update(KAIRO_TMUX_SOCKET=self.socket, TMUX_TMPDIR=str(self.tmux_dir))
        self.env = env
        kairo = Path(sys.executable).with_name("kairo-orch")
        self.kairo_argv = (
            [str(kairo)] if kairo.exists() else [sys.executable, "-m", "orchestrator.cli.main"]
        )
        self._names = 0
        self._templates: dict[int, Path] = {}
        # A session that outlives every measured one, so that neither kairo nor a baseline
        # pays for starting the tmux server (it exits with its last session otherwise).
        self.tmux("new-session", "-d", "-s", "bench-keepalive", "sleep 86400")

    # -- processes

    def run(
        self, argv: list[str], cwd: Path, *, check: bool = True, timeout: float = WAIT_S
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{shlex.join(argv)} exited {done.returncode} in {cwd}:\n{done.stderr.strip()}"
            )
        return done

    def kairo(self, *args: str, cwd: Path, check: bool = True) -> str:
        return self.run([*self.kairo_argv, *args], cwd, check=check).stdout

    def status(self, repo: Path) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.kairo("status", "--json", cwd=repo))
        return document

    def git(self, repo: Path, *args: str) -> str:
        return self.run(["git", *args], repo).stdout

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(["tmux", "-L", self.socket, *args], self.root, check=False)

    def bash(self, script: str, cwd: Path) -> None:
        self.run(["bash", "-euo", "pipefail", "-c", script], cwd)

    # -- places

    def fresh_dir(self, name: str) -> Path:
        self._names += 1
        path = self.root / f"{self._names:03d}-{name}"
        path.mkdir()
        return path

    def template(self, files: int) -> Path:
        """A committed repository of `files` generated Python files (made once, packed)."""
        if files not in self._templates:
            self._templates[files] = make_repo(self, self.fresh_dir(f"template-{files}"), files)
        return self._templates[files]

    def copy_of(self, template: Path, name: str) -> Path:
        """A private copy of a template repository; the plan files go beside it."""
        repo = self.fresh_dir(name) / "repo"
        self.run(["cp", "-a", str(template), str(repo)], self.root)
        # A copy's files have new inodes, so its index looks stale to git and the first
        # `git status` (start's check for uncommitted changes) hashes every file again;
        # a user's checkout is not in that state.
        self.run(["git", "update-index", "-q", "--refresh"], repo, check=False)
        # Written back now, so that the measured run does not pay for the copy's writeback.
        os.sync()
        return repo

    def retire(self, repo: Path) -> None:
        """End whatever still runs for `repo`: its supervisor, its sessions, their agents.

        Its files stay until `close`: on ext4 mounted with `discard` (as here), deleting
        tens of thousands of files makes creating files near them several times slower
        for minutes after, which would slow every later run of every measurement.
        """
        for pid in self.pids_under(repo.parent):
            kill(pid)
        for session in self._sessions(repo):
            self.tmux("kill-session", "-t", f"={session}")
        # Its runners were killed with their agents: their cgroups, empty, are left.
        from orchestrator.runtime.cgroups import end_cgroups_of

        for execution in self.execution_dirs(repo):
            end_cgroups_of(execution.name)

    # -- the supervisor

    @staticmethod
    def execution_dirs(repo: Path) -> list[Path]:
        runs = repo / ".git" / "kairo" / "runs"
        return sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []

    def supervisor_pid(self, repo: Path) -> int | None:
        """The live supervisor of `repo`'s newest execution: the pid of its log's last
        supervisor_started, read from the store at once (where `status --json` would take
        a command's time)."""
        executions = self.execution_dirs(repo)
        if not executions:
            return None
        with contextlib.suppress(sqlite3.Error, TypeError):
            (payload,) = self._query(
                repo,
                "SELECT payload_json FROM kairo_execution_events WHERE execution_id = ?"
                " AND event_type = 'supervisor_started' ORDER BY seq DESC LIMIT 1",
                executions[-1].name,
            )
            pid = int(json.loads(payload)["pid"])
            return pid if process_alive(pid) else None
        return None

    def _sessions(self, repo: Path) -> list[str]:
        sessions = []
        for execution in self.execution_dirs(repo):
            with contextlib.suppress(OSError, ValueError, KeyError):
                sessions.append(self._session_of(repo, execution.name))
        return sessions

    def _session_of(self, repo: Path, execution_id: str) -> str:
        (payload,) = self._query(
            repo,
            "SELECT payload_json FROM kairo_execution_events WHERE execution_id = ? AND seq = 0",
            execution_id,
        )
        session: str = json.loads(payload)["tmux_session"]
        return session

    @staticmethod
    def _query(repo: Path, sql: str, *parameters: str) -> Any:
        db = sqlite3.connect(f"file:{repo / '.git' / 'kairo' / 'kairo.db'}?mode=ro", uri=True)
        try:
            return db.execute(sql, parameters).fetchone()
        finally:
            db.close()

    def pids_under(self, directory: Path) -> list[int]:
        """Processes started here whose cwd or command line is under `directory`:
        supervisors (`--repo DIR`), runners and agents (their worktree)."""
        found = []
        needle = str(directory).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                cwd = (entry / "cwd").readlink()
                if cwd.is_relative_to(directory) or needle in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
        return found

    def close(self, *, keep_files: bool = False) -> None:
        for pid in self.pids_under(self.root):
            kill(pid)
        self.tmux("kill-server")
        wait_until(
            "the bench's tmux server to exit",
            lambda: self.tmux("has-session").returncode != 0,
            timeout=10,
        )
        shutil.rmtree(self.tmux_dir, ignore_errors=True)
        if not keep_files:
            shutil.rmtree(self.root, ignore_errors=True)


def make_repo(lab: Lab, directory: Path, files: int) -> Path:
    """A repository of `files` small Python modules in folders of 100, one commit, packed."""
    repo = directory / "repo"
    repo.mkdir()
    lab.git(repo, "init", "-q", "-b", "main")
    lab.git(repo, "config", "user.name", "Bench User")
    lab.git(repo, "config", "user.email", "bench@example.com")
    lab.git(repo, "config", "commit.gpgsign", "false")
    for i in range(files):
        module = repo / "src" / f"pkg{i // 100:02d}" / f"mod{i:04d}.py"
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text(
            f'"""Module {i}."""\n\n\n'
            + "".join(f"def f{i}_{j}(x):\n    return x * {j} + {i}\n\n\n" for j in range(8)),
            encoding="utf-8",
        )
    (repo / "README.md").write_text("generated for kairo-orch's benchmark\n", encoding="utf-8")
    lab.git(repo, "add", "-A")
    lab.git(repo, "commit", "-q", "-m", "generated base")
    lab.git(repo, "repack", "-adq")
    return repo


def write_plan(
    repo: Path, name: str, subtasks: int, run: str, max_parallel: int, sandbox: str | None = None
) -> Path:
    """A plan of `subtasks` shell agents running `run`, outside the repository, in the
    `sandbox` of that kind (None: the default's)."""
    lines = [
        "version: 1",
        f"name: {name}",
        f"max_parallel: {max_parallel}",
        *(["sandbox:", f"  kind: {sandbox}"] if sandbox is not None else []),
        "agent:",
        "  kind: shell",
        f"  run: {json.dumps(run)}",
        "subtasks:",
        *(f"  - id: s{i:02d}" for i in range(subtasks)),
    ]
    path = repo.parent / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def started_agents(repo: Path, *, besides: Collection[Path] = ()) -> int:
    """Attempts whose runner has started its agent (it writes started.json after fork), in
    the executions of `repo` other than `besides`."""
    return sum(
        len(list(e.glob("*/1/started.json"))) for e in Lab.execution_dirs(repo) if e not in besides
    )


def running_agents(repo: Path, *, besides: Collection[Path] = ()) -> int:
    """Attempts whose agent has written to its output log (ANNOUNCED_SLEEP's line), in the
    executions of `repo` other than `besides`."""
    from orchestrator.core.ids import OUTPUT_LOG

    count = 0
    for execution in Lab.execution_dirs(repo):
        if execution not in besides:
            for log in execution.glob(f"*/1/{OUTPUT_LOG}"):
                with contextlib.suppress(OSError):
                    count += log.stat().st_size > 0
    return count


# ---------------------------------------------------------------------------------------
# The measurements, one function each


@dataclass
class FanoutRuns:
    """What one side of the fan-out measured in each of its runs, warm-ups first."""

    values: list[float] = field(default_factory=list)
    cpu: BusyCpu = field(default_factory=BusyCpu)
    #: A kairo fan-out's: until every runner had started its agent (started.json), and
    #: until every agent ran (had written to its output log, from inside its sandbox).
    started: list[float] = field(default_factory=list)
    running: list[float] = field(default_factory=list)
    #: A sandboxed fan-out's: the memory of each agent's bwrap processes (`sandbox_memory`).
    memory: list[dict[str, float]] = field(default_factory=list)

    def label(self, sizes: Sizes) -> str:
        """What the run about to be made is called in the notes."""
        i = len(self.values)
        return f"run {i - sizes.warmup + 1}/{sizes.runs}" if i >= sizes.warmup else "warm-up"


def measured_median(samples: list[float], sizes: Sizes) -> float:
    """The median of `samples` but their warm-ups."""
    return statistics.median(samples[sizes.warmup :])


def rotate(sizes: Sizes, sides: list[Callable[[], None]]) -> None:
    """`warmup` unmeasured rounds, then `runs` measured ones, of every side in turn, each
    round beginning one side later than the last (with two: `repeat`'s alternation), so
    that a noisy machine slows each side alike."""
    for i in range(sizes.warmup + sizes.runs):
        first = i % len(sides)
        for side in [*sides[first:], *sides[:first]]:
            side()


def bench_fanout(
    lab: Lab, sizes: Sizes, *, cold: bool, loop: bool = True, sandboxed: bool = False
) -> list[Figure]:
    """`start` until every agent's process runs, against a shell loop doing the same by
    hand (`loop`): one `git worktree add` (with its checkout) and one `tmux new-window`
    each; and (`sandboxed`, not `cold`) the same fan-out under the default sandbox against
    the local one, in the same rounds.

    The local fan-out says `sandbox: {kind: local}`, as the loop has none: its figures
    stay those of the fan-out before bubblewrap became the default. Its figure ends when
    every runner has started its agent, as it always has; the sandboxed one, and its
    baseline, end when every agent has printed a line, from inside its sandbox: a runner
    starts bwrap, which still has its namespaces and mounts to make.

    Not `cold`, every run goes on in one repository (one each, local and sandboxed),
    ended between runs the way a user ends one (`stop --now`, `clean --force`: the released
    worktrees are kept as spares), so each measured run's worktrees are the last run's,
    checked out anew; `cold`, each run has a new copy of the repository and every worktree
    is written from nothing.

    bench.json also gets the machine's busy CPU seconds over each (`cpu_s`,
    `baseline_cpu_s`): the loop keeps one core busy, kairo both, so on a machine of few
    cores the CPU kairo spends beside git's, not its waiting, is what sets the ratio; and
    the sandboxed fan-out's `runners_started_s` and the memory of its bwrap processes an
    agent (`sandbox_rss_kb`, `sandbox_pss_kb`, `sandbox_private_kb`).
    """
    assert loop or sandboxed, "nothing to compare the fan-out with"
    n = sizes.fanout
    template = lab.template(sizes.repo_files)
    name = "fanout_16_cold" if cold else "fanout_16"
    local, by_hand, bubblewrapped = FanoutRuns(), FanoutRuns(), FanoutRuns()

    def kairo(runs: FanoutRuns, sandbox: str | None) -> Callable[[], None]:
        """One side: the plan's `sandbox` kind, or none (the default)."""
        reused: list[Path] = []

        def run() -> None:
            label = runs.label(sizes)
            repo = reused[0] if reused else lab.copy_of(template, f"fanout-{sandbox or 'default'}")
            plan = write_plan(repo, "fanout", n, ANNOUNCED_SLEEP, max_parallel=n, sandbox=sandbox)
            earlier = Lab.execution_dirs(repo)
            runs.cpu.begin()
            t0 = time.perf_counter()
            lab.kairo("start", str(plan), "--detach", cwd=repo)
            wait_until(f"{n} agents to start", lambda: started_agents(repo, besides=earlier) >= n)
            started = time.perf_counter() - t0
            wait_until(f"{n} agents to run", lambda: running_agents(repo, besides=earlier) >= n)
            running = time.perf_counter() - t0
            runs.cpu.end()
            runs.started.append(started)
            runs.running.append(running)
            if sandbox is None:
                runs.memory.append(sandbox_memory(repo, besides=earlier))
                runs.values.append(running)
                memory = runs.memory[-1]
                note(
                    f"fanout_16_sandboxed {label}: {running:.4g} s (its runners started at "
                    f"{started:.4g} s); bwrap an agent: {memory['sandbox_pss_kb']:.0f} kB PSS"
                )
            else:
                runs.values.append(started)
                note(f"{name} {label}: {started:.4g} s (its agents running at {running:.4g} s)")
            if not cold:
                lab.kairo("stop", "--now", "--wait", cwd=repo)
                lab.kairo("clean", "--force", cwd=repo)
                reused[:] = [repo]
            lab.retire(repo)

        return run

    def shell_loop() -> None:
        label = by_hand.label(sizes)
        repo = lab.copy_of(template, "fanout-baseline")
        markers = repo.parent / "started"
        markers.mkdir()
        worktrees = repo.parent / "repo.bench-worktrees"  # beside it, as kairo-orch's go
        tmux = f"tmux -L {shlex.quote(lab.socket)}"
        script = f"""
            {tmux} new-session -d -s bench-fanout -c "$PWD"
            for i in $(seq 1 {n}); do
                git worktree add -q -b "bench-$i" "{worktrees}/$i" HEAD
                {tmux} new-window -d -t bench-fanout: -c "{worktrees}/$i" \\
                    "sh -c 'touch {markers}/$i; exec {SLEEPING_AGENT}'"
            done
        """
        by_hand.cpu.begin()
        t0 = time.perf_counter()
        lab.bash(script, repo)
        wait_until(f"{n} sleeps to start", lambda: sum(1 for _ in markers.iterdir()) >= n)
        elapsed = time.perf_counter() - t0
        by_hand.cpu.end()
        by_hand.values.append(elapsed)
        note(f"{name} {label}: the loop {elapsed:.4g} s")
        lab.tmux("kill-session", "-t", "=bench-fanout")
        lab.retire(repo)

    sides = [kairo(local, "local")]
    sides += [shell_loop] if loop else []
    sides += [kairo(bubblewrapped, None)] if sandboxed and not cold else []
    rotate(sizes, sides)

    figures = []
    if loop:
        figures.append(compared(name, local, by_hand, by_hand.values, sizes))
    if sandboxed and not cold:
        figure = compared("fanout_16_sandboxed", bubblewrapped, local, local.running, sizes)
        started = measured_median(bubblewrapped.started, sizes)
        memory = {
            key: statistics.median(m[key] for m in bubblewrapped.memory[sizes.warmup :])
            for key in bubblewrapped.memory[0]
        }
        note(
            "fanout_16_sandboxed: bwrap's processes an agent (medians): "
            + ", ".join(f"{key} {value:.0f}" for key, value in memory.items())
        )
        figures.append(
            replace(figure, details={**figure.details, "runners_started_s": started, **memory})
        )
    return figures


def compared(
    name: str, ours: FanoutRuns, theirs: FanoutRuns, baselines: list[float], sizes: Sizes
) -> Figure:
    """The figure of `ours` beside `baselines` (measured by `theirs`), with both CPUs."""
    measured = tuple(ours.values[sizes.warmup :])
    figure = Figure(name, statistics.median(measured), measured_median(baselines, sizes), measured)
    cpu = ours.cpu.median_of_last(sizes.runs)
    baseline_cpu = theirs.cpu.median_of_last(sizes.runs)
    if cpu is None or baseline_cpu is None:
        return figure
    note(f"{name} CPU (the whole machine): {cpu:.3g} s, baseline {baseline_cpu:.3g} s")
    return replace(figure, details={"cpu_s": cpu, "baseline_cpu_s": baseline_cpu})


def sandbox_memory(repo: Path, *, besides: Collection[Path]) -> dict[str, float]:
    """The memory of the bubblewrap processes of each running attempt of `repo` (the
    runner's child, bwrap, and its child, pid 1 of the agent's pid namespace), a mean
    per attempt, in kB, from their smaps_rollup: resident (`sandbox_rss_kb`), its share of
    pages shared with other processes (`sandbox_pss_kb`) and its own (`sandbox_private_kb`).

    The kernel's own memory for the namespaces and mounts is not counted."""
    started = [
        p for e in Lab.execution_dirs(repo) if e not in besides for p in e.glob("*/1/started.json")
    ]
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    totals = {"sandbox_rss_kb": 0.0, "sandbox_pss_kb": 0.0, "sandbox_private_kb": 0.0}
    for path in started:
        agent = int(json.loads(path.read_text(encoding="utf-8"))["agent_pid"])
        for pid in (agent, *children.get(agent, ())):
            if Path(f"/proc/{pid}/comm").read_text().strip() != "bwrap":
                continue
            rollup = {
                key: float(value.split()[0])
                for key, _, value in (
                    line.partition(":")
                    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
                )
            }
            totals["sandbox_rss_kb"] += rollup["Rss"]
            totals["sandbox_pss_kb"] += rollup["Pss"]
            totals["sandbox_private_kb"] += rollup["Private_Clean"] + rollup["Private_Dirty"]
    return {key: total / len(started) for key, total in totals.items()}


def _safe_point_event(i: int) -> Any:
    """A NewEvent as the journal appends it at a safe point: an attempt judged."""
    from orchestrator.core import events as ev
    from orchestrator.store.base import NewEvent

    judged = ev.AttemptJudged(subtask_id=f"s{i % 64:02d}", attempt=1 + i % 3, accepted=True)
    return NewEvent(*ev.to_record(judged), schema_version=ev.SCHEMA_VERSION)


class BareLog:
    """The least a hash-chained log in SQLite can do: canonical bytes, SHA-256, one
    INSERT per event in its own transaction, with the store's WAL and synchronous=FULL."""

    def __init__(self, path: Path, execution_id: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute(
            "CREATE TABLE events (execution_id TEXT NOT NULL, seq INTEGER NOT NULL,"
            " event_id TEXT NOT NULL, event_type TEXT NOT NULL, schema_version INTEGER NOT"
            " NULL, payload_json TEXT NOT NULL, event_hash TEXT NOT NULL, created_at TEXT NOT"
            " NULL, UNIQUE (execution_id, seq))"
        )
        self.execution_id = execution_id
        self.seq = -1
        self.head = "GENESIS"

    def append(self, event_type: str, payload: dict[str, Any], schema_version: int) -> None:
        import rfc8785

        from orchestrator.store.ulid import new_ulid

        self.seq += 1
        created_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        envelope: dict[str, Any] = {
            "execution_id": self.execution_id,
            "seq": self.seq,
            "event_type": event_type,
            "schema_version": schema_version,
            "created_at": created_at,
            "payload": payload,
        }
        self.head = hashlib.sha256(self.head.encode() + rfc8785.dumps(envelope)).hexdigest()
        row = (
            self.execution_id,
            self.seq,
            new_ulid(),
            event_type,
            schema_version,
            rfc8785.dumps(payload).decode(),
            self.head,
            created_at,
        )
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


def bench_checkpoint(lab: Lab, sizes: Sizes) -> Figure:
    """One safe-point event appended with `SqliteStore.append` (one durable transaction,
    as the journal makes it), op by op alternating with a `BareLog` append."""
    from orchestrator.store.sqlite import SqliteStore
    from orchestrator.store.ulid import new_ulid

    directory = lab.fresh_dir("checkpoint")
    execution_id = new_ulid()
    store = SqliteStore(directory / "kairo.db")
    bare = BareLog(directory / "bare.db", execution_id)
    store.create_execution(execution_id, "bench", "RUNNING", [_safe_point_event(0)])
    row = store.get_execution(execution_id)
    assert row is not None
    version = row.version
    counter = 0

    def one_run(baseline_first: bool) -> tuple[float, float | None]:
        nonlocal version, counter
        ours: list[float] = []
        theirs: list[float] = []
        for i in range(sizes.appends):
            counter += 1
            event = _safe_point_event(counter)
            for turn in (1, 0) if (i % 2 == 1) != baseline_first else (0, 1):
                t0 = time.perf_counter()
                if turn == 0:
                    store.append(execution_id, [event], expected_version=version)
                    ours.append(time.perf_counter() - t0)
                    version += 1
                else:
                    bare.append(event.event_type, event.payload, event.schema_version)
                    theirs.append(time.perf_counter() - t0)
        return statistics.median(ours), statistics.median(theirs)

    try:
        return scaled(repeat("checkpoint_us", sizes, one_run), 1e6)
    finally:
        store.close()
        bare.close()


def _log_events(n: int) -> Iterator[Any]:
    """`n` events shaped like a real log's: attempts started, exited with output, committed,
    judged and merged, over 64 subtasks."""
    from orchestrator.core import events as ev
    from orchestrator.store.base import NewEvent

    tail = "".join(f"line {j}: ok, nothing to report\n" for j in range(10))
    for i in range(n):
        sid, attempt = f"subtask-{i % 64:02d}", 1 + (i // 64) % 3
        commit = hashlib.sha1(str(i).encode()).hexdigest()
        kind = i % 5
        model: ev.ExecutionEvent
        if kind == 0:
            model = ev.AttemptStarted(
                subtask_id=sid,
                attempt=attempt,
                idempotency_key=commit[:32],
                run_dir=f"/home/user/project/.git/kairo/runs/01JD8/{sid}/{attempt}",
                start_commit=commit,
            )
        elif kind == 1:
            model = ev.AttemptExited(subtask_id=sid, attempt=attempt, exit_code=0, output_tail=tail)
        elif kind == 2:
            model = ev.AttemptCommitted(
                subtask_id=sid, attempt=attempt, head_commit=commit, changed=True, tree=commit
            )
        elif kind == 3:
            model = ev.AttemptJudged(subtask_id=sid, attempt=attempt, accepted=True)
        else:
            model = ev.SubtaskMerged(
                subtask_id=sid,
                merge_commit=commit,
                previous_commit=commit,
                head_commit=commit,
                changed_paths=(f"src/pkg{i % 20:02d}/mod{i % 2000:04d}.py",),
                diffstat=" 1 file changed, 3 insertions(+), 1 deletion(-)",
                insertions=3,
                deletions=1,
            )
        yield NewEvent(*ev.to_record(model), schema_version=ev.SCHEMA_VERSION)


def bench_verify(lab: Lab, sizes: Sizes) -> Figure:
    """`SqliteStore.verify` of an `events`-long log, against the same job done by hand.

    The baseline is what verification costs at the least: a bare sqlite3 connection to the
    same file runs the SELECT verify runs (the columns the hashes cover, in seq order) and
    steps through every row while hashlib chains the canonical envelopes, which it does
    not build: they were computed beforehand with the reference canonical_json. Reading
    the rows is part of the job; until this baseline it was left out (the chain alone
    over bytes in memory), which made the 1.5 ratio unreachable, since reading 100,000
    rows out of SQLite alone takes twice as long as hashing them. That in-memory chain is
    still timed and noted, so both ratios can be told.
    """
    from orchestrator.core.canonical import GENESIS, canonical_json, envelope
    from orchestrator.store.sqlite import SqliteStore
    from orchestrator.store.ulid import new_ulid

    directory = lab.fresh_dir("verify")
    execution_id = new_ulid()
    store = SqliteStore(directory / "kairo.db")
    note(f"verify_100k_s: writing a log of {sizes.events} events")
    events = list(_log_events(sizes.events))
    store.create_execution(execution_id, "bench", "RUNNING", events[:1])
    for start in range(1, len(events), 1000):
        store.append(execution_id, events[start : start + 1000])
    canonical = [
        canonical_json(
            envelope(
                execution_id=e.execution_id,
                seq=e.seq,
                event_type=e.event_type,
                schema_version=e.schema_version,
                created_at=e.created_at,
                payload=e.payload,
            )
        )
        for e in store.read_events(execution_id)
    ]
    bare = sqlite3.connect(directory / "kairo.db")
    select = (
        "SELECT seq, event_type, schema_version, payload_json, event_hash, created_at"
        " FROM kairo_execution_events WHERE execution_id = ? ORDER BY seq"
    )

    def chain() -> str:
        head = GENESIS
        sha256 = hashlib.sha256
        for body in canonical:
            head = sha256(head.encode() + body).hexdigest()
        return head

    def read_and_chain() -> str:
        head = GENESIS
        sha256 = hashlib.sha256
        for _row, body in zip(bare.execute(select, (execution_id,)), canonical, strict=True):
            head = sha256(head.encode() + body).hexdigest()
        return head

    row = store.get_execution(execution_id)
    assert row is not None and chain() == row.head_hash, "the baseline hashes other bytes"
    assert read_and_chain() == row.head_hash

    def measure() -> float:
        t0 = time.perf_counter()
        store.verify(execution_id)
        return time.perf_counter() - t0

    in_memory: list[float] = []

    def baseline() -> float:
        t0 = time.perf_counter()
        chain()
        in_memory.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        read_and_chain()
        return time.perf_counter() - t0

    try:
        figure = repeat("verify_100k_s", sizes, alternate(measure, baseline))
    finally:
        store.close()
        bare.close()
    old = statistics.median(in_memory[sizes.warmup :])
    note(
        f"verify_100k_s: the chain alone over bytes in memory (the baseline before reading"
        f" was counted) takes {old:.4g} s, a ratio of {figure.value / old:.3g}"
    )
    return figure


def _merge_template(lab: Lab, sizes: Sizes) -> tuple[Path, list[str]]:
    """The generated repository with `branches` finished subtask branches off main, each
    changing one file of its own (so no two conflict)."""
    repo = lab.copy_of(lab.template(sizes.repo_files), "merge-template")
    branches = []
    step = max(1, sizes.repo_files // sizes.branches)
    for j in range(sizes.branches):
        branch = f"subtask-{j:02d}"
        i = (j * step) % sizes.repo_files
        module = repo / "src" / f"pkg{i // 100:02d}" / f"mod{i:04d}.py"
        lab.git(repo, "checkout", "-q", "-b", branch, "main")
        with module.open("a", encoding="utf-8") as out:
            out.write(f"\n\ndef added_by_{branch.replace('-', '_')}():\n    return {j}\n")
        lab.git(repo, "commit", "-q", "-am", f"{branch}: add a function")
        branches.append(branch)
    lab.git(repo, "checkout", "-q", "main")
    lab.git(repo, "repack", "-adq")
    return repo, branches


def bench_merge(lab: Lab, sizes: Sizes) -> Figure:
    """`orchestrator.git.merge.merge_branch` of every branch in turn into an integration
    branch, as the supervisor calls it (merge-tree, commit-tree, update-ref: no checkout; a
    supervisor's first merge also reads the branch with for-each-ref, here only the first
    run's, the process remembering main's tree after it), against `git checkout` +
    `git merge --no-ff` of each in one worktree of the integration branch."""
    import trio

    from orchestrator.git.merge import Merged, merge_branch
    from orchestrator.git.repo import Identity, discover_repo

    template, branches = _merge_template(lab, sizes)
    # The supervisor merges the head commit it recorded, not a branch name.
    heads = {branch: lab.git(template, "rev-parse", branch).strip() for branch in branches}
    identity = Identity("Bench User", "bench@example.com")
    trees: dict[str, str] = {}

    async def merge_all(repo: Path) -> float:
        t0 = time.perf_counter()
        for branch in branches:
            outcome = await merge_branch(
                repo,
                target_ref="refs/heads/integration-kairo",
                source_commit=heads[branch],
                message=f"kairo: merge {branch}\n\nKairo-Subtask: {branch}\n",
                identity=identity,
                git_common_dir=repo / ".git",
            )
            assert isinstance(outcome, Merged) and not outcome.already_merged, outcome
        return time.perf_counter() - t0

    def kairo() -> float:
        repo = lab.copy_of(template, "merge")
        lab.git(repo, "branch", "integration-kairo", "main")
        discover_repo(repo)  # the repository the user names, as `start` finds it
        elapsed = trio.run(merge_all, repo)
        trees["kairo"] = lab.git(repo, "rev-parse", "integration-kairo^{tree}")
        lab.retire(repo)
        return elapsed

    def by_hand() -> float:
        repo = lab.copy_of(template, "merge-baseline")
        worktree = repo.parent / "integration"
        lab.git(repo, "worktree", "add", "-q", "-b", "integration-git", str(worktree), "main")
        script = "".join(
            f"git checkout -q integration-git\n"
            f"git merge -q --no-ff -m {shlex.quote('merge ' + b)} {shlex.quote(b)}\n"
            for b in branches
        )
        t0 = time.perf_counter()
        lab.bash(script, worktree)
        elapsed = time.perf_counter() - t0
        trees["git"] = lab.git(repo, "rev-parse", "integration-git^{tree}")
        lab.retire(repo)
        return elapsed

    figure = repeat("merge_32", sizes, alternate(kairo, by_hand))
    assert trees["kairo"] == trees["git"], "kairo's merges and git's gave different trees"
    return figure


def bench_resume(lab: Lab, sizes: Sizes) -> Figure:
    """`kill -9` of the supervisor with `resume` agents running, then `resume --detach`
    until the new supervisor has logged every one of them `reattached`."""
    n = sizes.resume
    template = lab.template(min(sizes.repo_files, 20))

    def run() -> float:
        repo = lab.copy_of(template, "resume")
        plan = write_plan(repo, "resume", n, SLEEPING_AGENT, max_parallel=n)
        lab.kairo("start", str(plan), "--detach", cwd=repo)
        wait_until(f"{n} agents to start", lambda: started_agents(repo) >= n)
        pid = lab.supervisor_pid(repo)
        assert pid is not None, "no supervisor runs"
        kill(pid)
        wait_until("the supervisor to die", lambda: not process_alive(pid), timeout=10)
        log = lab.execution_dirs(repo)[-1] / "supervisor.log"

        def reattached() -> bool:
            return log.read_text(encoding="utf-8", errors="replace").count('"reattached"') >= n

        t0 = time.perf_counter()
        lab.kairo("resume", "--detach", cwd=repo)
        wait_until(f"{n} agents to be reattached", reattached)
        elapsed = time.perf_counter() - t0
        lab.retire(repo)
        return elapsed

    return repeat("resume_32_s", sizes, alternate(run, None))


def bench_rss(lab: Lab, sizes: Sizes, keep: list[Path]) -> Figure:
    """The supervisor's VmHWM (peak resident set) over a whole run of `rss` short agents,
    read from /proc until it exits. The last run's repository is kept in `keep`."""
    n = sizes.rss
    template = lab.template(sizes.repo_files)

    def run() -> float:
        repo = lab.copy_of(template, "rss")
        plan = write_plan(repo, "rss", n, SHORT_AGENT, max_parallel=sizes.rss_parallel)
        lab.kairo("start", str(plan), "--detach", cwd=repo)
        pid = lab.supervisor_pid(repo)
        assert pid is not None, "the supervisor was gone before it could be measured"
        peak_kb = 0
        status = Path(f"/proc/{pid}/status")
        deadline = time.monotonic() + WAIT_S
        while process_alive(pid) and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                for line in status.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak_kb = max(peak_kb, int(line.split()[1]))
            time.sleep(0.05)
        outcome = lab.status(repo)
        merged = sum(s["state"] == "merged" for s in outcome["subtasks"])
        if outcome["status"] != "COMPLETED" or merged != n:
            why = "; ".join(
                f"{s['id']} {s['state']}: {s['reason']}"
                for s in outcome["subtasks"]
                if s["state"] != "merged"
            )
            # The peak is measured all the same; the failure is kairo's, and said loudly.
            warn(f"rss_64_mb: the {n}-subtask run ended {outcome['status']}: {why}")
        if keep:
            lab.retire(keep.pop())
        keep.append(repo)
        return peak_kb / 1024

    return repeat("rss_64_mb", sizes, alternate(run, None), unit="MB")


def bench_status(lab: Lab, sizes: Sizes, repo: Path) -> Figure:
    """`kairo-orch status --json` on a finished execution of `rss` subtasks, against
    `git status` in the same repository."""
    n_subtasks = len(lab.status(repo)["subtasks"])
    assert n_subtasks == sizes.rss

    def kairo() -> float:
        t0 = time.perf_counter()
        lab.kairo("status", "--json", cwd=repo)
        return time.perf_counter() - t0

    def by_hand() -> float:
        t0 = time.perf_counter()
        lab.git(repo, "status")
        return time.perf_counter() - t0

    return scaled(repeat("status_ms", sizes, alternate(kairo, by_hand)), 1e3)


def bench_merge_queue(lab: Lab, sizes: Sizes) -> list[Figure]:
    """One execution each (the checks' count is what the figure is made of, and it does
    not vary from run to run; their time is the sleeps')."""
    from bench_merge_queue import run_queue

    from orchestrator.core.plan import INTEGRATION_BATCH

    culprit = f"s{sizes.queue * 13 // 32:02d}"
    common = {"subtasks": sizes.queue, "sleep": sizes.check_s}
    batched = run_queue(lab, make_repo, batch=INTEGRATION_BATCH, culprit=culprit, **common)
    one_by_one = run_queue(lab, make_repo, batch=1, culprit=culprit, **common)
    clean = run_queue(lab, make_repo, batch=INTEGRATION_BATCH, culprit=None, **common)
    note(
        f"merge_queue_32: {batched.checks} checks ({batched.check_s:.1f} s) in batches of "
        f"{INTEGRATION_BATCH}, {one_by_one.checks} ({one_by_one.check_s:.1f} s) one by one, "
        f"{clean.checks} without a culprit"
    )
    worth = one_by_one.check_s / one_by_one.checks  # one check's time, sleep and shell
    assert batched.tree == one_by_one.tree, "batched and one-by-one checks gave different trees"
    assert batched.merged == one_by_one.merged == sizes.queue - 1
    assert clean.merged == sizes.queue
    return [
        Figure(
            "merge_queue_32",
            batched.check_s,
            one_by_one.check_s,
            (batched.check_s,),
            details={
                "checks": batched.checks,
                "checks_one_by_one": one_by_one.checks,
                "same_tree": 1.0,
            },
        ),
        Figure(
            "merge_queue_32_clean",
            clean.check_s / worth,
            None,
            (clean.check_s / worth,),
            details={"checks": clean.checks, "check_s": clean.check_s},
        ),
    ]


def browser_missing() -> str | None:
    from tests.browser import missing

    return missing()


def bench_report_html(lab: Lab, sizes: Sizes) -> Figure:
    """The browser's render of the HTML report of `report_subtasks` subtasks."""
    from bench_report_html import browser_render_s, page_of_a_thousand

    page, rendered = page_of_a_thousand(lab.root, sizes.report_subtasks)
    times, messages = browser_render_s(page, runs=sizes.runs, warmup=sizes.warmup)
    if messages:
        warn(f"report_html_1024: the page left {messages} console message(s)")
    for i, value in enumerate(times):
        note(f"report_html_1024 run {i + 1}/{sizes.runs}: {value:.4g} s")
    return Figure(
        "report_html_1024",
        statistics.median(times),
        None,
        tuple(times),
        details={"page_kb": page.stat().st_size / 1024, "render_in_process_s": rendered},
    )


def bwrap_missing() -> str | None:
    from orchestrator.runtime.sandbox import bwrap_unavailable

    return bwrap_unavailable()


def hosts_missing() -> str | None:
    from tests.hosts.lab import missing

    return missing()


def bench_hosts(sizes: Sizes) -> Figure:
    """One execution on three workers and one on one (the figure is made of the agents'
    sleeps and does not vary much from run to run; a run of the full size takes minutes)."""
    from bench_hosts import measure

    measured = measure(
        subtasks=sizes.hosts_subtasks,
        sleep_s=sizes.hosts_sleep_s,
        slots=sizes.hosts_slots,
    )
    spread, alone = measured.spread.wall_s, measured.alone.wall_s
    note(f"hosts_3x4_speedup: {spread:.4g} s on three workers, {alone:.4g} s on one")
    return Figure(
        "hosts_3x4_speedup",
        spread,
        alone,
        (spread,),
        details={"hosts_used": len(measured.spread.hosts), "same_tree": 1.0},
    )


# ---------------------------------------------------------------------------------------
# The table, bench.json, the command line


def bench_guard(lab: Lab, sizes: Sizes) -> Figure:
    """scripts/bench_guard.py: its figure in ms, with the medians of its details."""
    run, details = guard_compare_pair(lab, sizes.repo_files, sizes.guard_refs)
    figure = scaled(repeat("guard_compare_ms", sizes, run), 1000)
    measured = {name: statistics.median(values[sizes.warmup :]) for name, values in details.items()}
    return replace(figure, details=measured)


def render(figures: list[Figure]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="kairo-orch benchmark (medians)", title_justify="left")
    for column in ("measurement", "value", "baseline", "ratio", "target", "ok", "runs"):
        table.add_column(column, justify="right" if column in ("value", "baseline") else "left")
    for figure in figures:
        shown = figure.to_json()
        baseline = "—" if shown["baseline"] is None else f"{shown['baseline']:g} {figure.unit}"
        ratio = "—" if shown["ratio"] is None else f"{shown['ratio']:.2f}"
        spread = " ".join(f"{s:.3g}" for s in figure.samples)
        table.add_row(
            figure.name,
            f"{shown['value']:g} {figure.unit}",
            baseline,
            ratio,
            shown["target"],
            "[green]yes[/]" if shown["ok"] else "[red]NO[/]",
            spread,
        )
    Console(width=max(shutil.get_terminal_size().columns, 120)).print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tiny", action="store_true", help="toy sizes: a smoke test, seconds")
    parser.add_argument("--runs", type=int, help="measured runs of each (default 5; tiny 1)")
    parser.add_argument("--warmup", type=int, help="unmeasured runs first (default 1; tiny 0)")
    parser.add_argument("--out", type=Path, default=Path("bench.json"), help="default bench.json")
    parser.add_argument("--workdir", type=Path, help="where the temporary directory goes")
    parser.add_argument(
        "--keep", action="store_true", help="leave the temporary directory (see above)"
    )
    parser.add_argument(
        "--only", help="comma-separated names to run (default: all): " + ", ".join(TARGETS)
    )
    args = parser.parse_args(argv)
    sizes = TINY if args.tiny else FULL
    if args.runs is not None:
        sizes = replace(sizes, runs=max(1, args.runs))
    if args.warmup is not None:
        sizes = replace(sizes, warmup=max(0, args.warmup))
    wanted = list(TARGETS) if not args.only else [n.strip() for n in args.only.split(",")]
    unknown = set(wanted) - set(TARGETS)
    if unknown:
        parser.error(f"unknown measurement {', '.join(sorted(unknown))}")
    if "merge_queue_32_clean" in wanted and "merge_queue_32" not in wanted:
        wanted.append("merge_queue_32")  # measured in the same run
    if "status_ms" in wanted and "rss_64_mb" not in wanted:
        wanted.append("rss_64_mb")  # status is measured on the rss run's execution

    sandboxed = "fanout_16_sandboxed" in wanted
    if sandboxed and bwrap_missing() is not None:
        note(f"fanout_16_sandboxed: skipped, {bwrap_missing()}")
        sandboxed = False

    lab = Lab(args.workdir)
    figures: list[Figure] = []
    failed: list[str] = []
    kept: list[Path] = []
    measurements: dict[str, Callable[[], Figure | list[Figure]]] = {
        # Both rows of the warm fan-out, in one set of rounds: the local fan-out is the
        # sandboxed one's baseline.
        "fanout_16": lambda: bench_fanout(
            lab,
            sizes,
            cold=False,
            loop="fanout_16" in wanted,
            sandboxed=sandboxed,
        ),
        "fanout_16_cold": lambda: bench_fanout(lab, sizes, cold=True),
        "checkpoint_us": lambda: bench_checkpoint(lab, sizes),
        "verify_100k_s": lambda: bench_verify(lab, sizes),
        "merge_32": lambda: bench_merge(lab, sizes),
        "resume_32_s": lambda: bench_resume(lab, sizes),
        "rss_64_mb": lambda: bench_rss(lab, sizes, kept),
        "status_ms": lambda: bench_status(lab, sizes, kept[-1]),
        "merge_queue_32": lambda: bench_merge_queue(lab, sizes),
        "report_html_1024": lambda: bench_report_html(lab, sizes),
        "conflict_map_32": lambda: repeat(
            "conflict_map_32", sizes, conflict_map_pair(lab, sizes.repo_files, sizes.branches)
        ),
        "hosts_3x4_speedup": lambda: bench_hosts(sizes),
        "guard_compare_ms": lambda: bench_guard(lab, sizes),
    }
    try:
        for name, measurement in measurements.items():
            # fanout_16_sandboxed is measured with the local fan-out, its baseline.
            if name not in wanted and not (name == "fanout_16" and sandboxed):
                continue
            if name == "report_html_1024" and browser_missing() is not None:
                note(f"report_html_1024: skipped, {browser_missing()}")
                continue
            if name == "hosts_3x4_speedup" and hosts_missing() is not None:
                note(f"hosts_3x4_speedup: skipped, the lab of hosts: {hosts_missing()}")
                continue
            if name == "status_ms" and not kept:
                failed.append(name)
                note("status_ms: skipped, the rss run left no execution to ask about")
                continue
            try:
                measured = measurement()
                figures.extend(measured if isinstance(measured, list) else [measured])
            except Exception:
                failed.append(name)
                note(f"{name} failed:\n{traceback.format_exc()}")
    finally:
        lab.close(keep_files=args.keep)
        if args.keep:
            note(f"kept {lab.root}; remove it when done")

    render(figures)
    document = {figure.name: figure.to_json() for figure in figures}
    args.out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", "utf-8")
    note(f"wrote {args.out}")
    for message in WARNINGS:
        note(f"WARNING {message}")
    if failed:
        note(f"these did not run: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
