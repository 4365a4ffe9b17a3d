"""One plan run by workers on two hosts (`placement: workers`): the owner on `client`
assigns subtasks to the workers of `host-a` and `host-b`, which run them in clones of the
hub's git remote and hand their events back through the hub's PostgreSQL; the owner
merges. The result is the tree a one-machine run of the same plan makes."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.hosts.conftest import WORKER_HOSTS, Lab
from tests.hosts.network import Host

pytestmark = pytest.mark.slow

KAIRO = [sys.executable, "-m", "orchestrator.cli.main"]
GIT = ["git", "-c", "user.name=lab", "-c", "user.email=lab@example.invalid"]
SUBTASKS = 10


def plan_text(name: str, *, placed: bool) -> str:
    """Ten subtasks of shell agents, each writing files of its own; the last two build
    on the ones before them (they start from an integration head the owner pushed)."""
    lines = [
        "version: 1",
        f"name: {name}",
        "max_parallel: 6",
        'agent: {kind: shell, run: \'echo "$KAIRO_SUBTASK_ID" > "$KAIRO_SUBTASK_ID.txt"; sleep 1\'}',
    ]
    if placed:
        lines += ["placement: workers", "review: {push: origin}"]
    lines.append("subtasks:")
    for i in range(1, SUBTASKS - 1):
        lines.append(f"  - id: s{i}")
    lines.append("  - id: sum")
    lines.append("    depends_on: [s1, s2, s3]")
    lines.append("    agent: {run: 'cat s1.txt s2.txt s3.txt > sum.txt'}")
    lines.append("  - id: last")
    lines.append("    depends_on: [sum]")
    lines.append("    agent: {run: 'wc -l < sum.txt > last.txt'}")
    return "\n".join(lines) + "\n"


def _env(host: Host, **extra: str) -> dict[str, str]:
    tmux = host.home / "tmux"
    tmux.mkdir(exist_ok=True)
    return host.env(TMUX_TMPDIR=str(tmux), **extra)


def _kairo(host: Host, repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return host.run([*KAIRO, *args], cwd=repo, env=_env(host, **env), timeout=300)


def _new_remote(lab: Lab) -> str:
    """A bare repository of its own on the hub, seeded with a small project."""
    name = f"project-{secrets.token_hex(3)}.git"
    seed = lab.hub.home / f"seed-{name}"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True, timeout=30)
    (seed / "README").write_text("a project\n")
    subprocess.run([*GIT, "-C", str(seed), "add", "README"], check=True, timeout=30)
    subprocess.run([*GIT, "-C", str(seed), "commit", "-qm", "seed"], check=True, timeout=30)
    bare = lab.remote.base / name
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(bare)], check=True, timeout=30)
    subprocess.run(["git", "-C", str(bare), "config", "daemon.receivepack", "true"], check=True)
    return lab.remote.url(name)


def _clone(host: Host, url: str, name: str) -> Path:
    target = host.home / name
    done = host.run(["git", "clone", "-q", url, str(target)])
    assert done.returncode == 0, done.stderr
    for key, value in (("user.name", "Owner"), ("user.email", "owner@example.invalid")):
        subprocess.run(["git", "-C", str(target), "config", key, value], check=True)
    return target


@pytest.fixture
def remote(lab: Lab) -> str:
    return _new_remote(lab)


@pytest.fixture
def placed_workers(lab: Lab, lab_store: str, remote: str) -> Iterator[dict[str, Any]]:
    """A worker of `remote` on each worker host; stopped, and its tmux server killed,
    after the test."""
    with ExitStack() as undo:
        started = {}
        for name in WORKER_HOSTS:
            host = lab.host(name)
            env = _env(host, KAIRO_STORE=lab_store)
            argv = [*KAIRO, "worker", "--slots", "3", "--lease", "5", "--remote", remote]
            argv += ["--data-dir", str(host.home / "worker")]
            log = (host.home / "worker.log").open("w")
            process = host.popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
            started[name] = process

            def end(process: subprocess.Popen[str] = process, host: Host = host) -> None:
                host.reconnect()
                process.send_signal(signal.SIGCONT)
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                host.run(["tmux", "-L", f"kairo-worker-{host.name}", "kill-server"])

            undo.callback(end)
            undo.callback(log.close)
        yield started


def _tree(host: Host, repo: Path, commit: str) -> str:
    done = host.run(["git", "-C", str(repo), "rev-parse", f"{commit}^{{tree}}"])
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _worker_logs(lab: Lab) -> str:
    return "\n".join(
        f"--- {name}:\n" + (lab.host(name).home / "worker.log").read_text(errors="replace")[-3000:]
        for name in WORKER_HOSTS
    )


def test_a_plan_placed_on_two_workers_merges_the_tree_of_a_one_machine_run(
    lab: Lab, lab_store: str, remote: str, placed_workers: dict[str, Any]
) -> None:
    client = lab.host("client")
    owner = _clone(client, remote, "owner")
    (owner / "plan.yaml").write_text(plan_text("spread", placed=True))
    socket = f"kairo-owner-{secrets.token_hex(3)}"
    try:
        done = _kairo(
            client, owner, "start", "plan.yaml", "--wait",
            KAIRO_STORE=lab_store, KAIRO_TMUX_SOCKET=socket,
        )  # fmt: skip
        status = _kairo(client, owner, "status", "--json", KAIRO_STORE=lab_store)
    finally:
        client.run(["tmux", "-L", socket, "kill-server"], env=_env(client))
    document = json.loads(status.stdout)
    reasons = {s["id"]: s["reason"] for s in document["subtasks"] if s["reason"]}
    assert done.returncode == 0, f"{done.stderr}{reasons}\n{_worker_logs(lab)}"
    subtasks = document["subtasks"]
    assert {s["id"]: s["state"] for s in subtasks} == {s["id"]: "merged" for s in subtasks}
    hosts = {s["id"]: s["host"] for s in subtasks}
    assert set(hosts.values()) == set(WORKER_HOSTS), hosts  # each ran some, nothing ran here

    # The same plan on one machine, in a scratch clone with its own SQLite store.
    alone = _clone(client, remote, "alone")
    (alone / "plan.yaml").write_text(plan_text("spread", placed=False))
    socket = f"kairo-alone-{secrets.token_hex(3)}"
    try:
        local = _kairo(client, alone, "start", "plan.yaml", "--wait", KAIRO_TMUX_SOCKET=socket)
        local_status = _kairo(client, alone, "status", "--json")
    finally:
        client.run(["tmux", "-L", socket, "kill-server"], env=_env(client))
    assert local.returncode == 0, local.stderr
    local_document = json.loads(local_status.stdout)
    assert all("host" not in s for s in local_document["subtasks"])  # as it always was
    placed_tree = _tree(client, owner, document["integration_head"])
    assert placed_tree == _tree(client, alone, local_document["integration_head"])

    # The integration branch the owner pushed is the one it merged.
    pushed = client.run(["git", "ls-remote", remote, document["integration_branch"]])
    assert pushed.stdout.split()[:1] == [document["integration_head"]]


def test_a_placed_plan_without_a_shared_store_or_remote_is_refused(lab: Lab, remote: str) -> None:
    client = lab.host("client")
    owner = _clone(client, remote, f"refused-{secrets.token_hex(2)}")
    (owner / "plan.yaml").write_text(plan_text("alone", placed=True))
    refused = _kairo(client, owner, "start", "plan.yaml")  # the SQLite store of one machine
    assert refused.returncode == 2
    assert "placement: workers needs the PostgreSQL store" in refused.stderr
    assert not (owner / ".git" / "kairo").exists()  # nothing created


def _status(client: Host, repo: Path, store: str) -> dict[str, Any]:
    done = _kairo(client, repo, "status", "--json", KAIRO_STORE=store)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _events(client: Host, repo: Path, store: str, execution_id: str) -> list[str]:
    done = _kairo(client, repo, "events", execution_id, "--json", KAIRO_STORE=store)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.strip()]


def test_a_worker_cut_off_mid_run_loses_its_subtasks_to_the_other_and_lands_nothing_after(
    lab: Lab, lab_store: str, remote: str, placed_workers: dict[str, Any]
) -> None:
    client, a = lab.host("client"), lab.host("host-a")
    owner = _clone(client, remote, "owner-cut")
    subtasks = [f"t{i}" for i in range(1, 7)]
    (owner / "plan.yaml").write_text(
        "version: 1\nname: cut\nmax_parallel: 6\nplacement: workers\nreview: {push: origin}\n"
        "agent: {kind: shell, idempotent: true,"
        ' run: \'sleep 6; echo "$KAIRO_SUBTASK_ID" > "$KAIRO_SUBTASK_ID.txt"\'}\n'
        "subtasks:\n" + "".join(f"  - id: {sid}\n" for sid in subtasks)
    )
    socket = f"kairo-cut-{secrets.token_hex(3)}"
    try:
        started = _kairo(
            client, owner, "start", "plan.yaml", KAIRO_STORE=lab_store, KAIRO_TMUX_SOCKET=socket
        )
        assert started.returncode == 0, started.stderr
        deadline = time.monotonic() + 60
        while True:  # until host-a runs agents
            document = _status(client, owner, lab_store)
            on_a = [
                s["id"] for s in document["subtasks"]
                if s["host"] == "host-a" and s["state"] == "running" and s["attempts"] == 1
            ]  # fmt: skip
            if on_a:
                break
            assert time.monotonic() < deadline, f"{document}\n{_worker_logs(lab)}"
            time.sleep(0.3)
        a.cut()
        placed_workers["host-a"].send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 120
        while (document := _status(client, owner, lab_store))["status"] == "RUNNING":
            assert time.monotonic() < deadline, f"{document}\n{_worker_logs(lab)}"
            time.sleep(0.5)
        ended = _events(client, owner, lab_store, document["execution_id"])

        # host-a back: its worker wakes to the agents it was waiting for, whose ends it
        # reports; none of it lands.
        a.reconnect()
        placed_workers["host-a"].send_signal(signal.SIGCONT)
        time.sleep(8)
        assert _events(client, owner, lab_store, document["execution_id"]) == ended
    finally:
        client.run(["tmux", "-L", socket, "kill-server"], env=_env(client))
    assert document["status"] == "COMPLETED", f"{document}\n{_worker_logs(lab)}"
    hosts = {s["id"]: s["host"] for s in document["subtasks"]}
    for sid in on_a:  # interrupted there, and run again on host-b
        assert hosts[sid] == "host-b", hosts
        assert next(s for s in document["subtasks"] if s["id"] == sid)["attempts"] == 2
    interrupted = [json.loads(line) for line in ended if '"attempt_interrupted"' in line]
    assert sorted(e["payload"]["subtask_id"] for e in interrupted) == sorted(on_a), interrupted
    assert {e["payload"]["cause"] for e in interrupted} == {"worker"}
    tree = client.run(
        ["git", "-C", str(owner), "ls-tree", "--name-only", document["integration_head"]]
    )
    assert set(tree.stdout.split()) == {"README", *(f"{sid}.txt" for sid in subtasks)}
    pushed = client.run(["git", "ls-remote", remote, document["integration_branch"]])
    assert pushed.stdout.split()[:1] == [document["integration_head"]]  # not moved by host-a
