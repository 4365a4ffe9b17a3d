"""Durable execution: a supervisor killed at any instant loses nothing and runs nothing twice."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core import events as ev
from orchestrator.core.timeline import build_timeline, unix_time
from orchestrator.runtime.state_reader import read_logged
from orchestrator.store.sqlite import SqliteStore
from tests.e2e.conftest import Kairo, git, run_to_its_end, shared_with_agents
from tests.store.tamper import tampering

pytestmark = pytest.mark.slow

# Four subtasks: `b` conflicts with `a`, `c` depends on `a`. Each agent notes that it ran.
CRASHY = """\
version: 1
name: crashy
max_parallel: 2
agent: {{kind: shell, run: "true"}}
subtasks:
  - id: a
    agent: {{run: "echo a >> {runs}; sed -i 's/^one$/ONE/' f.txt"}}
  - id: b
    agent: {{run: "echo b >> {runs}; sed -i 's/^one$/Uno/' f.txt"}}
  - id: c
    depends_on: [a]
    agent: {{run: "echo c >> {runs}; echo c > c.txt"}}
  - id: d
    agent: {{run: "echo d >> {runs}; echo d > d.txt"}}
"""


def crashy_plan(runs: Path) -> str:
    """CRASHY, its agents noting each run in `runs`."""
    runs.touch()
    return CRASHY.format(runs=runs) + shared_with_agents(runs)


def seed(repo: Path) -> None:
    (repo / "f.txt").write_text("one\ntwo\nthree\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "f")


def outcome(kairo: Kairo) -> dict[str, Any]:
    status = kairo.json("status")
    return {
        "tree": git(kairo.repo, "rev-parse", f"{status['integration_branch']}^{{tree}}").strip(),
        "states": {s["id"]: s["state"] for s in status["subtasks"]},
        "conflicts": {s["id"]: s["conflicts"] for s in status["subtasks"] if s["conflicts"]},
        "status": status["status"],
    }


def wait_for(predicate: Any, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def supervisor_logs(repo: Path) -> str:
    """The supervisors' own words, for a failure's message: why one died."""
    logs = sorted((repo / ".git" / "kairo" / "runs").glob("*/supervisor.log"))
    return "".join(
        f"\n--- {log}\n" + "".join(log.read_text().splitlines(True)[-30:]) for log in logs
    )


def clone_kairo(kairo: Kairo, repo: Path, name: str) -> Kairo:
    env = dict(kairo.env, KAIRO_TMUX_SOCKET=f"{kairo.socket}-{name}")
    return Kairo(repo=repo, env=env, socket=env["KAIRO_TMUX_SOCKET"])


def test_a_crash_after_every_event_resumes_to_the_same_result(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    seed(repo)
    template = tmp_path / "template"
    shutil.copytree(repo, template)

    baseline_runs = tmp_path / "baseline.runs"
    plan = kairo.write_plan(crashy_plan(baseline_runs), "baseline.yaml")
    assert kairo.run("start", str(plan), "--wait").returncode == 1
    expected = outcome(kairo)
    assert expected["conflicts"]["b"][0]["with"] == ["a"]
    total_events = kairo.json("status")["head"]["seq"] + 1

    def crash_at(n: int) -> tuple[int, dict[str, Any], list[str]]:
        root = tmp_path / f"crash-{n}"
        shutil.copytree(template, root / "project")
        runner = clone_kairo(kairo, root / "project", str(n))
        runs = root / "runs"
        plan_n = root / "plan.yaml"
        plan_n.write_text(crashy_plan(runs))
        try:
            start_crashing_after(runner, plan_n, n)
            resumed = runner.run("resume", "--wait")
            assert resumed.returncode == 1, resumed.stderr + supervisor_logs(runner.repo)
            return n, outcome(runner), sorted(runs.read_text().split())
        finally:
            runner.tmux("kill-server")

    # Crash points 1..total-1: the supervisor appends every event but the first.
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(crash_at, range(1, total_events)))
    for n, got, runs in results:
        assert got == expected, f"crash after event {n}"
        assert runs == ["a", "b", "c", "d"], f"crash after event {n}: agents ran {runs}"


def runner_command() -> list[str]:
    return [sys.executable, "-m", "orchestrator.cli.main"]


def start_crashing_after(runner: Kairo, plan: Path, n: int) -> None:
    """`start --wait` of `plan` whose supervisor dies right after appending event `n`."""
    crashed = subprocess.run(
        [*runner_command(), "start", str(plan), "--wait"],
        cwd=runner.repo,
        env=dict(runner.env, KAIRO_FAULT_CRASH_AFTER_EVENT=str(n)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert crashed.returncode in (1, 6), crashed.stderr


SLOW_PAIR = """\
version: 1
name: pair
agent: {{kind: shell, run: "true"}}
subtasks:
  - id: left
    agent:
      run: 'echo left >> {runs}; echo partial > left.txt; if [ "$KAIRO_ATTEMPT" = 1 ]; then {hold}; fi; echo left > left.txt'
      idempotent: true
  - id: right
    agent:
      run: 'echo right >> {runs}; echo partial > right.txt; if [ "$KAIRO_ATTEMPT" = 1 ]; then {hold}; fi; echo right > right.txt'
