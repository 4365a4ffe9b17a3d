"""`make bench`'s merge_queue_32: what checking merges in batches saves, for real.

32 shell agents, all accepted before the first merge (the head of the merge queue waits
until the other 31 are), each adding a file; one of them (the culprit) also adds the file
that makes `integration_verify` fail, and the check sleeps as a test suite would. Three
executions of the same plan: merges checked in batches (the default `integration_batch`)
with the culprit, checked one by one (`integration_batch: 1`, the baseline) with the
culprit, and in batches without one. The figure is the time spent in checks with the
culprit, beside one by one's; the two final trees must be the same.

Each check logs when it began and ended, and what it was given, to a file beside the
repository, so the time is the checks' own, not the supervisor's around them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

AGENT = (
    'echo "$KAIRO_SUBTASK_ID" > "f-$KAIRO_SUBTASK_ID.txt"; '
    'if [ "$KAIRO_SUBTASK_ID" = "$CULPRIT" ]; then echo broken > culprit.txt; fi; '
    'if [ "$KAIRO_SUBTASK_ID" = s00 ]; then while [ ! -f "$GATE" ]; do sleep 0.1; done; fi'
)
CHECK = (
    "began=$(date +%s.%N); sleep {sleep}; status=0; test -f culprit.txt && status=1; "
    'echo "$began $(date +%s.%N) $status $KAIRO_SUBTASK_IDS" >> {log}; exit $status'
)


class Lab(Protocol):
    def fresh_dir(self, name: str) -> Path: ...
    def kairo(self, *args: str, cwd: Path, check: bool = True) -> str: ...
    def status(self, repo: Path) -> dict[str, Any]: ...
    def git(self, repo: Path, *args: str) -> str: ...


@dataclass(frozen=True)
class QueueRun:
    checks: int
    check_s: float  # the checks' own time, summed
    tree: str  # of the integration branch at the end
    merged: int


def run_queue(
    lab: Lab, make_repo: Any, *, subtasks: int, batch: int, culprit: str | None, sleep: float
) -> QueueRun:
    directory = lab.fresh_dir(f"merge-queue-{batch}-{culprit or 'none'}")
    repo = make_repo(lab, directory, 20)
    log, gate = directory / "checks.log", directory / "gate"
    plan = directory / "plan.yaml"
    plan.write_text(
        "\n".join(
            [
                "version: 1",
                "name: queue",
                f"max_parallel: {subtasks}",
                f"integration_verify: {json.dumps(CHECK.format(sleep=sleep, log=log))}",
                f"integration_batch: {batch}",
                # The gate is in the lab, in TMPDIR, which a sandbox hides from its agent:
                # s00 would wait for it for ever. The figure counts checks, which no
                # sandbox changes.
                "sandbox: {kind: local}",
                "agent:",
                "  kind: shell",
                f"  run: {json.dumps(AGENT)}",
                "  env:",
                f"    CULPRIT: {json.dumps(culprit or '-')}",
                f"    GATE: {json.dumps(str(gate))}",
                "subtasks:",
                *(f"  - id: s{i:02d}" for i in range(subtasks)),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    lab.kairo("start", str(plan), "--detach", cwd=repo)
    others = {f"s{i:02d}" for i in range(1, subtasks)}
    _wait(lambda: others <= _succeeded(lab.status(repo)), "the others accepted")
    gate.touch()
    document = _wait_for(lambda: _ended(lab.status(repo)), "the execution's end")
    lines = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
    branch = document["integration_branch"]
    return QueueRun(
        checks=len(lines),
        check_s=sum(float(end) - float(began) for began, end, *_ in lines),
        tree=lab.git(repo, "rev-parse", f"{branch}^{{tree}}").strip(),
        merged=sum(1 for s in document["subtasks"] if s["state"] == "merged"),
    )


def _succeeded(document: dict[str, Any]) -> set[str]:
    return {s["id"] for s in document["subtasks"] if s["state"] == "succeeded"}


def _ended(document: dict[str, Any]) -> dict[str, Any] | None:
    return None if document["status"] == "RUNNING" else document


def _wait(done: Any, what: str, timeout: float = 600.0) -> None:
    _wait_for(lambda: True if done() else None, what, timeout)


def _wait_for(found: Any, what: str, timeout: float = 600.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value is not None:
            return value
        time.sleep(0.2)
    raise TimeoutError(f"merge_queue_32: waited {timeout:.0f} s for {what}")
