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
