"""`make bench`'s hosts_3x4_speedup: what workers on three hosts buy over one, for real.

The lab of tests/hosts (network namespaces on this machine: a hub serving a private
PostgreSQL cluster and a git remote, worker hosts, a client host owning the run) runs one
`placement: workers` plan twice, each time on a new remote and database: with a worker of
`slots` slots on each of three hosts, then (the baseline) with one worker of `slots` slots
alone. Its agents sleep as a real agent thinks; `max_parallel` lets three workers' slots
all work. The figure is `start --wait`'s wall time on the client, from a `start` with the
workers already registered until the execution has ended; the two final trees must be
the same, and the three-host run must have used every host.

It needs root and PostgreSQL's server programs (tests/hosts/lab.py says what else):
bench.py skips it with the reason where the lab cannot be made.
"""

from __future__ import annotations

import json
import secrets
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from tests.hosts.lab import Lab, running_lab
from tests.hosts.network import Host
from tests.hosts.placed import clone, host_env, kairo, new_remote, start_worker, tree

WORKER_HOSTS = ("host-a", "host-b", "host-c")
OWNER_HOST = "client"
REGISTER_S = 60.0


@dataclass(frozen=True)
class PlacedRun:
    wall_s: float
    tree: str
    hosts: frozenset[str]


@dataclass(frozen=True)
class Speedup:
    spread: PlacedRun  # three workers
    alone: PlacedRun  # one worker, the baseline


def plan_text(subtasks: int, sleep_s: float, max_parallel: int) -> str:
    agent = f'sleep {sleep_s:g}; echo "$KAIRO_SUBTASK_ID" > "$KAIRO_SUBTASK_ID.txt"'
    lines = [
        "version: 1",
        "name: hosts",
        f"max_parallel: {max_parallel}",
        "placement: workers",
        "review: {push: origin}",
        f"agent: {{kind: shell, run: {json.dumps(agent)}}}",
        "subtasks:",
        *(f"  - id: s{i:02d}" for i in range(subtasks)),
    ]
    return "\n".join(lines) + "\n"


def _wait_registered(owner: Host, repo: Path, store: str, hosts: set[str]) -> None:
    deadline = time.monotonic() + REGISTER_S
    while True:
        done = kairo(owner, repo, "workers", "--json", KAIRO_STORE=store)
        if done.returncode == 0:
            alive = {item["host"] for item in json.loads(done.stdout) if item["alive"]}
            if alive == hosts:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"workers on {sorted(hosts)} did not register: {done.stdout}")
        time.sleep(0.2)


def placed_run(lab: Lab, workers: tuple[str, ...], slots: int, plan: str, tag: str) -> PlacedRun:
    """One execution of `plan` owned by the client, placed on a worker on each host of
    `workers`; every worker and tmux server it started is ended after."""
    store, remote = lab.postgres.new_database(), new_remote(lab)
    owner = lab.host(OWNER_HOST)
    with ExitStack() as undo:
        for name in workers:
            host = lab.host(name)
            log = undo.enter_context((host.home / f"worker-{tag}.log").open("w"))
            _, end = start_worker(host, store, remote, slots=slots, lease_s=5, log=log)
            undo.callback(end)
        repo = clone(owner, remote, f"owner-{tag}")
        (repo / "plan.yaml").write_text(plan)
        _wait_registered(owner, repo, store, set(workers))
        socket = f"kairo-bench-{secrets.token_hex(3)}"
        undo.callback(owner.run, ["tmux", "-L", socket, "kill-server"], env=host_env(owner))
        t0 = time.perf_counter()
        done = kairo(
            owner, repo, "start", "plan.yaml", "--wait", timeout=1800,
            KAIRO_STORE=store, KAIRO_TMUX_SOCKET=socket,
        )  # fmt: skip
        wall_s = time.perf_counter() - t0
        status = kairo(owner, repo, "status", "--json", KAIRO_STORE=store)
        document = json.loads(status.stdout)
        if done.returncode != 0 or document["status"] != "COMPLETED":
            logs = "\n".join(
                (lab.host(name).home / f"worker-{tag}.log").read_text(errors="replace")[-2000:]
                for name in workers
            )
            raise RuntimeError(
                f"the {tag} run ended {document['status']} (exit {done.returncode}):"
                f" {done.stderr}\n{logs}"
            )
        return PlacedRun(
            wall_s,
            tree(owner, repo, document["integration_head"]),
            frozenset(s["host"] for s in document["subtasks"]),
        )


def measure(*, subtasks: int, sleep_s: float, slots: int) -> Speedup:
    """The plan on three workers, then on one, in one lab. Its hosts' homes are in /tmp,
    removed with the lab: each host's tmux socket is in its home, and a unix socket's
    path may not exceed 107 bytes (a TMPDIR such as pytest's is too deep)."""
    plan = plan_text(subtasks, sleep_s, max_parallel=slots * len(WORKER_HOSTS))
    root = Path(tempfile.mkdtemp(prefix="kairo-bench-hosts-", dir="/tmp"))
    with running_lab(root, (*WORKER_HOSTS, OWNER_HOST)) as lab:
        spread = placed_run(lab, WORKER_HOSTS, slots, plan, "spread")
        alone = placed_run(lab, WORKER_HOSTS[:1], slots, plan, "alone")
    if spread.tree != alone.tree:
        raise AssertionError("three workers and one merged different trees")
    if spread.hosts != set(WORKER_HOSTS):
        raise AssertionError(f"the three-host run used only {sorted(spread.hosts)}")
    return Speedup(spread, alone)
