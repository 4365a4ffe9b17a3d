"""`scripts/bench.py --tiny`: every measurement runs at toy sizes and bench.json has its shape.

The figures of a tiny run mean nothing; this only keeps the benchmark from rotting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.runtime.sandbox import bwrap_unavailable
from tests.browser import missing
from tests.hosts.lab import missing as hosts_missing

ROOT = Path(__file__).resolve().parent.parent
NAMES = {
    "fanout_16",
    "fanout_16_cold",
    "checkpoint_us",
    "verify_100k_s",
    "merge_32",
    "resume_32_s",
    "rss_64_mb",
    "status_ms",
    "conflict_map_32",
    "merge_queue_32",
    "merge_queue_32_clean",
    "guard_compare_ms",
} | ({"report_html_1024"} if missing() is None else set())  # it needs chromium
NAMES |= {"hosts_3x4_speedup"} if hosts_missing() is None else set()  # root, initdb
NAMES |= {"fanout_16_sandboxed"} if bwrap_unavailable() is None else set()
WITHOUT_BASELINE = {"resume_32_s", "rss_64_mb", "merge_queue_32_clean", "report_html_1024"}
SANDBOX_MEMORY = {"sandbox_rss_kb", "sandbox_pss_kb", "sandbox_private_kb"}
DETAILS = {
    "fanout_16_sandboxed": {"runners_started_s"} | SANDBOX_MEMORY,
    "report_html_1024": {"page_kb", "render_in_process_s"},
    "merge_queue_32": {"checks", "checks_one_by_one", "same_tree"},
    "merge_queue_32_clean": {"checks", "check_s"},
    "hosts_3x4_speedup": {"hosts_used", "same_tree"},
    "guard_compare_ms": {"record_ms", "changed_ms", "ignored_walk_ms"},
}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def tiny_bench(workdir: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """`bench.py --tiny ARGUMENTS` run in `workdir`, its lab there too, as a user would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAIRO_", "TMUX", "GIT_"))}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench.py"), "--tiny", *arguments],
        cwd=workdir,
        env={**env, "TMPDIR": str(workdir)},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.slow
def test_tiny_bench_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = tiny_bench(tmp_path, "--out", str(out))
    document = json.loads(out.read_text(encoding="utf-8"))

    assert set(document) == NAMES
    for name, figure in document.items():
        details = {"cpu_s", "baseline_cpu_s"} if name.startswith("fanout_16") else set()
        details |= DETAILS.get(name, set())
        keys = {"value", "baseline", "ratio", "unit", "target", "ok"} | details
        assert set(figure) == keys, name
        for key in details:  # a tiny run may stay under one clock tick
            assert _is_number(figure[key]) and figure[key] >= 0, (name, key)
        assert _is_number(figure["value"]) and figure["value"] >= 0, name
        assert isinstance(figure["unit"], str) and figure["unit"], name
        assert isinstance(figure["target"], str) and figure["target"], name
        assert isinstance(figure["ok"], bool), name
        if name in WITHOUT_BASELINE:
            assert figure["baseline"] is None and figure["ratio"] is None, name
        else:
            assert _is_number(figure["baseline"]) and figure["baseline"] > 0, name
            assert _is_number(figure["ratio"]) and figure["ratio"] > 0, name
    if "fanout_16_sandboxed" in NAMES:  # its agents ran under bubblewrap, found running
        assert all(document["fanout_16_sandboxed"][key] > 0 for key in SANDBOX_MEMORY)
    assert "measurement" in done.stdout  # the table
    # Its tmux server and temporary directory are gone with it.
    assert not list(tmp_path.glob("kairo-bench-*"))


@pytest.mark.slow
@pytest.mark.skipif(bwrap_unavailable() is not None, reason="bubblewrap cannot run here")
def test_the_sandboxed_fan_out_alone_is_measured_against_the_local_one(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = tiny_bench(tmp_path, "--only", "fanout_16_sandboxed", "--out", str(out))

    document = json.loads(out.read_text(encoding="utf-8"))
    assert set(document) == {"fanout_16_sandboxed"}
    assert document["fanout_16_sandboxed"]["sandbox_pss_kb"] > 0
    assert "the loop" not in done.stderr  # no shell loop: its baseline is kairo's own


@pytest.mark.slow
def test_keep_leaves_the_lab_and_says_where(tmp_path: Path) -> None:
    done = tiny_bench(tmp_path, "--keep", "--only", "checkpoint_us")
    (lab,) = tmp_path.glob("kairo-bench-*")
    assert any(lab.iterdir())  # the measurement's files, not an empty directory
    assert f"kept {lab}" in done.stderr


@pytest.mark.slow
def test_a_small_bench_scale_writes_its_figures(tmp_path: Path) -> None:
    """scripts/bench_scale.py at toy sizes: its runs end COMPLETED, its figures are there."""
    out = tmp_path / "bench-scale.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAIRO_", "TMUX", "GIT_"))}
    argv = ["--small", "4", "--large", "12", "--kill-at", "4", "--parallel", "2"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_scale.py"), *argv, "--out", str(out)],
        cwd=tmp_path,
        env={**env, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text(encoding="utf-8"))["scale_12"]
    for name in ("ratio", "cpu_ratio", "rss_mb", "status_ms", "resume_first_attempt_s"):
        assert _is_number(figures[name]) and figures[name] > 0, name
    assert [run["subtasks"] for run in figures["runs"]] == [4, 12]
    assert all(
        run["status"] == "COMPLETED" and run["merged"] == run["subtasks"] for run in figures["runs"]
    )
    assert (
        0 <= figures["runs"][1]["mergeable_backlog_max"] <= figures["runs"][1]["backlog_max"] <= 12
    )
    assert not list(tmp_path.glob("kairo-bench-*"))
