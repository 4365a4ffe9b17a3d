"""The supervisor process: one per running execution, started by `start` or `resume`.

It is a session leader of its own (setsid), with no terminal, and its output goes to the
execution's `supervisor.log`, so closing the terminal that started it kills nothing. It
runs with the environment of the command that started it, which agents inherit in turn,
less its secrets (sandbox.py); its title (`_retitle`) also blanks what /proc shows of that
environment, which any program of the user's, an agent too, could read there.
That command forks it before the execution exists and hands it over on a pipe
(supervisor_process.py); `python -m orchestrator.runtime.daemon ID --repo DIR` runs one
directly.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import shutil
import sys
import time
import typing
from contextlib import closing
from pathlib import Path
from typing import cast

if __name__ == "__main__":
    from orchestrator.runtime.without_rich import without_rich

    without_rich()  # before structlog is imported

import structlog
import trio

from orchestrator import kairo_dir, logs
from orchestrator.core.events import EndStatus, ExecutionCreated, StopMode
from orchestrator.core.ids import live_view_channel, short_id
from orchestrator.core.report import build_report, to_markdown
from orchestrator.core.report_html import html_page
from orchestrator.core.state import ExecutionState
from orchestrator.core.status import status_document
from orchestrator.core.timeline import unix_time
from orchestrator.errors import KairoError, deliberate
from orchestrator.git.remote import remote_url
from orchestrator.git.repo import Identity, RepoPaths, discover_repo, trusted
from orchestrator.git.workspace import LocalWorktreeProvider
from orchestrator.runtime.conflict_maps import map_if_any
from orchestrator.runtime.edge_adapters import (
    GitConflictResolutions,
    GitRepository,
    GitWorktreeLooks,
    LocalProcesses,
    TmuxPanes,
)
from orchestrator.runtime.edges import Edges, integration_checkout
from orchestrator.runtime.guard import UserGuard
from orchestrator.runtime.journal import Journal
from orchestrator.runtime.log_witness import LogWitness
from orchestrator.runtime.ownership import owner_token, take_claim
from orchestrator.runtime.placement import Placement, PlacementStore
from orchestrator.runtime.state_reader import read_logged, read_state
from orchestrator.runtime.supervisor import supervise
from orchestrator.store import open_store
from orchestrator.store.base import DurableExecutionStore
from orchestrator.tmux.server import TmuxServer

log = structlog.get_logger(__name__)


def report_path(run_root: Path) -> Path:
    return run_root / "report.md"


def html_report_path(run_root: Path) -> Path:
    return run_root / "report.html"


#: How long the live view waits for its go-ahead before it starts anyway.
LIVE_VIEW_WAIT_S = 5
#: The session's first window, where the live view runs.
SUPERVISOR_WINDOW = "supervisor"
#: The live view's pane title, on its border (tmux would show the host's name).
LIVE_VIEW_TITLE = "live view: every subtask's state"


def write_live_view_store(path: Path, store_url: str | None) -> None:
    """The live view's store URL, in a file only its owner can read: a command line (the
    view's, or that of the tmux call that starts a tmux server, which the server keeps) is
    shown by `ps` to every user of the machine, and a PostgreSQL URL may hold a password.
    Empty for the default store."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(store_url or "")
    temporary.replace(path)


def watch_command(execution_id: str, repo_root: Path, store_file: Path) -> list[str]:
    """The supervisor window's live view: `kairo-orch watch`, with this interpreter.

    It imports rich and the whole CLI (more CPU than the supervisor's own imports), which
    would come just as the fan-out begins, when both cores are busy filling worktrees and
    starting agents. So it waits first, in /bin/sh, until the supervisor has started its
    first agents (it signals `live_view_channel`) or LIVE_VIEW_WAIT_S have gone by; and it
    runs at a lower priority (`nice`) than the work it shows. The pane's own $TMUX is the
    server `wait-for` asks. Its store is read from `store_file` (write_live_view_store),
    not the environment, which holds the tmux server's KAIRO_STORE: that of whatever
    command started it.
    """
    nice = shutil.which("nice")
    argv = [
        *([nice, "-n", "10"] if nice else []),
        sys.executable,
        "-P",  # it runs in the repository: its own `orchestrator/` must not shadow ours
        "-m",
        "orchestrator.cli.main",
        "watch",
        execution_id,
        "--repo",
        str(repo_root),
        "--store-file",
        str(store_file),
    ]
    return gated(argv, live_view_channel(execution_id), LIVE_VIEW_WAIT_S)