"""


def pair_plan(runs: Path, hold: str, *shared: Path) -> str:
    """SLOW_PAIR, its agents noting each run in `runs`, holding with `hold`, which may
    wait on files in `shared` folders."""
    runs.touch()
    return SLOW_PAIR.format(runs=runs, hold=hold) + shared_with_agents(runs, *shared)


def running_agents(kairo: Kairo) -> int:
    status = kairo.json("status")
    run_root = Path(git(kairo.repo, "rev-parse", "--absolute-git-dir").strip()) / "kairo" / "runs"
    started = list(run_root.glob(f"{status['execution_id']}/*/*/started.json"))
    return len(started)


def start_then_kill_9(
    kairo: Kairo, runs: Path, sleep: float = 2, *, release: Path | None = None
) -> None:
    """Two agents running, then their supervisor killed with -9: the execution is PAUSED.
    Their first attempts end `sleep` seconds after the kill, or (`release`) once that file
    exists (in a folder of its own, which the sandboxed agents see): never before the kill, however slow the machine (a bare `sleep` could end them
    before `status` names the supervisor to kill)."""
    gate = release if release is not None else runs.with_name(f"{runs.name}.gate") / "open"
    gate.parent.mkdir(exist_ok=True)
    hold = f"while [ ! -e {gate} ]; do sleep 0.05; done"
    plan = kairo.write_plan(pair_plan(runs, hold, gate.parent))
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    wait_for(lambda: running_agents(kairo) == 2)
    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGKILL)
    wait_for(lambda: kairo.json("status")["status"] == "PAUSED")
    if release is None:
        timer = threading.Timer(sleep, _touch, args=(gate,))
        timer.daemon = True  # a test that ends first does not wait for it
        timer.start()


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):  # the test's directory may be gone already
        path.touch()


def test_kill_9_while_two_agents_run_reattaches_them(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    start_then_kill_9(kairo, runs)

    began = time.monotonic()
    resumed = kairo.run("resume", "--wait")

    assert resumed.returncode == 0, resumed.stderr
    assert time.monotonic() - began < 30
    assert "was modified" not in resumed.stderr
    assert sorted(runs.read_text().split()) == ["left", "right"]  # each agent ran once
    status = kairo.json("status")
    assert all(s["attempts"] == 1 for s in status["subtasks"])
    branch = status["integration_branch"]
    assert git(repo, "show", f"{branch}:left.txt") == "left\n"
    assert git(repo, "show", f"{branch}:right.txt") == "right\n"
    events = [
        json.loads(line)
        for line in kairo.run("events", status["execution_id"], "--json").stdout.splitlines()
    ]
    starts = [e for e in events if e["event_type"] == "supervisor_started"]
    assert [e["payload"]["resumed"] for e in starts] == [False, True]


KEYED = """\
version: 1
name: keyed
limits: {{max_attempts: 2}}
verify: "test -e second.txt"
agent:
  kind: shell
  env: {{API_KEY: "${{KEYED_API_KEY}}"}}
  run: 'if [ "$KAIRO_ATTEMPT" = 1 ]; then {hold}; else echo > second.txt; fi; printf %s "$API_KEY" | sha256sum >> keys.txt'
