"""The lab of separate hosts on one machine, made and removed in a `with` block: the
tests' session fixture (tests/hosts/conftest.py) and `make bench`'s hosts_3x4_speedup
(scripts/bench_hosts.py) both use it.

A switch, a `hub` host serving a PostgreSQL cluster of its own and a git remote, and the
hosts asked for. Leaving the block stops the services and deletes the namespaces whatever
happened; a run killed before that leaves namespaces that the next lab removes
(`network.sweep_stale`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.faults.private_postgres import _program
from tests.hosts.network import Host, Network, sweep_stale
from tests.hosts.services import GitRemote, HubPostgres


@dataclass
class Lab:
    network: Network
    hub: Host
    postgres: HubPostgres
    remote: GitRemote

    def host(self, name: str) -> Host:
        return self.network.hosts[name]


def _git_daemon_missing() -> bool:
    exec_path = subprocess.run(
        ["git", "--exec-path"], capture_output=True, text=True, timeout=30
    ).stdout.strip()
    return not (Path(exec_path) / "git-daemon").is_file()


def missing() -> str | None:
    """Why the lab cannot be made here, or None."""
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


@contextmanager
def running_lab(root: Path, hosts: Sequence[str]) -> Iterator[Lab]:
    """The lab, its hosts' homes under `root`. `subprocess.CalledProcessError` from
    making the switch means the machine does not allow network namespaces here (a
    container without CAP_SYS_ADMIN)."""
    initdb, pg_ctl = _program("initdb") or "", _program("pg_ctl") or ""
    with ExitStack() as undo:
        network = Network(root)
        undo.callback(network.remove)
        sweep_stale()
        network.start()
        hub = network.add_host("hub")
        for name in hosts:
            network.add_host(name)
        cluster = HubPostgres(hub, network.cidr)
        undo.callback(cluster.stop, pg_ctl)
        cluster.start(initdb, pg_ctl)
        remote = GitRemote(hub)
        undo.callback(remote.stop)
        remote.start()
        yield Lab(network, hub, cluster, remote)