def gated(argv: list[str], channel: str, wait_s: float) -> list[str]:
    """A pane command that runs `argv` once `channel` is signalled, or after `wait_s`."""
    wait = shlex.join(["tmux", "wait-for", channel])
    gate = f"{wait} & waiter=$!; (sleep {wait_s}; kill $waiter) 2>/dev/null & wait $waiter"
    return ["/bin/sh", "-c", gate + '; exec "$@"', "sh", *argv]


async def run_supervisor(
    execution_id: str,
    paths: RepoPaths,
    store_url: str | None,
    *,
    handover_version: int | None,
    resume: bool,
    rerun_interrupted: bool,
    stop: StopMode | None = None,
    previous_write: str | None = None,
) -> int:
    """`previous_write`: when the row was last written before the command that handed the
    execution over claimed it (ownership.Claim)."""
    trusted(paths)  # found by the command that handed it over
    witness = LogWitness.of(paths.git_common_dir, execution_id)
    with open_store(store_url, git_common_dir=paths.git_common_dir) as store, closing(witness):
        structlog.contextvars.bind_contextvars(execution_id=execution_id)
        if resume:
            await trio.to_thread.run_sync(store.verify, execution_id)
        me = owner_token()
        claimed_at = time.monotonic()  # the lease runs from no later than this
        claimed = await trio.to_thread.run_sync(
            lambda: take_claim(
                store,
                execution_id,
                owner=me,
                status="RECOVERING" if resume else "RUNNING",
                handover_version=handover_version,
            )
        )
        row = claimed.row
        if handover_version is None:  # no command claimed it before: the write was ours to see
            previous_write = claimed.previous_write
        # The chain holds; is it the log its supervisors wrote? Asked as its owner: no
        # other supervisor writes the file meanwhile (log_witness.py).
        try:
            await trio.to_thread.run_sync(witness.take_up, store, execution_id)
        except OSError as error:  # the run does without the file: its appends are checked
            log.warning("log_hashes_not_kept", path=str(witness.path), error=str(error))
        state = await trio.to_thread.run_sync(read_state, store, execution_id)
        created = state.created
        tmux = TmuxPanes(created.tmux_socket)
        # Side by side: each is a few milliseconds of waiting on tmux or git, and the
        # first worktree waits for both.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_open_session, tmux, created, execution_id, paths, store_url)
            identity = await Identity.for_repo(paths.toplevel)
        placement = _placement(store, state, paths)
        if resume and placement is not None:
            await placement.take_over(state)
        edges = Edges(
            repo_root=paths.toplevel,
            workspaces=LocalWorktreeProvider(paths),
            repository=GitRepository(paths.toplevel, paths.git_common_dir, identity),
            panes=tmux,
            processes=LocalProcesses(),
            environment=dict(os.environ),
            open_session=functools.partial(
                _open_session, tmux, created, execution_id, paths, store_url
            ),
            # Placed subtasks' worktrees are on their workers' hosts: none to look at here.
            looks=GitWorktreeLooks(paths.toplevel) if placement is None else None,
            resolutions=GitConflictResolutions(identity),
        )
        if placement is None:  # placed agents run on workers' hosts, in clones of their own
            running = await trio.to_thread.run_sync(_running_beside, store, execution_id, paths)
            edges.guard = UserGuard(paths, identity, edges.environment, running)
        journal = Journal(
            store,
            state,
            owner=me,
            version=row.version,
            claimed_at=claimed_at,
            written_head=(row.head_seq, row.head_hash),  # what was verified, and taken up
            witness=witness,
            redactor=edges.redactor,
        )
        final = await supervise(
            journal,
            edges,
            resumed=resume,
            rerun_interrupted=rerun_interrupted,
            stop=stop,
            placement=placement,
            previous_heartbeat=unix_time(previous_write) if resume and previous_write else None,
        )
        await _remove_integration_checkout(edges, final)
        report = to_markdown(build_report(final, final.status))
        # A file name that is not UTF-8 is written as its bytes: it must not stop the end.
        await trio.Path(report_path(Path(created.run_root))).write_text(
            report, encoding="utf-8", errors="surrogateescape"
        )
        await trio.to_thread.run_sync(
            write_html_report, store, execution_id, Path(created.run_root)
        )
        await journal.set_status(final.status, release=True)
        log.info("execution_ended", status=final.status)
    return 0


def _running_beside(store: DurableExecutionStore, execution_id: str, paths: RepoPaths) -> set[str]:
    """The short ids of the repository's other executions that have not ended: their
    refs move as they run, and are none of the guard's."""
    ended = typing.get_args(EndStatus)
    return {
        short_id(row.execution_id)
        for row in store.list_executions(repository=paths.key)
        if row.execution_id != execution_id and row.status not in ended
    }


