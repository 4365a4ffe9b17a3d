"""The lab itself: hosts that reach the hub's PostgreSQL and git remote over the lab
network only, under host names of their own, and lose them when cut off."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.hosts.conftest import Lab
from tests.hosts.network import PREFIX, ip, namespaces, sweep_stale

pytestmark = pytest.mark.slow

PING_DB = "import psycopg, sys; psycopg.connect(sys.argv[1], connect_timeout=2).close()"
GIT = ["git", "-c", "user.name=lab", "-c", "user.email=lab@example.invalid"]


def test_each_host_has_its_own_name_and_address(lab: Lab) -> None:
    for name in ("host-a", "host-b", "client"):
        host = lab.host(name)
        said = host.run(["sh", "-c", "hostname; ip -4 -o addr show dev eth0"])
        assert said.returncode == 0, said.stderr
        hostname, address_line = said.stdout.splitlines()
        assert hostname == name
        assert f" {host.address}/24 " in address_line
    assert len({lab.host(n).address for n in ("hub", "host-a", "host-b", "client")}) == 4


def test_hosts_reach_the_hubs_postgresql_and_lose_it_when_cut_off(lab: Lab, lab_store: str) -> None:
    host = lab.host("host-a")
    reached = host.run([sys.executable, "-c", PING_DB, lab_store])
    assert reached.returncode == 0, reached.stderr
    host.cut()
    try:
        cut_off = host.run([sys.executable, "-c", PING_DB, lab_store])
        assert cut_off.returncode != 0
        assert "timeout" in cut_off.stderr.lower()
        assert lab.host("host-b").run([sys.executable, "-c", PING_DB, lab_store]).returncode == 0
    finally:
        host.reconnect()
    # Reached again soon (the first try after the cable is back may fail: as on a real
    # network, a client tries again).
    deadline = time.monotonic() + 10
    while (back := host.run([sys.executable, "-c", PING_DB, lab_store])).returncode != 0:
        assert time.monotonic() < deadline, f"{back.stderr}\n{lab.postgres.log_tail()}"
        time.sleep(0.2)


def test_the_machines_own_network_does_not_reach_the_lab(lab: Lab, lab_store: str) -> None:
    import psycopg

    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(lab_store, connect_timeout=1).close()


def test_what_one_host_pushes_to_the_remote_another_fetches(lab: Lab) -> None:
    a, b = lab.host("host-a"), lab.host("host-b")
    url = lab.remote.url()
    assert a.run(["git", "clone", "-q", url, "a-clone"]).returncode == 0
    clone = Path(a.home, "a-clone")
    (clone / "from-a").write_text("pushed by host-a\n")
    assert a.run([*GIT, "-C", str(clone), "add", "from-a"]).returncode == 0
    assert a.run([*GIT, "-C", str(clone), "commit", "-qm", "from a"]).returncode == 0
    pushed = a.run(["git", "-C", str(clone), "push", "-q", "origin", "HEAD:refs/heads/from-a"])
    assert pushed.returncode == 0, pushed.stderr
    assert b.run(["git", "clone", "-q", "-b", "from-a", url, "b-clone"]).returncode == 0
    assert Path(b.home, "b-clone", "from-a").read_text() == "pushed by host-a\n"


def test_a_killed_runs_namespaces_are_swept_and_a_live_ones_kept(lab: Lab) -> None:
    beyond = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process has it
    dead = f"{PREFIX}{beyond}x0a0b0c-switch"
    ip("netns", "add", dead)
    try:
        sweep_stale()
        assert dead not in namespaces()
        assert lab.network.switch in namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", dead], capture_output=True, timeout=30)
