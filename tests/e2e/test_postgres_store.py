"""The PostgreSQL store end to end: a run, a kill -9 and its resume, a tampered log, and
an execution supervised from another machine, all with `KAIRO_STORE=postgresql://...`."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.store.base import format_timestamp
from tests import postgres
from tests.e2e.conftest import Kairo, command_line, git, live_view
from tests.e2e.test_pipeline import SLEEPER
from tests.e2e.test_recovery import (
    crashy_plan,
    outcome,
    running_agents,
    seed,
    start_then_kill_9,
    wait_for,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def store_url() -> Iterator[str]:
    """A schema of the test's own; its sessions are named after it (pg_stat_activity)."""
    with postgres.fresh_schema() as url:
        yield f"{url}&application_name={url.rpartition('%3D')[2]}"


@pytest.fixture
def on_postgres(kairo: Kairo, store_url: str) -> Kairo:
    return Kairo(repo=kairo.repo, env=dict(kairo.env, KAIRO_STORE=store_url), socket=kairo.socket)


def test_a_run_on_postgresql_ends_as_on_sqlite_and_keeps_no_store_in_the_repository(
    kairo: Kairo, on_postgres: Kairo, repo: Path, tmp_path: Path
) -> None:
    seed(repo)
    on_sqlite = kairo.write_plan(crashy_plan(tmp_path / "sqlite.runs"), "sqlite.yaml")
    assert kairo.run("start", str(on_sqlite), "--wait").returncode == 1
    expected = outcome(kairo)
    for sqlite_file in (repo / ".git" / "kairo").glob("kairo.db*"):
        sqlite_file.unlink()

    plan = on_postgres.write_plan(crashy_plan(tmp_path / "pg.runs"), "pg.yaml")
    done = on_postgres.run("start", str(plan), "--wait")

    assert done.returncode == 1, done.stderr
    assert outcome(on_postgres) == expected  # the same tree, states and conflicts
    assert sorted((tmp_path / "pg.runs").read_text().split()) == ["a", "b", "c", "d"]
    verified = on_postgres.run("verify")
    assert verified.returncode == 0 and "the log verifies" in verified.stdout
    assert not list((repo / ".git" / "kairo").glob("kairo.db*"))
    assert [row["plan"] for row in on_postgres.json("list")] == ["crashy"]


def test_the_store_url_is_on_no_command_line_of_the_live_view_nor_the_tmux_server(
    on_postgres: Kairo, store_url: str
) -> None:
    # `ps` shows every user of the machine a command line, and a URL may hold a password.
    # The tmux server keeps the command line of the call that started it: kairo-orch's.
    plan = on_postgres.write_plan(SLEEPER)
    assert on_postgres.run("start", str(plan), "--detach").returncode == 0
    status = on_postgres.json("status")

    view = live_view(on_postgres, status["tmux_session"], "agents run in")

    server = int(on_postgres.tmux("display-message", "-p", "#{pid}").stdout)
    lines = [command_line(pid) for pid in [server, *view]]
    assert "new-session" in lines[0] and [line for line in lines if "postgresql" in line] == []
    runs = on_postgres.repo / ".git" / "kairo" / "runs"
    store_file = runs / status["execution_id"] / "live-view-store"
    assert store_file.read_text() == store_url
    assert store_file.stat().st_mode & 0o777 == 0o600
    assert on_postgres.run("stop", "--now", "--wait").returncode == 0
    assert on_postgres.run("clean", "--force").returncode == 0
    assert not store_file.exists()  # the password does not stay on disk


