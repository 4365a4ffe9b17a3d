"""What the lab's hub host serves the others: a PostgreSQL cluster of the test's own and a
git remote (git daemon), both on the hub's address of the lab network.

The cluster is made with `initdb` in a directory of its own and runs as the `postgres`
user (PostgreSQL refuses root), on port 5432 of the hub's namespace: the machine's shared
server, on 127.0.0.1:5432 of the machine's own namespace, is another network stack and is
never touched. It trusts the lab's /24, and a unix socket in its directory lets the test
process (outside the lab network) make databases.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from contextlib import suppress
from pathlib import Path

from tests.hosts.network import Host

PORT = 5432
GIT_PORT = 9418
READY_TIMEOUT_S = 30.0


class HubPostgres:
    """A PostgreSQL server on `hub`, listening on its lab address."""

    def __init__(self, hub: Host, cidr: str) -> None:
        self.hub = hub
        self.cidr = cidr
        # In /tmp whatever TMPDIR says: the `postgres` user must reach it (not so under a
        # root-only TMPDIR, pytest's tmp_path), and its socket's path must stay short.
        self.directory = Path(tempfile.mkdtemp(prefix="kairo-test-hosts-postgres-", dir="/tmp"))
        self.data = self.directory / "data"
        self.log = self.directory / "server.log"
        self._databases = 0

    def _as_postgres(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv]

    def start(self, initdb: str, pg_ctl: str) -> None:
        shutil.chown(self.directory, "postgres")
        subprocess.run(
            self._as_postgres(
                [initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {self.cidr} trust\n")
        options = (
            f"-p {PORT} -k {self.directory} -c listen_addresses={self.hub.address} -c fsync=off"
        )
        # Started in the hub's namespace: the server it forks stays there.
        subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                self.hub.netns,
                *self._as_postgres(
                    [
                        pg_ctl,
                        "-D",
                        str(self.data),
                        "-o",
                        options,
                        "-l",
                        str(self.log),
                        "-w",
                        "start",
                    ]
                ),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def stop(self, pg_ctl: str) -> None:
        with suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            subprocess.run(
                self._as_postgres([pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop"]),
                check=True,
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(self.directory, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        """The end of the server's log, for a failing test's message."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError as error:
            return f"(no server log: {error})"
        return "\n".join(text.splitlines()[-lines:])

    def new_database(self) -> str:
        """A new, empty database; its URL as the lab's hosts reach it."""
        import psycopg

        self._databases += 1
        name = f"kairo_{self._databases}"
        local = f"host={self.directory} port={PORT} user=postgres dbname=postgres"
        with psycopg.connect(local, autocommit=True, connect_timeout=10) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        return f"postgresql://postgres@{self.hub.address}:{PORT}/{name}"


class GitRemote:
    """`git daemon` on `hub`, serving (and taking pushes to) the bare repositories under
    its base directory; `remote.git` holds one commit on `main`."""

    def __init__(self, hub: Host) -> None:
        self.hub = hub
        self.base = hub.home / "git"
        self.process: subprocess.Popen[str] | None = None

    def url(self, name: str = "remote.git") -> str:
        return f"git://{self.hub.address}:{GIT_PORT}/{name}"

    def start(self) -> None:
        self.base.mkdir()
        seed = self.hub.home / "seed"
        git = ["git", "-c", "user.name=lab", "-c", "user.email=lab@example.invalid"]
        subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True, timeout=30)
        (seed / "README").write_text("the lab's remote\n")
        subprocess.run([*git, "-C", str(seed), "add", "README"], check=True, timeout=30)
        subprocess.run([*git, "-C", str(seed), "commit", "-qm", "seed"], check=True, timeout=30)
        subprocess.run(
            ["git", "clone", "-q", "--bare", str(seed), str(self.base / "remote.git")],
            check=True,
            timeout=30,
        )
        shutil.rmtree(seed)
        self.process = self.hub.popen(
            [
                "git",
                "daemon",
                "--export-all",
                "--enable=receive-pack",
                "--reuseaddr",
                f"--listen={self.hub.address}",
                f"--port={GIT_PORT}",
                f"--base-path={self.base}",
                str(self.base),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self.hub.run(["git", "ls-remote", self.url()], timeout=30).returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"git daemon on {self.hub.address} did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