subtasks:
  - id: a
"""


def test_an_agent_s_key_is_in_no_file_across_a_kill_9_and_the_resumed_supervisor_s_attempt_gets_it(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    key = "sk-ant-api03-resumed-Zx9Yw8Vu7Ts6Rq5Po4"
    kairo.env["KEYED_API_KEY"] = key
    release = tmp_path / "gate" / "open"
    release.parent.mkdir()
    hold = f"while [ ! -e {release} ]; do sleep 0.05; done"
    plan = kairo.write_plan(KEYED.format(hold=hold) + shared_with_agents(release.parent))
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    wait_for(lambda: running_agents(kairo) == 1)
    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGKILL)
    wait_for(lambda: kairo.json("status")["status"] == "PAUSED")

    # The running agent's runner took its key: no file holds it while nobody supervises.
    kairo_dir = repo / ".git" / "kairo"
    assert not list(kairo_dir.rglob("credentials.json"))
    assert not [p for p in kairo_dir.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]

    resuming = kairo.spawn("resume", "--wait")
    release.touch()  # attempt 1 goes on (re-attached), fails its verify; the resumed starts 2
    _, stderr = resuming.communicate(timeout=120)

    assert resuming.returncode == 0, stderr
    status = kairo.json("status")
    assert status["subtasks"][0]["attempts"] == 2
    digest = hashlib.sha256(key.encode()).hexdigest()
    keys = git(repo, "show", f"{status['integration_branch']}:keys.txt").split()
    assert keys == [digest, "-", digest, "-"]  # both attempts had the key
    assert not [p for p in kairo_dir.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]


def test_resume_without_an_id_goes_on_with_the_paused_execution_not_a_newer_ended_one(
    kairo: Kairo, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    start_then_kill_9(kairo, runs)
    paused = kairo.json("status")["execution_id"]
    run_to_its_end(kairo, "quick")  # the newest, ended

    resumed = kairo.run("resume", "--wait")

    assert resumed.returncode == 0, resumed.stderr
    assert kairo.json("status", paused)["status"] == "COMPLETED"
    assert sorted(runs.read_text().split()) == ["left", "right"]


def test_resume_says_that_a_plan_modified_since_the_start_is_not_what_it_runs(
    kairo: Kairo, tmp_path: Path
) -> None:
    start_then_kill_9(kairo, tmp_path / "runs")
    assert kairo.json("status")["supervisor_pid"] is None  # the dead one's is no one's
    plan = kairo.repo.parent / "plan.yaml"
    plan.write_text(plan.read_text() + "# edited while paused\n")

    resumed = kairo.run("resume", "--wait")

    assert resumed.returncode == 0, resumed.stderr
    assert f"note: {plan} was modified after this execution started" in resumed.stderr


def test_agents_gone_with_their_tmux_server_are_interrupted_and_rerun_only_when_allowed(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    plan = kairo.write_plan(pair_plan(runs, "sleep 60"))
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    wait_for(
        lambda: running_agents(kairo) == 2 and runs.exists() and len(runs.read_text().split()) == 2
    )
    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGKILL)
    kairo.tmux("kill-server")  # the agents die with their panes
    wait_for(lambda: kairo.tmux("has-session").returncode != 0)

    resumed = kairo.run("resume", "--wait")

    assert resumed.returncode == 1, resumed.stderr
    subtasks = {s["id"]: s for s in kairo.json("status")["subtasks"]}
    assert subtasks["left"]["state"] == "merged"  # idempotent: run again
    assert subtasks["left"]["attempts"] == 2
    right = subtasks["right"]
    assert right["state"] == "stopped"
    assert right["reason"].startswith("interrupted:")
    short = kairo.json("status")["execution_id"][-6:].lower()
    recovery = f"refs/kairo/recovery/{short}/right/1"
    assert recovery in right["reason"]
    assert git(repo, "show", f"{recovery}:right.txt") == "partial\n"  # nothing lost
    assert not (Path(right["worktree"]) / "right.txt").exists()  # reset to the safe point

    rerun = kairo.run("resume", "--rerun-interrupted", "--wait")

    assert rerun.returncode == 0, rerun.stderr
    subtasks = {s["id"]: s for s in kairo.json("status")["subtasks"]}
    assert subtasks["right"]["state"] == "merged" and subtasks["right"]["attempts"] == 2
    assert sorted(runs.read_text().split()) == ["left", "left", "right", "right"]
    # The live view, which had ended with the execution, was started again for the rerun.
    view = f"{kairo.json('status')['tmux_session']}:supervisor"
    wait_for(lambda: "COMPLETED" in kairo.tmux("capture-pane", "-p", "-t", view).stdout)


def test_two_concurrent_resumes_one_owns_the_other_exits_4(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    release = tmp_path / "gate" / "open"
    release.parent.mkdir()
    start_then_kill_9(kairo, runs, release=release)  # still running when the third one asks

    both = [
        subprocess.Popen(
            [*runner_command(), "resume", "--detach"],
            cwd=repo,
            env=kairo.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60) for p in both]
    codes = sorted(p.returncode for p in both)

    assert codes == [0, 4], outputs
    again = kairo.run("resume", "--detach")
    assert again.returncode == 4 and "supervised by" in again.stderr
    release.touch()
    wait_for(lambda: kairo.json("status")["status"] == "COMPLETED", seconds=30)
    assert sorted(runs.read_text().split()) == ["left", "right"]


def test_a_tampered_log_is_refused_by_verify_and_resume(kairo: Kairo, repo: Path) -> None:
    plan = kairo.write_plan(
        "version: 1\nname: t\nagent: {kind: shell, run: 'echo x > x.txt'}\nsubtasks:\n  - id: x\n"
    )
    assert kairo.run("start", str(plan), "--wait").returncode == 0
    execution_id = kairo.json("status")["execution_id"]
    db = Path(git(repo, "rev-parse", "--absolute-git-dir").strip()) / "kairo" / "kairo.db"
    with tampering(db) as connection:
        connection.execute(
            "UPDATE kairo_execution_events SET payload_json = replace(payload_json, 'x', 'y')"
            " WHERE execution_id = ? AND seq = 5",
            (execution_id,),
        )

    verified = kairo.run("verify", execution_id)
    resumed = kairo.run("resume", execution_id, "--detach")

    assert verified.returncode == 3 and "seq 5" in verified.stderr
    assert resumed.returncode == 3 and "seq 5" in resumed.stderr


def test_start_refuses_while_an_interrupted_execution_of_the_plan_exists(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    plan = kairo.write_plan(pair_plan(runs, "sleep 2"))
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    execution_id = kairo.json("status")["execution_id"]
    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGKILL)
    wait_for(lambda: kairo.json("status")["status"] == "PAUSED")

    again = kairo.run("start", str(plan), "--detach")

    assert again.returncode == 4
    assert f"kairo-orch resume {execution_id[-6:].lower()}" in again.stderr
    listed = kairo.run("list").stdout
    assert "interrupted" in listed
    fresh = kairo.run("start", str(plan), "--fresh", "--detach")
    assert fresh.returncode == 0, fresh.stderr


def test_clean_refuses_an_execution_that_has_not_ended(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    plan = kairo.write_plan(pair_plan(runs, "sleep 2"))
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGKILL)
    wait_for(lambda: kairo.json("status")["status"] == "PAUSED")

    done = kairo.run("clean")

    assert done.returncode == 4 and "has not ended" in done.stderr
    assert kairo.tmux_sessions()  # the agents' panes, which resume re-attaches, are still there
    assert kairo.run("resume", "--wait").returncode == 0


def test_start_offers_the_interrupted_execution_even_if_the_plan_file_can_no_longer_run(
    kairo: Kairo, tmp_path: Path
) -> None:
    start_then_kill_9(kairo, tmp_path / "runs")
    execution_id = kairo.json("status")["execution_id"]
    plan = kairo.repo.parent / "plan.yaml"  # now for an agent this machine lacks
    plan.write_text("version: 1\nname: pair\nagent: {kind: aider}\nsubtasks:\n  - id: left\n")

    again = kairo.run("start", str(plan), "--detach")

    assert again.returncode == 4, again.stderr  # `resume` runs the plan its log holds
    assert f"kairo-orch resume {execution_id[-6:].lower()}" in again.stderr


def waiters(execution_id: str) -> list[int]:
    """The `tmux wait-for` clients waiting on the execution's wake channels."""
    prefix = f"kairo-wake-{execution_id.lower()}-".encode()
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"wait-for" in argv and b"-S" not in argv and argv[-2].startswith(prefix):
            found.append(int(cmdline.parent.name))
    return found


