"""`worker` and `workers` on one host: the refusal without PostgreSQL, and a real worker
process that registers, is listed, and deregisters on SIGTERM. (Several hosts, a cut
network and a stopped host: tests/hosts.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.cli.main import run
from tests import postgres

KAIRO = [sys.executable, "-m", "orchestrator.cli.main"]


@pytest.mark.parametrize("command", ["worker", "workers"])
@pytest.mark.parametrize("store", [None, "sqlite:///tmp/kairo-never-made.db"])
def test_workers_need_the_postgresql_store(
    command: str,
    store: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("KAIRO_STORE", raising=False)
    monkeypatch.chdir(tmp_path)  # no repository here: none is needed to be refused
    argv = [command, *(["--store", store] if store else [])]
    assert run(argv) == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1
    assert said.startswith("kairo-orch: workers need the PostgreSQL store")
    assert not Path("/tmp/kairo-never-made.db").exists()


def _workers(env: dict[str, str]) -> list[dict[str, object]]:
    done = subprocess.run(
        [*KAIRO, "workers", "--json"], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    listed: list[dict[str, object]] = json.loads(done.stdout)
    return listed


@pytest.mark.slow
def test_a_worker_registers_is_listed_and_leaves_on_sigterm(tmp_path: Path) -> None:
    with postgres.fresh_schema() as url:
        env = {**os.environ, "KAIRO_STORE": url}
        worker = subprocess.Popen(
            [*KAIRO, "worker", "--slots", "4", "--lease", "2"],
            env=env,
            cwd=tmp_path,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert worker.stderr is not None
            registered = worker.stderr.readline()
            assert " registered on " in registered and "4 slots" in registered, registered
            (listed,) = _workers(env)
            assert listed["pid"] == worker.pid
            assert (listed["slots"], listed["running"], listed["alive"]) == (4, 0, True)
            time.sleep(1.0)  # heartbeats every 1/3 s: the heartbeat moved on
            (later,) = _workers(env)
            assert str(later["last_heartbeat"]) > str(listed["last_heartbeat"])
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=10) == 0
            assert "deregistered on SIGTERM" in worker.stderr.read()
            assert _workers(env) == []
        finally:
            worker.kill()
            worker.wait()
            worker.stderr.close()
