"""The lab: real separate hosts on one machine, for the tests of workers on several hosts.

One lab per test session (about two seconds to make): a switch, a `hub` host serving a
PostgreSQL cluster of its own and a git remote, and hosts `host-a`, `host-b` and `client`.
Each test takes a new database of the cluster (`lab_store`). The finalizers stop the
services and delete the namespaces whatever happened; a run killed before them leaves
namespaces that the next lab removes (`network.sweep_stale`).

It needs root (network namespaces), `ip` and `unshare`, PostgreSQL's server programs and
`git daemon`. Where any is missing the tests are skipped with the reason, or fail where
KAIRO_TEST_REQUIRE_HOSTS=1 (CI), so that a machine lacking them never passes for green.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.faults.private_postgres import _program
from tests.hosts.network import Host, Network, sweep_stale
from tests.hosts.services import GitRemote, HubPostgres

REQUIRED = os.environ.get("KAIRO_TEST_REQUIRE_HOSTS") == "1"
WORKER_HOSTS = ("host-a", "host-b")


@dataclass
class Lab:
    network: Network
    hub: Host
    postgres: HubPostgres
    remote: GitRemote

    def host(self, name: str) -> Host:
        return self.network.hosts[name]


def _unavailable(reason: str) -> None:
    message = f"the lab of separate hosts cannot be made: {reason}"
    if REQUIRED:
        pytest.fail(f"{message}, and KAIRO_TEST_REQUIRE_HOSTS=1 requires it")
    pytest.skip(f"{message}; CI runs these tests (KAIRO_TEST_REQUIRE_HOSTS=1)")


def _git_daemon_missing() -> bool:
    exec_path = subprocess.run(
        ["git", "--exec-path"], capture_output=True, text=True, timeout=30
    ).stdout.strip()
    return not (Path(exec_path) / "git-daemon").is_file()


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "it needs root (network namespaces; `sudo`, or CI)"
    lacking = [name for name in ("ip", "unshare", "runuser", "git") if shutil.which(name) is None]
    lacking += [name for name in ("initdb", "pg_ctl") if _program(name) is None]
    if not lacking and _git_daemon_missing():
        lacking.append("git daemon")
    if lacking:
        return (
            f"{', '.join(lacking)} missing (`make install` installs iproute2; PostgreSQL's"
            " server programs come with Debian's postgresql package, git daemon with git)"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError as error:
        return f"psycopg is not installed: {error}"
    return None


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    missing = _missing()
    if missing:
        _unavailable(missing)
    initdb, pg_ctl = _program("initdb") or "", _program("pg_ctl") or ""
    with ExitStack() as undo:
        network = Network(tmp_path_factory.mktemp("hosts"))
        undo.callback(network.remove)
        try:
            sweep_stale()
            network.start()
        except subprocess.CalledProcessError as error:  # a container without CAP_SYS_ADMIN
            _unavailable(f"`ip {' '.join(error.cmd[1:])}` failed: {error.stderr.strip()}")
        hub = network.add_host("hub")
        for name in (*WORKER_HOSTS, "client"):
            network.add_host(name)
        cluster = HubPostgres(hub, network.cidr)
        undo.callback(cluster.stop, pg_ctl)
        cluster.start(initdb, pg_ctl)
        remote = GitRemote(hub)
        undo.callback(remote.stop)
        remote.start()
        yield Lab(network, hub, cluster, remote)


@pytest.fixture
def lab_store(lab: Lab) -> str:
    """The URL of a new database of the lab's cluster, as its hosts reach it."""
    return lab.postgres.new_database()