def test_a_resumed_supervisor_releases_the_waiters_a_killed_one_left(kairo: Kairo) -> None:
    plan = kairo.write_plan(
        "version: 1\nname: waiters\nagent: {kind: shell, run: 'sleep 6; echo x > x.txt'}\n"
        "subtasks:\n  - id: a\n  - id: b\n  - id: c\n"
    )
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    status = kairo.json("status")
    execution = status["execution_id"]
    wait_for(lambda: len(waiters(execution)) == 3)
    os.kill(status["supervisor_pid"], signal.SIGKILL)
    time.sleep(0.3)
    assert len(waiters(execution)) == 3  # left behind, one per agent

    assert kairo.run("resume", "--detach").returncode == 0
    wait_for(lambda: kairo.json("status")["status"] == "RUNNING")
    time.sleep(1.0)
    assert len(waiters(execution)) == 3  # the new supervisor's own, and no more
    assert kairo.run("stop", "--now", "--wait").returncode in (0, 1)


def test_a_tmux_server_killed_under_a_live_supervisor_is_opened_again_and_it_goes_on(
    kairo: Kairo, repo: Path
) -> None:
    # Its agents die with their panes: the idempotent one runs again in a new session,
    # the other stops saying why (not "its supervisor stopped": it did not), and what had
    # not started starts there.
    plan = kairo.write_plan(
        "version: 1\nname: tmux-gone\nmax_parallel: 2\n"
        "agent: {kind: shell, run: 'sleep 3; echo x > $KAIRO_SUBTASK_ID'}\n"
        "subtasks:\n  - id: again\n    agent: {idempotent: true}\n  - id: once\n  - id: later\n"
    )
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    wait_for(lambda: sum(v["state"] == "running" for v in kairo.json("status")["subtasks"]) == 2)
    time.sleep(0.5)
    kairo.tmux("kill-server")

    wait_for(lambda: kairo.json("status")["status"] != "RUNNING", 60)

    views = {v["id"]: v for v in kairo.json("status")["subtasks"]}
    assert (views["again"]["state"], views["again"]["attempts"]) == ("merged", 2)
    assert views["later"]["state"] == "merged", views["later"]
    assert views["once"]["state"] == "stopped", views["once"]
    assert "when its tmux pane went away (the tmux server killed" in views["once"]["reason"]
    assert kairo.tmux_sessions() == [kairo.json("status")["tmux_session"]]  # opened again


