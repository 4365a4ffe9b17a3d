"""`scripts/bench_completion.py --quick`, as `make test` runs it: every scenario with the
gates on ends as it is expected to (its outcome, reason and attempts; a budget crossed by
at most a tenth; a hang ended within 10 s of its timeout, nothing left running), and the
gates merge more correct results than the baseline without them, none wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.completion.runs import Run
from tests.real_agents import CLAUDE, CODEX, installed

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_the_quick_bench_ends_every_misbehaving_agent_as_expected(tmp_path: Path) -> None:
    installed(CLAUDE)
    installed(CODEX)
    out = tmp_path / "bench-completion.json"
    script = str(ROOT / "scripts" / "bench_completion.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAIRO_", "TMUX", "GIT_"))}
    done = subprocess.run(
        [sys.executable, script, "--quick", "--workdir", str(tmp_path), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert out.exists(), done.stderr
    document = json.loads(out.read_text(encoding="utf-8"))
    runs = [Run(**{"baseline": False, **fields}) for fields in document["runs"]]
    gates = [r for r in runs if not r.baseline]
    baseline = [r for r in runs if r.baseline]
    assert {r.name for r in gates} == {r.name for r in baseline} and len(gates) >= 8
    assert {r.name: r.problems() for r in gates} == {r.name: [] for r in gates}, (
        done.stdout + done.stderr
    )
    assert done.returncode == 0, done.stderr
    # what the gates buy: every merge correct, where the baseline merges wrong results
    assert all(r.correct for r in gates if r.outcome == "merged")
    assert sum(r.correct for r in gates) > sum(r.correct for r in baseline)
    assert any(r.outcome == "merged" and not r.correct for r in baseline)
    summary = document["summary"]
    assert summary["gates"]["wrong_merges"] == 0
    assert summary["gates"]["correct_merges"] == sum(r.correct for r in gates)
