"""Reproduction 35.4: the log can be rewritten.

An agent rewrote a past event of its own execution in the store and recomputed the whole
chain with kairo-orch's own `orchestrator.core.canonical`: `verify` passed, and the run
ended COMPLETED. The chain alone cannot tell such a rewrite from the log its supervisor
wrote; the supervisor can, at its next write: the head it finds is not the one it wrote
last. It stops there, appending nothing, and what it wrote (runs/ID/log-hashes) makes
`status`, `verify` and `resume` say so after it.

Under the default settings (bubblewrap) the agent reaches no store: not SQLite's file (the
tmpfs over `.git/kairo`), nor a PostgreSQL server (no network but its model endpoint's).
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.store import open_store
from tests import postgres
from tests.attack.guarded_runs import refused
from tests.attack.sandboxes import Mode
from tests.e2e.conftest import Kairo

pytestmark = pytest.mark.slow

REWRITE = Path(__file__).with_name("rewrite_log.py")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, repo: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{repo / '.git' / 'kairo' / 'kairo.db'}"
        return
    with postgres.fresh_schema() as url:
        yield url


@pytest.fixture
def on_store(kairo: Kairo, store_url: str) -> Kairo:
    """The default store for SQLite (the reproduction's), KAIRO_STORE for PostgreSQL."""
    if store_url.startswith("sqlite"):
        return kairo
    return Kairo(repo=kairo.repo, env=dict(kairo.env, KAIRO_STORE=store_url), socket=kairo.socket)


def plan_rewriting(kairo: Kairo, store_url: str, note: Path, seq: int, mode: Mode) -> Path:
    rewrite = shlex.join([sys.executable, str(REWRITE), store_url, str(seq), str(note)])
    run = f"{rewrite} && echo done > done.txt"
    return kairo.write_plan(
        f"version: 1\nname: rewrite\n{mode.plan}\n"
        f"agent: {{kind: shell, run: {json.dumps(run)}}}\n"
        "subtasks:\n  - id: a\n  - id: b\n    agent: {kind: shell, run: 'echo b > b.txt'}\n"
    )


@pytest.mark.reproduces("35.4")
def test_a_log_rewritten_under_its_supervisor_stops_the_run_at_its_next_write(
    on_store: Kairo,
    store_url: str,
    repo: Path,
    tmp_path: Path,
    mode: Mode,
) -> None:
    note = tmp_path / "rewritten"
    plan = plan_rewriting(on_store, store_url, note, 0, mode)

    started = on_store.run("start", str(plan), "--wait")

    if mode.sandboxed:  # the store out of its reach: b merged, the log its supervisor's
        assert started.returncode == 1, started.stderr
        status = on_store.json("status")
        assert status["status"] == "FAILED"
        refused(status, "a")
        verified = on_store.run("verify")
        assert verified.returncode == 0, verified.stderr
        return

    assert started.returncode == 3, started.stderr
    assert "the event at seq 0 is not the one it wrote" in started.stderr, started.stderr
    status = on_store.json("status")
    said = (Path(status["run_root"]) / "supervisor.log").read_text()
    assert "was changed while its supervisor ran: the event at seq 0 is not the one" in said
    seq, digest = note.read_text().split()
    assert status["status"] == "TAMPERED"
    assert "seq 0" in status["tampered"]
    # Nothing was written on top of the rewritten chain: its head is the agent's.
    assert status["head"] == {"seq": int(seq), "hash": digest}
    # And the rewrite was a good one: the chain alone holds, as `verify` used to say.
    with open_store(store_url, git_common_dir=repo / ".git") as store:
        assert store.verify(status["execution_id"]) == (int(seq), digest)
    verified = on_store.run("verify")
    assert verified.returncode == 3, verified.stdout
    assert "the event at seq 0 is not the one it wrote" in verified.stderr
    resumed = on_store.run("resume", "--wait")
    assert resumed.returncode == 3, resumed.stderr
    assert "seq 0" in resumed.stderr
    # What it left is found by its names, not by a log that may name anything; the work
    # that is not merged stays.
    short = status["execution_id"][-6:].lower()
    cleaned = on_store.run("clean", short)
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"killed tmux session {status['tmux_session']}" in cleaned.stdout
    assert "kept a: worktree" in cleaned.stdout  # its agent's work, never committed
