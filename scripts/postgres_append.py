#!/usr/bin/env python3
"""What one append costs in the PostgreSQL store, beside a bare one-row insert transaction.

    .venv/bin/python scripts/postgres_append.py [--url URL] [--appends N] [--runs N]

In a schema of its own on URL (default: KAIRO_TEST_POSTGRES, else the local server's
database `test`), dropped afterwards: `PostgresStore.append` of one safe-point event (a
locked head, then the inserts, the head's move and COMMIT, pipelined), alternating with an
INSERT of one row in a transaction of its own on a connection of the same server, the
round trips' floor. Prints the median of each run's median, in microseconds, and their
ratio; then how long `verify` takes over the log it made.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from orchestrator.core import events as ev
from orchestrator.store.base import NewEvent
from orchestrator.store.postgres import PostgresStore

DEFAULT_URL = os.environ.get("KAIRO_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def safe_point(i: int) -> NewEvent:
    judged = ev.AttemptJudged(subtask_id=f"s{i % 64:02d}", attempt=1 + i % 3, accepted=True)
    return NewEvent(*ev.to_record(judged), schema_version=ev.SCHEMA_VERSION)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    schema = f"kairo_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(args.url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
        try:
            measure(
                f"{args.url}{'&' if '?' in args.url else '?'}options=-csearch_path%3D{schema}", args
            )
        finally:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
    return 0


def measure(url: str, args: argparse.Namespace) -> None:
    with PostgresStore(url) as store, psycopg.connect(url, autocommit=True) as bare:
        bare.execute("CREATE TABLE bare (seq BIGINT, payload TEXT)")
        store.create_execution("bench", "bench", "RUNNING", [])
        counter = 0
        ours: list[float] = []
        theirs: list[float] = []
        for run in range(args.runs + 1):  # the first is a warm-up
            mine, floor = [], []
            for _ in range(args.appends):
                counter += 1
                event = safe_point(counter)
                t0 = time.perf_counter()
                store.append("bench", [event])
                mine.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                with bare.transaction():
                    bare.execute("INSERT INTO bare VALUES (%s, %s)", (counter, "{}"))
                floor.append(time.perf_counter() - t0)
            if run:
                ours.append(statistics.median(mine) * 1e6)
                theirs.append(statistics.median(floor) * 1e6)
        value, baseline = statistics.median(ours), statistics.median(theirs)
        print(f"append: {value:.0f} µs, bare insert transaction: {baseline:.0f} µs,", end=" ")
        print(f"ratio {value / baseline:.2f} (medians of {args.runs} runs of {args.appends})")
        t0 = time.perf_counter()
        head, _ = store.verify("bench")
        print(f"verify of {head + 1} events: {time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    sys.exit(main())