def _placement(
    store: DurableExecutionStore, state: ExecutionState, paths: RepoPaths
) -> Placement | None:
    """`placement: workers`: the owner's side, over the store (`start` checked that it is
    PostgreSQL) and the remote `review.push` names."""
    plan = state.plan
    if plan.placement != "workers" or plan.review.push is None:
        return None
    url = remote_url(paths.toplevel, plan.review.push)
    return Placement(cast(PlacementStore, store), paths.toplevel, url)


def write_html_report(store: DurableExecutionStore, execution_id: str, run_root: Path) -> None:
    """report.html beside report.md. The page is a view: a failure to draw it is logged,
    and the execution ends as it would have, `report --html` there to try again."""
    try:
        state, logged = read_logged(store, execution_id)
        row = store.get_execution(execution_id)
        document = status_document(
            state,
            status=state.status,
            version=row.version if row is not None else 0,
            head_seq=state.seq,
            head_hash=row.head_hash if row is not None else "",
        )
        found = map_if_any(Path(state.created.repo_root), state)
        page = html_page(state, logged, document, now=time.time(), conflict_map=found)
        html_report_path(run_root).write_text(page, encoding="utf-8", errors="surrogateescape")
    except Exception as error:
        log.warning("html_report_not_written", error=repr(error))


async def _open_session(
    tmux: TmuxServer,
    created: ExecutionCreated,
    execution_id: str,
    paths: RepoPaths,
    store_url: str | None,
) -> None:
    """The execution's tmux session with its live view; on a resume, a new live view (the
    last one may have ended with the execution, which a rerun reopens)."""
    session = created.tmux_session
    store_file = kairo_dir.store_file(Path(created.run_root))
    await trio.to_thread.run_sync(write_live_view_store, store_file, store_url)
    command = watch_command(execution_id, paths.toplevel, store_file)
    if not await tmux.has_session(session):
        await tmux.new_session(
            session,
            window_name=SUPERVISOR_WINDOW,
            title=LIVE_VIEW_TITLE,
            command=command,
            cwd=paths.toplevel,
        )
        return
    try:
        await tmux.respawn_pane(session, SUPERVISOR_WINDOW, command)
    except KairoError as error:  # a user closed the window: the agents' windows are what count
        log.info("live_view_not_restarted", error=error.message)


async def _remove_integration_checkout(edges: Edges, state: ExecutionState) -> None:
    """Its job ended with the execution; a failure to remove it is left for `clean`."""
    checkout = integration_checkout(state)
    if await edges.workspaces.exists(checkout):
        try:
            await edges.workspaces.release(checkout)
        except KairoError as error:
            log.warning("integration_checkout_left", path=str(checkout), error=error.message)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="kairo-orch-supervisor")
    parser.add_argument("execution_id")
    parser.add_argument("--repo", type=Path, required=True)
    # Where `start` found the repository's git directories: no need to ask git again.
    parser.add_argument("--git-dir", type=Path, default=None)
    parser.add_argument("--git-common-dir", type=Path, default=None)
    parser.add_argument("--store", default=None)
    parser.add_argument("--handover-version", type=int, default=None)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--rerun-interrupted", action="store_true")
    parser.add_argument("--stop", choices=["graceful", "now"], default=None)
    parser.add_argument("--previous-write", default=None)
    args = parser.parse_args(argv)
    if (args.git_dir is None) != (args.git_common_dir is None):
        parser.error("--git-dir and --git-common-dir go together")
    os.chdir(args.repo)
    logs.configure(sys.stdout)
    try:
        if args.git_dir is not None:
            paths = RepoPaths(args.repo, args.git_dir, args.git_common_dir)
        else:
            paths = discover_repo(args.repo)
        return trio.run(
            functools.partial(
                run_supervisor,
                args.execution_id,
                paths,
                args.store,
                handover_version=args.handover_version,
                resume=args.resume,
                rerun_interrupted=args.rerun_interrupted,
                stop=args.stop,
                previous_write=args.previous_write,
            )
        )
    except BaseException as error:
        stopped = deliberate(error)
        if isinstance(stopped, KairoError):  # said in a sentence: no traceback to read
            log.error("supervisor_stopped", error=stopped.message, **stopped.context())  # noqa: TRY400
        else:
            log.exception("supervisor_crashed")
        raise


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BaseException as error:
        stopped = deliberate(error)
        if not isinstance(stopped, KairoError):
            raise
        sys.exit(stopped.exit_code)  # logged already, in a sentence: no traceback
