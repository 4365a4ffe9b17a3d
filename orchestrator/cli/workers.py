"""`worker` (offer this host's slots, until stopped) and `workers` (who offers them):
app/workers.py."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from orchestrator.app import workers as app
from orchestrator.cli.options import common_options


def _said(note: app.WorkerNote) -> str:
    worker = note.worker
    if note.kind == "unreachable":
        return f"kairo-orch worker: store unreachable ({note.problem}); retrying"
    assert worker is not None
    if note.kind == "renewed":
        return (
            f"kairo-orch worker: {worker.worker_id} is back after its lease lapsed"
            f" (lapses so far: {worker.lapses}); lease renewed"
        )
    slots = "1 slot" if worker.slots == 1 else f"{worker.slots} slots"
    return (
        f"kairo-orch worker: {worker.worker_id} registered on {worker.host}"
        f" ({worker.address}), {slots}; lease until {worker.lease_expires_at}"
    )


@click.command()
@click.option(
    "--slots",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="How many subtasks this host may run at once.",
)
@click.option(
    "--address",
    default=None,
    help="How other hosts reach this one (default: the address the store sees it connect from).",
)
@click.option(
    "--lease",
    "lease_s",
    type=click.FloatRange(min=1.0),
    default=app.LEASE_S,
    show_default=True,
    help="Seconds without a heartbeat after which this worker counts as lapsed.",
)
@click.option(
    "--remote",
    default=None,
    help="The git remote (a URL) whose plans this worker runs (`placement: workers`);"
    " without it the worker only registers.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where its clone, worktrees and runs go"
    " (default: KAIRO_WORKER_DIR, else ~/.kairo-worker).",
)
@common_options
def worker(
    slots: int,
    address: str | None,
    lease_s: float,
    remote: str | None,
    data_dir: Path | None,
    repo: Path,
    store_url: str | None,
) -> None:
    """Register this host as a worker in the PostgreSQL store and renew its lease until
    SIGTERM or SIGINT, then deregister. With --remote, it carries out the subtasks that
    executions of `placement: workers` over that remote assign to it (docs/operations.md)."""
    done = app.serve(
        store_url,
        slots=slots,
        address=address,
        lease_s=lease_s,
        tell=lambda note: click.echo(_said(note), err=True),
        remote=remote,
        data_dir=data_dir.resolve() if data_dir is not None else None,
    )
    left = "deregistered" if done.deregistered else "left (its lease lapses)"
    click.echo(f"kairo-orch worker: {done.worker_id} {left} on {done.signal_name}", err=True)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="A JSON array, by host (cli.md).")
@common_options
def workers(as_json: bool, repo: Path, store_url: str | None) -> None:
    """The workers registered in the PostgreSQL store: alive, or lapsed (no heartbeat
    within their lease)."""
    listed = app.list_workers(store_url)
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(item) for item in listed], indent=2))
        return
    from orchestrator.cli import render

    render.workers([dataclasses.asdict(item) for item in listed])