HELD = """\
version: 1
name: held
agent: {{kind: shell, run: "while [ ! -e {release} ]; do sleep 0.05; done; echo x > x.txt"}}
subtasks:
  - id: held
"""


def test_the_band_without_a_supervisor_starts_at_the_killed_one_s_last_heartbeat(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    """Its heartbeats go on after its last event; the resume's claim writes over the last
    of them, so the resumed supervisor_started keeps it, and the report's band starts there."""
    seed(repo)
    release = tmp_path / "gate" / "open"
    release.parent.mkdir()
    plan = kairo.write_plan(HELD.format(release=release) + shared_with_agents(release.parent))
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    execution_id = kairo.json("status")["execution_id"]
    database = Path(git(repo, "rev-parse", "--absolute-git-dir").strip()) / "kairo" / "kairo.db"

    def beat_after_the_last_event() -> bool:
        with SqliteStore(database) as store:
            _, logged = read_logged(store, execution_id)
            row = store.get_execution(execution_id)
        assert row is not None
        running = any(isinstance(item.event, ev.AttemptPaneOpened) for item in logged)
        return running and unix_time(row.updated_at) > logged[-1].at + 1.0

    wait_for(beat_after_the_last_event, 30)
    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGKILL)
    wait_for(lambda: kairo.json("status")["status"] == "PAUSED")
    with SqliteStore(database) as store:
        _, before = read_logged(store, execution_id)
        row = store.get_execution(execution_id)
    assert row is not None
    heartbeat = unix_time(row.updated_at)
    time.sleep(1.0)
    page = kairo.run("report", "--html").stdout  # paused: since its last heartbeat
    said = datetime.fromtimestamp(heartbeat, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert f"No supervisor since {said}" in page
    release.touch()
    assert kairo.run("resume", "--wait").returncode == 0

    with SqliteStore(database) as store:
        state, logged = read_logged(store, execution_id)
    resumed = next(
        item
        for item in logged
        if isinstance(item.event, ev.SupervisorStarted) and item.event.resumed
    )
    assert isinstance(resumed.event, ev.SupervisorStarted)
    assert resumed.event.previous_heartbeat_at == heartbeat > before[-1].at + 1.0
    (gap,) = build_timeline(state.plan, logged).gaps
    assert (gap.start, gap.end) == (heartbeat, resumed.at)


ONE = """\
version: 1
name: one
agent: {kind: shell, run: "echo a > a.txt"}
subtasks:
  - id: a
"""


def test_a_merge_its_dead_supervisor_wrote_and_did_not_log_is_taken_on_resume(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    """A merge step writes its merges, then logs them: a supervisor killed in between
    leaves a merge the log does not know. The resumed one's guard takes it for what it
    is, and the merge step finds and logs it: no breach, the run completes."""
    seed(repo)
    template = tmp_path / "template"
    shutil.copytree(repo, template)
    assert kairo.run("start", str(kairo.write_plan(ONE, "one.yaml")), "--wait").returncode == 0
    events = [json.loads(line) for line in kairo.run("events", "--json").stdout.splitlines()]
    merged_at = next(e["seq"] for e in events if e["event_type"] == "subtask_merged")

    root = tmp_path / "crashed"
    shutil.copytree(template, root / "project")
    runner = clone_kairo(kairo, root / "project", "crashed")
    (root / "one.yaml").write_text(ONE)
    try:
        start_crashing_after(runner, root / "one.yaml", merged_at - 1)
        status = runner.json("status")
        view = status["subtasks"][0]
        assert view["state"] == "succeeded", status  # accepted; its merge not written yet
        # What the dead supervisor's merge step wrote next, and did not live to log.
        head, source = status["integration_head"], view["head_commit"]
        tree = git(runner.repo, "merge-tree", "--write-tree", head, source).split()[0]
        merge = git(
            runner.repo, "commit-tree", tree, "-p", head, "-p", source, "-m", "kairo: merge a"
        ).strip()
        git(runner.repo, "update-ref", f"refs/heads/{status['integration_branch']}", merge, head)

        resumed = runner.run("resume", "--wait")

        assert resumed.returncode == 0, resumed.stderr + supervisor_logs(runner.repo)
        after = runner.json("status")
        assert after["status"] == "COMPLETED" and after["integration_head"] == merge, after
    finally:
        runner.tmux("kill-server")
