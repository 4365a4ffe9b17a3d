"""Running `placement: workers` plans in the lab: a remote of its own per test, clones,
`kairo-orch` on a host, workers started and stopped. Used by tests/hosts/test_placement.py
and by `make bench`'s hosts_3x4_speedup (scripts/bench_hosts.py)."""

from __future__ import annotations

import secrets
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tests.hosts.lab import Lab
from tests.hosts.network import Host

KAIRO = [sys.executable, "-m", "orchestrator.cli.main"]
GIT = ["git", "-c", "user.name=lab", "-c", "user.email=lab@example.invalid"]


def host_env(host: Host, **extra: str) -> dict[str, str]:
    """`host`'s environment with a tmux directory of its own."""
    tmux = host.home / "tmux"
    tmux.mkdir(exist_ok=True)
    return host.env(TMUX_TMPDIR=str(tmux), **extra)


def kairo(
    host: Host, repo: Path, *args: str, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    return host.run([*KAIRO, *args], cwd=repo, env=host_env(host, **env), timeout=timeout)


def new_remote(lab: Lab) -> str:
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


def clone(host: Host, url: str, name: str) -> Path:
    target = host.home / name
    done = host.run(["git", "clone", "-q", url, str(target)])
    assert done.returncode == 0, done.stderr
    for key, value in (("user.name", "Owner"), ("user.email", "owner@example.invalid")):
        subprocess.run(["git", "-C", str(target), "config", key, value], check=True)
    return target


def tree(host: Host, repo: Path, commit: str) -> str:
    done = host.run(["git", "-C", str(repo), "rev-parse", f"{commit}^{{tree}}"])
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def start_worker(
    host: Host, store: str, remote: str, *, slots: int, lease_s: float, log: IO[str]
) -> tuple[subprocess.Popen[str], Callable[[], None]]:
    """A worker of `remote` on `host`, its output in `log`, and what ends it (whatever
    was done to it or its host: cut off, stopped), with its tmux server."""
    argv = [*KAIRO, "worker", "--slots", str(slots), "--lease", f"{lease_s:g}"]
    argv += ["--remote", remote, "--data-dir", str(host.home / "worker")]
    env = host_env(host, KAIRO_STORE=store)
    process = host.popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)

    def end() -> None:
        host.reconnect()
        process.send_signal(signal.SIGCONT)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        # A worker stopped with agents still running leaves them its server; killed, all
        # of it. Its TMUX_TMPDIR, not the default one: a server missed stays for ever.
        host.run(["tmux", "-L", f"kairo-worker-{host.name}", "kill-server"], env=host_env(host))

    return process, end
