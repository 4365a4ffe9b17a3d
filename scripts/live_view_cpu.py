#!/usr/bin/env python3
"""The live view's CPU a look, with a thousand subtasks: what `watch` pays each time the
execution changes (twice a second at most, while agents run).

    PYTHONPATH=. .venv/bin/python scripts/live_view_cpu.py [--dir D] [--subtasks N]

The first run makes the log of an N-subtask execution (1,024 by default; max_parallel 32)
with the in-memory world of tests/world, in D (minutes: every event is a durable append),
and keeps it there for the next. Then, from the log folded halfway, it times (CPU, the
median of 40 looks) each look as the view makes it: 12 events folded in (that run's rate
at two looks a second), `status --json`'s document, and the frame drawn by rich into a
250x60 terminal: the whole table (every subtask, as before paging) and one page.
"""

from __future__ import annotations

import argparse
import io
import logging
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
import trio
from rich.console import Console, Group

from orchestrator.app.live_pages import Pager
from orchestrator.app.watching import Look
from orchestrator.cli import render
from orchestrator.cli.watch import _OTHER_LINES, _frame
from orchestrator.core import events as ev
from orchestrator.core.state import ExecutionState, apply, fold
from orchestrator.core.status import status_document
from orchestrator.runtime.running_usage import running_usage
from orchestrator.store.sqlite import SqliteStore
from tests.world import EXECUTION_ID, running_world, subtask, writes

EVENTS_A_LOOK = 12
LOOKS = 40
HEIGHT = 60


async def make_log(root: Path, count: int) -> None:
    ids = [f"t{i:04d}" for i in range(count)]
    agents = {sid: writes(f"{sid}.txt", "x\n") for sid in ids}
    async with running_world(root, {"README.md": "x\n"}, agents) as world:
        world.create({"name": "big", "max_parallel": 32, "subtasks": [subtask(s) for s in ids]})
        await world.supervise()


def document(state: ExecutionState) -> dict[str, Any]:
    return status_document(
        state,
        status="RUNNING",
        version=1,
        head_seq=state.seq,
        head_hash="-",
        running=running_usage(state),
    )


def per_look(
    state: ExecutionState, rest: list[ev.ExecutionEvent], draw: Callable[..., Any]
) -> float:
    """The median CPU seconds of a look: new events folded in, the document, the frame."""
    times = []
    for i in range(LOOKS):
        began = time.process_time()
        for event in rest[i * EVENTS_A_LOOK : (i + 1) * EVENTS_A_LOOK]:
            state = apply(state, event, state.seq + 1)
        draw(document(state))
        times.append(time.process_time() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp/kairo-live-view-cpu"))
    parser.add_argument("--subtasks", type=int, default=1024)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if not (args.dir / "kairo.db").exists():
        args.dir.mkdir(parents=True, exist_ok=True)
        print(f"making the log of {args.subtasks} subtasks in {args.dir}", file=sys.stderr)
        trio.run(make_log, args.dir, args.subtasks)
    with SqliteStore(args.dir / "kairo.db") as store:
        stored = store.read_events(EXECUTION_ID)
    events = [ev.from_record(e.event_type, e.payload, e.schema_version) for e in stored]
    state = fold(EXECUTION_ID, events[: len(events) // 2])
    rest = events[len(events) // 2 :]
    console = Console(width=250, height=HEIGHT, force_terminal=True, file=io.StringIO())
    pager = Pager()

    def whole(doc: dict[str, Any]) -> None:
        console.print(Group(render.status_header(doc), render.status_table(doc)))

    def paged(doc: dict[str, Any]) -> None:
        console.print(_frame(Look(doc, False), pager.cut(doc, HEIGHT - _OTHER_LINES)))

    print(f"{len(state.plan.subtasks)} subtasks, {len(events) // 2} events folded")
    for name, draw in (
        ("document only", lambda doc: None),
        ("whole table", whole),
        ("one page", paged),
    ):
        print(f"{name:>14}: {per_look(state, rest, draw) * 1000:.1f} ms of CPU a look")


if __name__ == "__main__":
    main()