def test_kill_9_then_resume_goes_on_from_the_postgresql_log(
    on_postgres: Kairo, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    start_then_kill_9(on_postgres, runs)

    resumed = on_postgres.run("resume", "--wait")

    assert resumed.returncode == 0, resumed.stderr
    assert sorted(runs.read_text().split()) == ["left", "right"]  # each agent ran once
    assert all(s["attempts"] == 1 for s in on_postgres.json("status")["subtasks"])


def test_a_tampered_postgresql_log_is_refused_by_verify_and_resume(
    on_postgres: Kairo, store_url: str
) -> None:
    plan = on_postgres.write_plan(
        "version: 1\nname: t\nagent: {kind: shell, run: 'echo x > x.txt'}\nsubtasks:\n  - id: x\n"
    )
    assert on_postgres.run("start", str(plan), "--wait").returncode == 0
    execution_id = on_postgres.json("status")["execution_id"]
    with postgres.connect(store_url) as connection, connection.transaction():
        connection.execute("SET LOCAL session_replication_role = replica")  # no triggers
        connection.execute(
            "UPDATE kairo_execution_events SET payload_json = replace(payload_json, 'x', 'y')"
            " WHERE execution_id = %s AND seq = 5",
            (execution_id,),
        )

    verified = on_postgres.run("verify", execution_id)
    resumed = on_postgres.run("resume", execution_id, "--detach")

    assert verified.returncode == 3 and "seq 5" in verified.stderr
    assert resumed.returncode == 3 and "seq 5" in resumed.stderr


def test_an_execution_supervised_on_another_machine_is_left_to_it_until_its_lease_ends(
    on_postgres: Kairo, store_url: str, tmp_path: Path
) -> None:
    start_then_kill_9(on_postgres, tmp_path / "runs")
    execution_id = on_postgres.json("status")["execution_id"]

    def lease(owner: str, seconds: float) -> None:
        until = format_timestamp(datetime.now(UTC) + timedelta(seconds=seconds))
        with postgres.connect(store_url) as connection:
            connection.execute(
                "UPDATE kairo_executions SET status = 'RUNNING', owner = %s,"
                " lease_expires_at = %s, version = version + 1 WHERE execution_id = %s",
                (owner, until, execution_id),
            )

    # Another machine's supervisor holds it: this host cannot see its pid, only its lease.
    lease("build-box-2:4242", 60)
    assert on_postgres.json("status")["status"] == "RUNNING"
    taken = on_postgres.run("resume", "--detach")
    assert taken.returncode == 4
    assert "supervised by build-box-2:4242" in taken.stderr

    lease("build-box-2:4242", -1)  # it stopped renewing: gone
    assert on_postgres.json("status")["status"] == "PAUSED"
    resumed = on_postgres.run("resume", "--wait")
    assert resumed.returncode == 0, resumed.stderr
    events = on_postgres.run("events", execution_id, "--json").stdout.splitlines()
    starts = [json.loads(e) for e in events if '"supervisor_started"' in e]
    assert [e["payload"]["resumed"] for e in starts] == [False, True]


def test_two_repositories_sharing_one_store_each_see_their_own(
    on_postgres: Kairo, repo: Path, tmp_path: Path
) -> None:
    other_repo = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other_repo))
    other = Kairo(repo=other_repo, env=on_postgres.env, socket=on_postgres.socket)
    plan = "version: 1\nname: {name}\nagent: {{kind: shell, run: 'echo x > x.txt'}}\nsubtasks:\n  - id: x\n"
    assert (
        on_postgres.run(
            "start", str(on_postgres.write_plan(plan.format(name="mine"))), "--wait"
        ).returncode
        == 0
    )
    mine = on_postgres.json("status")["execution_id"]
    assert (
        other.run(
            "start", str(other.write_plan(plan.format(name="theirs"), "theirs.yaml")), "--wait"
        ).returncode
        == 0
    )
    theirs = other.json("status")["execution_id"]

    assert [row["execution_id"] for row in on_postgres.json("list")] == [mine]
    assert [row["execution_id"] for row in other.json("list")] == [theirs]
    assert on_postgres.json("status")["execution_id"] == mine  # its newest, not the store's
    assert on_postgres.json("status", theirs)["plan"] == "theirs"  # looking is allowed anywhere

    for command in (("resume",), ("stop",), ("clean",), ("attach",)):
        refused = on_postgres.run(*command, theirs)
        assert refused.returncode == 2, (command, refused.stderr)
        assert refused.stderr.strip() == (
            f"kairo-orch: execution {theirs} belongs to the repository at"
            f" {other_repo / '.git'} on {socket.gethostname()}; run this there"
        )
    assert other.run("clean", theirs).returncode == 0


def test_a_supervisor_outlives_its_database_session_ended_under_it(
    on_postgres: Kairo, store_url: str
) -> None:
    plan = on_postgres.write_plan(
        "version: 1\nname: cut\nagent: {kind: shell, run: 'sleep 4; echo x > x.txt'}\n"
        "subtasks:\n  - id: x\n"
    )
    assert on_postgres.run("start", str(plan), "--detach").returncode == 0
    wait_for(lambda: running_agents(on_postgres) == 1)
    # As a server restart, a failover or an idle-session reaper would: the sessions of this
    # test's store end (its supervisor's is the only one connected now).
    schema = store_url.rpartition("application_name=")[2]
    with postgres.connect(postgres.BASE_URL) as admin:
        ended = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s",
            (schema,),
        ).fetchone()[0]
    assert ended >= 1

    done = on_postgres.run("stop", "--wait")  # graceful: the agent finishes and is merged

    assert done.returncode == 0, done.stderr
    execution_id = on_postgres.json("status")["execution_id"]
    assert on_postgres.json("status")["subtasks"][0]["state"] == "merged"
    events = on_postgres.run("events", execution_id, "--json").stdout.splitlines()
    assert sum('"supervisor_started"' in e for e in events) == 1  # never crashed, never resumed
