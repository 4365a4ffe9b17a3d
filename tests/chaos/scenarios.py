"""The faults of a chaos campaign, each done to a real run as it would happen to a user's,
and what each run must still end with: the tree its plan means, no agent run twice,
nothing left once `clean` ran."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.chaos.lab import ENDED, Lab, Run, git, leaks
from tests.faults.private_postgres import PrivateCluster
from tests.faults.small_disk import small_disk

#: How long a run may take to end once its faults are over.
SETTLE_S = 300


@dataclass
class Tally:
    runs: Counter[str] = field(default_factory=Counter)
    kills: int = 0
    outages: int = 0
    outage_seconds: list[float] = field(default_factory=list)
    supervisors_lost: int = 0
    ended: int = 0
    same_tree: int = 0
    double_runs: int = 0
    reruns_after_tmux_killed: int = 0
    leaks: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def fail(self, run: Run, what: str) -> None:
        self.failures.append(f"{run.repo.parent.name}: {what}")


def _resume(run: Run) -> None:
    """What a user does with a paused execution: resume it, letting an agent that never
    started (its supervisor died between saying so and starting it) start."""
    done = run.kairo("resume", "--detach", "--rerun-interrupted")
    if done.returncode not in (0, 4):  # 4: a supervisor owns it already
        raise RuntimeError(f"resume exited {done.returncode}: {done.stderr.strip()}")


def _to_its_end(run: Run, tally: Tally, *, on_pause: bool = True) -> dict[str, object]:
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        status = run.status()
        if status is not None and status["status"] in ENDED:
            return status
        if on_pause and status is not None and status["status"] == "PAUSED":
            _resume(run)
        time.sleep(0.2)
    raise TimeoutError(f"{run.repo.parent.name} did not end within {SETTLE_S} s")


def _judge(run: Run, tally: Tally, status: dict[str, object], expected: str) -> None:
    """The end every run must reach: completed, the tree its plan means, each agent once,
    a log that verifies; then `clean`, and nothing left."""
    tally.ended += 1
    if status["status"] != "COMPLETED":
        tally.fail(run, f"ended {status['status']}{_why(status)}")
    elif run.tree_of(str(status["integration_branch"])) == expected:
        tally.same_tree += 1
    else:
        tally.fail(run, "a tree other than the plan's")
    tally.double_runs += run.double_runs()
    if run.kairo("verify").returncode != 0:
        tally.fail(run, "its log does not verify")
    _clean(run, tally)


def _why(status: dict[str, object]) -> str:
    """`: ` and each subtask that did not merge, its state and reason, to replay it by."""
    subtasks = status.get("subtasks")
    if not isinstance(subtasks, list):
        return ""
    unmerged = [
        f"{s['id']} {s['state']} ({s.get('reason') or 'no reason'})"
        for s in subtasks
        if s.get("state") != "merged"
    ]
    return f": {'; '.join(unmerged)}" if unmerged else ""


def _clean(run: Run, tally: Tally, *args: str) -> None:
    done = run.kairo("clean", *args)
    if done.returncode != 0:
        tally.fail(run, f"clean exited {done.returncode}: {done.stderr.strip()}")
    left = leaks(run)
    tally.leaks.update(left)
    if left:
        tally.fail(run, f"left {dict(left)}")


def kill_and_resume(
    lab: Lab, tally: Tally, rng: random.Random, *, kills: int, subtasks: int, store: str | None
) -> None:
    """kill -9 of the supervisor at random moments, each followed by a resume."""
    run = lab.new_run(subtasks=subtasks, sleep_s=1.5, store=store)
    tally.runs["postgresql" if store else "sqlite"] += 1
    expected = run.expected_tree()
    started = run.kairo("start", str(run.plan), "--detach")
    if started.returncode != 0:
        tally.fail(run, f"start exited {started.returncode}: {started.stderr.strip()}")
        return
    killed = 0
    while killed < kills:
        status = run.status()
        if status is None or status["status"] in ENDED:
            break
        pid = status["supervisor_pid"]
        if status["status"] != "RUNNING" or not isinstance(pid, int):
            if status["status"] == "PAUSED":
                _resume(run)
            time.sleep(0.05)
            continue
        time.sleep(rng.uniform(0.05, 1.2))
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
        _wait_gone(pid)
        _resume(run)
    tally.kills += killed
    _judge(run, tally, _to_its_end(run, tally), expected)


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}").exists() else ""
        if ") Z " in stat:
            return  # a zombie: gone, its parent (init) not yet told
        time.sleep(0.02)


def postgres_outages(
    lab: Lab,
    tally: Tally,
    rng: random.Random,
    cluster: PrivateCluster,
    *,
    outages: int,
    longest_s: float,
    subtasks: int,
) -> None:
    """The server stopped (every session ended, as a restart does) for 1 to `longest_s`
    seconds, `outages` times, under a running fan-out; its supervisor must ride each out."""
    run = lab.new_run(subtasks=subtasks, sleep_s=2, parallel=4, store=cluster.new_database())
    tally.runs["postgresql outages"] += 1
    expected = run.expected_tree()
    started = run.kairo("start", str(run.plan), "--detach")
    if started.returncode != 0:
        tally.fail(run, f"start exited {started.returncode}: {started.stderr.strip()}")
        return
    run.wait_until(lambda: run.agents_started() >= 2, 60, "the first agents starting")
    for _ in range(outages):
        status = run.status()
        if status is None or status["status"] in ENDED:
            tally.fail(run, "ended before its outages were over: make its agents slower")
            break
        pid = status["supervisor_pid"]
        down = rng.uniform(1.0, longest_s)
        cluster.stop("fast")
        time.sleep(down)
        cluster.start()
        tally.outages += 1
        tally.outage_seconds.append(down)
        time.sleep(rng.uniform(0.5, 2.0))
        if isinstance(pid, int) and not Path(f"/proc/{pid}").exists():
            tally.supervisors_lost += 1
            tally.fail(run, f"its supervisor died in an outage of {down:.1f} s")
            _resume(run)
    _judge(run, tally, _to_its_end(run, tally), expected)


def two_starts_at_once(lab: Lab, tally: Tally) -> None:
    run = lab.new_run(subtasks=4, sleep_s=0.3)
    tally.runs["two starts at once"] += 1
    expected = run.expected_tree()
    both = [run.spawn("start", str(run.plan), "--detach") for _ in range(2)]
    codes = sorted(p.wait(timeout=120) for p in both)
    for started in both:
        started.communicate()
    listed = run.kairo("list", "--json").stdout.count('"execution_id"')
    if codes != [0, 4] or listed != 1:
        tally.fail(run, f"two starts exited {codes} and made {listed} executions")
    _judge(run, tally, _to_its_end(run, tally), expected)


def store_deleted(lab: Lab, tally: Tally) -> None:
    run = lab.new_run(subtasks=8, sleep_s=2, parallel=2)
    tally.runs["store deleted"] += 1
    run.kairo("start", str(run.plan), "--detach")
    run.wait_until(lambda: run.agents_started() >= 2, 60, "the first agents starting")
    status = run.status()
    assert status is not None
    execution_id, pid = str(status["execution_id"]), status["supervisor_pid"]
    for stored in (run.repo / ".git" / "kairo").glob("kairo.db*"):
        stored.unlink()
    run.wait_until(lambda: not isinstance(pid, int) or not Path(f"/proc/{pid}").exists(), 60,
                   "its supervisor stopping")  # fmt: skip
    log = run.repo / ".git" / "kairo" / "runs" / execution_id / "supervisor.log"
    if "was deleted while in use" not in log.read_text():
        tally.fail(run, "its supervisor did not say its store was deleted")
    _clean(run, tally, "--force", execution_id[-6:].lower())


def disk_filled(lab: Lab, tally: Tally) -> None:
    if os.geteuid() != 0:
        tally.runs["disk filled: skipped, mounting a tmpfs needs root"] += 1
        return
    disk = lab.root / f"disk-{lab.runs_made + 1}"
    with small_disk(disk, "2m"):
        run = lab.new_run(subtasks=4, sleep_s=0, extra=f"worktree_root: {disk}\n")
        tally.runs["disk filled"] += 1
        (run.repo / "big.bin").write_bytes(os.urandom(3 * 1024**2))
        git(run.repo, "add", ".")
        git(run.repo, "commit", "-q", "-m", "big")
        done = run.kairo("start", str(run.plan), "--wait")
        status = run.status()
        if done.returncode != 1 or status is None or "is full" not in str(status["subtasks"]):
            tally.fail(run, f"a full disk ended it {done.returncode}, not saying so")
        _clean(run, tally)


def tmux_killed(lab: Lab, tally: Tally) -> None:
    run = lab.new_run(subtasks=16, sleep_s=1, parallel=4)
    tally.runs["tmux killed"] += 1
    expected = run.expected_tree()
    run.kairo("start", str(run.plan), "--detach")
    run.wait_until(lambda: run.agents_started() >= 4, 60, "the first agents starting")
    lab.tmux("kill-server")
    status = _to_its_end(run, tally)
    if any("--rerun-interrupted" in str(s["reason"]) for s in status["subtasks"]):  # type: ignore[attr-defined]
        # What its report says to do: the agents killed with their panes run again.
        run.kairo("resume", "--rerun-interrupted", "--wait", timeout=SETTLE_S)
        status = _to_its_end(run, tally)
    # The agents killed with their panes ran again once resumed: reruns, not doubles.
    tally.reruns_after_tmux_killed += run.double_runs()
    tally.ended += 1
    if (
        status["status"] == "COMPLETED"
        and run.tree_of(str(status["integration_branch"])) == expected
    ):
        tally.same_tree += 1
    else:
        tally.fail(run, f"ended {status['status']} after tmux was killed{_why(status)}")
    _clean(run, tally)
