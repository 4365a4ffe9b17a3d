"""A store that goes away under a running execution: a PostgreSQL server stopped for a
few seconds (a server of the test's own: the machine's is left alone), and a SQLite
store deleted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git, shared_with_agents, snapshot_checkout
from tests.e2e.test_recovery import wait_for
from tests.faults.private_postgres import PrivateCluster, private_postgres

pytestmark = pytest.mark.slow

SUBTASKS = 8
PLAN = """\
version: 1
name: outage
max_parallel: 4
agent:
  kind: shell
  run: echo $KAIRO_SUBTASK_ID >> {runs}; sleep 1; echo $KAIRO_SUBTASK_ID > $KAIRO_SUBTASK_ID.txt
subtasks:
""" + "".join(f"  - id: s{n}\n" for n in range(SUBTASKS))


def outage_plan(runs: Path, template: str = PLAN) -> str:
    runs.touch()
    return template.format(runs=runs) + shared_with_agents(runs)


@pytest.fixture
def cluster() -> Iterator[PrivateCluster]:
    with private_postgres() as running:
        yield running


def test_a_postgresql_outage_of_seconds_is_ridden_out_by_the_supervisor_and_start_wait(
    kairo: Kairo, cluster: PrivateCluster, tmp_path: Path
) -> None:
    on_pg = Kairo(
        repo=kairo.repo, env=dict(kairo.env, KAIRO_STORE=cluster.url), socket=kairo.socket
    )
    runs = tmp_path / "runs"
    plan = on_pg.write_plan(outage_plan(runs))
    waiting = on_pg.spawn("start", str(plan), "--wait")
    wait_for(lambda: runs.exists() and len(runs.read_text().split()) >= 2, 60)

    cluster.stop("fast")  # every session ended, as a restart does
    time.sleep(4)
    cluster.start()

    _, err = waiting.communicate(timeout=180)
    assert waiting.returncode == 0, err
    assert "waiting for it to answer again" in err and "the store answers again" in err
    status = on_pg.json("status")
    assert status["status"] == "COMPLETED"
    assert sorted(runs.read_text().split()) == sorted(f"s{n}" for n in range(SUBTASKS))
    assert on_pg.run("verify").returncode == 0
    events = on_pg.run("events", "--json").stdout.splitlines()
    assert sum('"supervisor_started"' in e for e in events) == 1  # never died, never resumed
    log = next((kairo.repo / ".git" / "kairo" / "runs").glob("*/supervisor.log")).read_text()
    # An append or a lease renewal met the outage, whichever came first.
    assert "store_unreachable" in log or "lease_renewal_failed" in log
    assert "Traceback" not in log
    tree = git(kairo.repo, "ls-tree", "--name-only", status["integration_branch"]).split()
    assert {f"s{n}.txt" for n in range(SUBTASKS)} <= set(tree)


def test_a_store_deleted_mid_run_stops_the_run_saying_so_and_clean_finds_what_it_left(
    kairo: Kairo, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    slow = PLAN.replace("sleep 1", "sleep 3").replace("max_parallel: 4", "max_parallel: 2")
    plan = kairo.write_plan(outage_plan(runs, slow))
    before = snapshot_checkout(kairo.repo)
    waiting = kairo.spawn("start", str(plan), "--wait")
    wait_for(lambda: runs.exists() and len(runs.read_text().split()) >= 2, 60)
    execution_id = kairo.json("status")["execution_id"]
    short = execution_id[-6:].lower()
    for stored in (kairo.repo / ".git" / "kairo").glob("kairo.db*"):
        stored.unlink()

    _, err = waiting.communicate(timeout=60)  # the first agent to end writes: found then
    assert waiting.returncode == 5, err
    assert "was deleted while in use" in err and f"`kairo-orch clean {short}`" in err
    log_file = kairo.repo / ".git" / "kairo" / "runs" / execution_id / "supervisor.log"
    wait_for(lambda: "supervisor_stopped" in log_file.read_text(), 30)
    log = log_file.read_text()
    assert "was deleted while in use: the log of execution" in log
    assert f"`kairo-orch clean {short}`" in log and "Traceback" not in log
    assert len(runs.read_text().split()) <= 4  # nothing more started once it was gone

    told = kairo.run("status", short)
    assert told.returncode == 2 and f"no log of execution {short}, but it left" in told.stderr
    listed = kairo.run("list")
    assert f"execution {short} left subtask branches here" in listed.stdout, listed.stderr
    cleaned = kairo.run("clean", short)
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"killed tmux session kairo-outage-{short}" in cleaned.stdout
    # The agents it ran were cut short with their work uncommitted: nothing is lost unasked.
    assert "has uncommitted changes (--force removes)" in cleaned.stdout, cleaned.stdout
    # Nothing was merged into it before the store went: its head is the user's base.
    assert f"deleted the integration branch kairo/outage/{short}" in cleaned.stdout
    forced = kairo.run("clean", "--force", short)
    assert forced.returncode == 0, forced.stderr
    assert "deleted branch kairo-subtasks/outage/" in forced.stdout
    assert git(kairo.repo, "branch", "--list", f"kairo-subtasks/*/{short}/*") == ""
    worktrees = git(kairo.repo, "worktree", "list", "--porcelain")
    assert f"/{short}/" not in worktrees
    assert f"execution {short}" not in kairo.run("list").stdout
    assert kairo.run("clean", "zzzzzz").returncode == 2  # names nothing: as before
    assert snapshot_checkout(kairo.repo) == before


def test_clean_of_an_id_this_repository_holds_nothing_of_leaves_another_s_run_alone(
    kairo: Kairo, tmp_path: Path
) -> None:
    # Both repositories' executions share the user's tmux server, each its own store.
    runs = tmp_path / "runs"
    plan = kairo.write_plan(outage_plan(runs, PLAN.replace("sleep 1", "sleep 30")))
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    status = kairo.json("status")
    short = status["execution_id"][-6:].lower()
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    git(
        other,
        "-c",
        "user.name=A",
        "-c",
        "user.email=a@b",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
    )
    elsewhere = Kairo(repo=other, env=kairo.env, socket=kairo.socket)

    refused = elsewhere.run("clean", short)

    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert kairo.tmux("has-session", "-t", f"={status['tmux_session']}").returncode == 0
    assert elsewhere.run("clean", status["execution_id"][:10]).returncode == 2  # a prefix
    assert kairo.run("stop", "--now", "--wait").returncode in (0, 1)
