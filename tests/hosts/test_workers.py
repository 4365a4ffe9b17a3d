"""Workers on separate hosts sharing the hub's PostgreSQL store: listed from a third host,
lapsed when cut off, alive again when back, gone when stopped."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from tests.hosts.conftest import WORKER_HOSTS, Lab
from tests.hosts.network import Host

pytestmark = pytest.mark.slow

KAIRO = [sys.executable, "-m", "orchestrator.cli.main"]
LEASE_S = 3.0  # heartbeats every half second
WAIT_S = 30.0


def _worker(host: Host, store: str) -> subprocess.Popen[str]:
    return host.popen(
        [*KAIRO, "worker", "--slots", "4", "--lease", str(LEASE_S)],
        env=host.env(KAIRO_STORE=store),
        stderr=subprocess.PIPE,
    )


def _listed(client: Host, store: str) -> dict[str, dict[str, Any]]:
    """`workers --json` as the client host sees it, by host."""
    done = client.run([*KAIRO, "workers", "--json"], env=client.env(KAIRO_STORE=store))
    assert done.returncode == 0, done.stderr
    return {item["host"]: item for item in json.loads(done.stdout)}


def _until(
    client: Host, store: str, holds: Callable[[dict[str, dict[str, Any]]], bool]
) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + WAIT_S
    while True:
        listed = _listed(client, store)
        if holds(listed):
            return listed
        assert time.monotonic() < deadline, f"still {listed}"
        time.sleep(0.2)


@pytest.fixture
def workers(lab: Lab, lab_store: str) -> Iterator[dict[str, subprocess.Popen[str]]]:
    """A worker on each worker host, killed after the test whatever it did to them."""
    with ExitStack() as undo:
        started = {}
        for name in WORKER_HOSTS:
            host = lab.host(name)
            process = _worker(host, lab_store)
            started[name] = process

            def end(process: subprocess.Popen[str] = process, host: Host = host) -> None:
                host.reconnect()
                process.send_signal(signal.SIGCONT)
                process.kill()
                process.wait()
                if process.stderr is not None:
                    process.stderr.close()

            undo.callback(end)
        yield started


def test_workers_on_two_hosts_lapse_when_cut_off_and_are_back_after(
    lab: Lab, lab_store: str, workers: dict[str, subprocess.Popen[str]]
) -> None:
    client, a = lab.host("client"), lab.host("host-a")
    listed = _until(client, lab_store, lambda seen: set(seen) == set(WORKER_HOSTS))
    for name, item in listed.items():
        # The address is the one the store saw it connect from: over the lab network.
        assert item["address"] == lab.host(name).address
        assert item["pid"] == workers[name].pid
        assert (item["slots"], item["running"], item["alive"]) == (4, 0, True)
    registered = {name: item["worker_id"] for name, item in listed.items()}

    # host-a cut off: its cable pulled, its worker stopped.
    a.cut()
    workers["host-a"].send_signal(signal.SIGSTOP)
    cut_at = time.monotonic()
    listed = _until(client, lab_store, lambda seen: not seen["host-a"]["alive"])
    assert time.monotonic() - cut_at >= LEASE_S - 1.0  # lapsed by its lease, not before
    assert listed["host-a"]["heartbeat_age_s"] >= LEASE_S
    assert listed["host-b"]["alive"]

    # Back: the cable first, so that its first heartbeat finds the network.
    a.reconnect()
    workers["host-a"].send_signal(signal.SIGCONT)
    listed = _until(client, lab_store, lambda seen: seen["host-a"]["alive"])
    assert listed["host-a"]["lapses"] == 1  # it knows it was away
    assert {n: item["worker_id"] for n, item in listed.items()} == registered
    assert listed["host-b"]["lapses"] == 0

    # host-b stopped: it deregisters and leaves the list; host-a stays.
    workers["host-b"].send_signal(signal.SIGTERM)
    assert workers["host-b"].wait(timeout=WAIT_S) == 0
    assert workers["host-b"].stderr is not None
    said = workers["host-b"].stderr.read()
    assert "registered on host-b" in said and "deregistered on SIGTERM" in said
    listed = _listed(client, lab_store)
    assert set(listed) == {"host-a"} and listed["host-a"]["alive"]
