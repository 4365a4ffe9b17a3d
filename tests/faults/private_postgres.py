"""A PostgreSQL server of a test's own, to stop and start at will: the machine's shared
server is left alone. Made with `initdb` in the test's directory (about half a second),
listening on 127.0.0.1 at a free port; as root, the server runs as the `postgres` user,
since PostgreSQL refuses to run as root.

Where no `initdb` is found the test is skipped with the reason, or fails where
KAIRO_TEST_REQUIRE_POSTGRES=1 (CI).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from tests import postgres

#: Where Debian puts the server's programs when they are not on PATH.
DEBIAN_BIN = Path("/usr/lib/postgresql")


def _program(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(DEBIAN_BIN.glob(f"*/bin/{name}"), reverse=True)
    return str(versions[0]) if versions else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrivateCluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.data = directory / "data"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._pg_ctl = _program("pg_ctl") or ""
        self._databases = 0

    def _as_owner(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv

    def _ctl(self, *arguments: str) -> None:
        subprocess.run(
            self._as_owner([self._pg_ctl, "-D", str(self.data), *arguments]),
            check=True,
            capture_output=True,
            timeout=60,
        )

    def init(self, initdb: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres")
        subprocess.run(
            self._as_owner(
                [initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._ctl("-o", options, "-l", str(self.directory / "server.log"), "-w", "start")

    def new_database(self) -> str:
        """The URL of a new, empty database of this server."""
        import psycopg

        self._databases += 1
        name = f"kairo_{self._databases}"
        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        return self.url.rpartition("/")[0] + f"/{name}"

    def stop(self, mode: str = "fast") -> None:
        """`fast` ends every session and shuts down cleanly; `immediate` is a crash."""
        self._ctl("-m", mode, "-w", "stop")


class NoServerPrograms(Exception):
    """No `initdb` or `pg_ctl` on this machine."""


@contextmanager
def running_cluster() -> Iterator[PrivateCluster]:
    """A running server of its own, stopped (whatever state it is in) and removed after.

    Its directory is not the caller's: pytest's is readable by root only, and the server
    runs as `postgres`."""
    initdb = _program("initdb")
    if initdb is None or _program("pg_ctl") is None:
        raise NoServerPrograms("no initdb or pg_ctl (PostgreSQL's server programs) here")
    cluster = PrivateCluster(Path(tempfile.mkdtemp(prefix="kairo-test-postgres-")))
    try:
        cluster.init(initdb)
        cluster.start()
        yield cluster
    finally:
        with suppress(subprocess.CalledProcessError):
            cluster.stop("immediate")
        shutil.rmtree(cluster.directory, ignore_errors=True)


@contextmanager
def private_postgres() -> Iterator[PrivateCluster]:
    """`running_cluster`, or the test skipped (failed where CI requires PostgreSQL)."""
    try:
        with running_cluster() as cluster:
            yield cluster
    except NoServerPrograms as missing:
        if postgres.REQUIRED:
            pytest.fail(f"{missing}, and KAIRO_TEST_REQUIRE_POSTGRES=1 requires them")
        pytest.skip(f"{missing}; CI runs these tests")
