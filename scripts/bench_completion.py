#!/usr/bin/env python3
"""`make bench-completion`: the completion gates against agents that misbehave as real ones
do, and against a plain launcher without them.

Each scenario of tests/completion/scenarios.py (gives up at once, stops at max_tokens,
reads for ever, breaks a test, says done with half the work, spirals, repeats its edit,
meets 429s and 529s, hangs) is a subtask of one plan, run by the real `kairo-orch start
--wait` through the real Claude Code (Codex for some) against the scripted model server,
on a generated project with a real test suite. The same scenarios run at once as a second
execution with the gates off (`max_attempts: 1`, `allow_empty: true`, no `verify`): the
baseline, what a plain worktree launcher gives. What merged is checked by a hidden
reference test.

Output: a table on stdout and `bench-completion.json` (`--out`): a `runs` list (name,
expected and actual outcome and reason, attempts, tokens, token budget, wall time,
whether the merged result is correct; `baseline: true` on the baseline's) and a `summary`
of each side. The exit status is 0 when every run with the gates on ended as its scenario
expects (outcome, reason, attempts; a budget overrun of at most a tenth; a hang ended
within 10 s of its timeout, nothing left running), else 1. `--quick` runs a subset.

Everything runs in a lab directory made in $TMPDIR (or `--workdir`): its repositories,
the agents' empty HOMEs; each side has a tmux server of its own (`tmux -L
kairo-completion-...`, its socket in /tmp), ended at the end; the lab is removed unless
`--keep`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `python scripts/bench_completion.py` from a checkout

from tests.completion.runs import Run, run_all  # noqa: E402
from tests.completion.scenarios import chosen  # noqa: E402
from tests.e2e.conftest import Kairo, new_repository  # noqa: E402
from tests.real_agents import CLAUDE, CODEX, missing_reason  # noqa: E402


def kairo_in(lab: Path, side: str) -> Kairo:
    """`kairo-orch` in a new repository of the lab, with a tmux server and a HOME of its own."""
    home = lab / f"home-{side}"
    home.mkdir()
    # A socket's path must be short (a sockaddr holds ~100 bytes): in /tmp, as the tests'.
    tmux_dir = tempfile.mkdtemp(prefix="kairo-tmux-", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAIRO_", "TMUX", "GIT_"))}
    socket = f"kairo-completion-{side}-{uuid.uuid4().hex[:8]}"
    env.update({"KAIRO_TMUX_SOCKET": socket, "TMUX_TMPDIR": tmux_dir, "HOME": str(home)})
    return Kairo(repo=new_repository(lab / side / "project"), env=env, socket=socket)


def run_sides(lab: Path, quick: bool) -> list[Run]:
    """The gates-on execution and the baseline, side by side."""
    scenarios = chosen(quick)
    results: dict[bool, list[Run]] = {}
    failures: list[BaseException] = []
    kairos = {
        baseline: kairo_in(lab, "baseline" if baseline else "gates") for baseline in (False, True)
    }

    def side(baseline: bool) -> None:
        try:
            results[baseline] = run_all(kairos[baseline], scenarios, baseline=baseline)
        except BaseException as error:  # reported below, once both have ended
            failures.append(error)

    threads = [threading.Thread(target=side, args=(b,)) for b in (False, True)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for kairo in kairos.values():
            kairo.tmux("kill-server")
            shutil.rmtree(kairo.env["TMUX_TMPDIR"], ignore_errors=True)
    if failures:
        raise failures[0]
    return results[False] + results[True]


def summary(runs: list[Run]) -> dict[str, Any]:
    merged = [r for r in runs if r.outcome == "merged"]
    right = [r for r in merged if r.correct]
    tokens = sum(r.tokens for r in runs)
    return {
        "runs": len(runs),
        "as_expected": sum(1 for r in runs if not r.problems()),
        "merged": len(merged),
        "correct_merges": len(right),
        "wrong_merges": len(merged) - len(right),
        "correct_share": round(len(right) / len(runs), 3) if runs else 0.0,
        "tokens": tokens,
        "tokens_per_correct_merge": round(tokens / len(right)) if right else None,
        "median_wall_s": round(statistics.median(r.wall_s for r in runs), 1) if runs else 0.0,
    }


def table(runs: list[Run]) -> str:
    head = (
        "| run | behaviour | expected | outcome | attempts | tokens | budget | wall s "
        "| correct | ok |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )

    def said(outcome: str, reason: str) -> str:
        return f"{outcome} ({reason})" if reason else outcome

    rows = []
    for r in runs:
        name = f"{r.name} (baseline)" if r.baseline else r.name
        rows.append(
            f"| {name} | {r.behaviour} | {said(r.expected_outcome, r.expected_reason)} "
            f"| {said(r.outcome, r.reason)} | {r.attempts} | {r.tokens} "
            f"| {r.token_budget or ''} | {r.wall_s} | {'yes' if r.correct else 'no'} "
            f"| {'yes' if not r.problems() else 'NO: ' + '; '.join(r.problems())} |"
        )
    return head + "\n".join(rows)


def totals(gates: dict[str, Any], baseline: dict[str, Any]) -> str:
    lines = ["| | gates on | baseline (gates off) |", "| --- | --- | --- |"]
    for key, label in (
        ("runs", "runs"),
        ("as_expected", "ended as expected"),
        ("correct_merges", "correct merges"),
        ("wrong_merges", "wrong merges"),
        ("correct_share", "share of runs merged correct"),
        ("tokens", "tokens spent"),
        ("tokens_per_correct_merge", "tokens per correct merge"),
        ("median_wall_s", "median wall time of a run (s)"),
    ):
        lines.append(f"| {label} | {gates[key]} | {baseline[key]} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the subset `make test` runs")
    parser.add_argument("--out", type=Path, default=Path("bench-completion.json"))
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--keep", action="store_true", help="leave the lab directory")
    args = parser.parse_args(argv)
    for program in (CLAUDE, CODEX):
        if not program.installed:
            print(missing_reason(program), file=sys.stderr)
            return 2
    lab = Path(tempfile.mkdtemp(prefix="kairo-completion-", dir=args.workdir))
    began = time.monotonic()
    try:
        runs = run_sides(lab, args.quick)
    finally:
        if args.keep:
            print(f"lab kept in {lab}", file=sys.stderr)
        else:
            shutil.rmtree(lab, ignore_errors=True)
    wall = round(time.monotonic() - began, 1)
    gates = summary([r for r in runs if not r.baseline])
    baseline = summary([r for r in runs if r.baseline])
    document = {
        "quick": args.quick,
        "commit": _commit(),
        "wall_s": wall,
        "summary": {"gates": gates, "baseline": baseline},
        "runs": [r.to_json() for r in runs],
    }
    args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(table(runs))
    print()
    print(totals(gates, baseline))
    print(f"\n{len(runs)} runs in {wall} s; {args.out}")
    return 0 if gates["as_expected"] == gates["runs"] else 1


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
