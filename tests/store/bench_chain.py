"""How long verification of a long log takes: `python -m tests.store.bench_chain [N] [--sqlite]`.

Builds N events (100,000 by default) shaped like the supervisor's own, hashed with core's
reference chain_hash, then times `verify_chain` over them (median of 3). With --sqlite it
also times `SqliteStore.verify` of the same log in a temporary file, which reads every
row and hashes its stored text as it is, without json.loads.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator.store.base import NewEvent
from orchestrator.store.chain import verify_chain
from orchestrator.store.sqlite import SqliteStore
from tests.store.strategies import EXECUTION_ID, build_log

COMMIT = "3f2a9c1e" * 5


def payload(seq: int) -> tuple[str, dict[str, Any]]:
    subtask = f"rename-module-{seq % 40}"
    shapes: list[tuple[str, dict[str, Any]]] = [
        (
            "attempt_started",
            {
                "subtask_id": subtask,
                "attempt": 1,
                "idempotency_key": "ab" * 16,
                "pane_id": f"%{seq % 97}",
                "run_dir": f"/repo/.git/kairo/runs/{subtask}/1",
                "start_commit": COMMIT,
            },
        ),
        (
            "attempt_exited",
            {
                "subtask_id": subtask,
                "attempt": 1,
                "exit_code": 0,
                "output_tail": "ok: 41 files changed\n" * 4,
            },
        ),
        (
            "attempt_committed",
            {
                "subtask_id": subtask,
                "attempt": 1,
                "head_commit": COMMIT,
                "changed": True,
                "files_changed": 41,
            },
        ),
        (
            "subtask_merged",
            {
                "subtask_id": subtask,
                "merge_commit": COMMIT,
                "previous_commit": COMMIT,
                "head_commit": COMMIT,
                "changed_paths": ["src/a.py", "src/b.py", "tests/test_a.py"],
                "diffstat": " 3 files changed, 40 insertions(+), 12 deletions(-)",
                "insertions": 40,
                "deletions": 12,
            },
        ),
    ]
    return shapes[seq % len(shapes)]


def median_of_3(run: Any) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str]) -> None:
    n = int(next((a for a in argv if a.isdigit()), "100000"))
    shaped = [payload(seq) for seq in range(n)]
    log = build_log([p for _, p in shaped], [t for t, _ in shaped])
    head = (log[-1].seq, log[-1].event_hash)
    seconds = median_of_3(lambda: verify_chain(EXECUTION_ID, log, *head))
    print(f"verify_chain, {n} events: {seconds:.3f} s (median of 3)")
    if "--sqlite" in argv:
        with (
            tempfile.TemporaryDirectory() as directory,
            SqliteStore(Path(directory) / "k.db") as store,
        ):
            store.create_execution(EXECUTION_ID, "bench", "RUNNING", [])
            for start in range(0, n, 1000):
                store.append(
                    EXECUTION_ID, [NewEvent(t, p) for t, p in shaped[start : start + 1000]]
                )
            seconds = median_of_3(lambda: store.verify(EXECUTION_ID))
            print(f"SqliteStore.verify, {n} events: {seconds:.3f} s (median of 3)")


if __name__ == "__main__":
    main(sys.argv[1:])
