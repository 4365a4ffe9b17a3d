"""Overlap warnings while agents work: a look at the running worktrees every few seconds.

Each look asks git (through the `WorktreeLooks` port) which paths each running subtask has
changed since it started, with an index file of the look's own per worktree (the agent's
is never touched) kept in the run folder between looks, so that `add` rehashes only what
changed; and, where its work changed since the last look or something was merged since it
started, whether that work would conflict with the integration branch (`merge-tree` of a
dangling commit, nothing written but objects). core/overlaps.py says what of that is new,
and the look records it as `overlap_found` events, which `status`, the live view and the
report show. A warning only: nothing is decided on it, and a look that fails is logged and
tried again at the next.

It costs one git process a running worktree a look while nothing changes there (`add`,
which then leaves its index file as it was), and three or four where something did; a
look that cost more than CPU_SHARE of a core over the interval puts the next off
accordingly. docs/benchmarks.md has the supervisor's CPU with and without the looks.
"""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import Mapping, Set
from pathlib import Path

import structlog
import trio

from orchestrator.core.overlaps import overlaps_to_record
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import SubtaskView
from orchestrator.errors import KairoError
from orchestrator.git.worktree_look import WorktreeChange
from orchestrator.runtime.journal import Journal
from orchestrator.runtime.ports import WorktreeLooks

log = structlog.get_logger(__name__)

#: Seconds between two looks, at least.
LOOK_EVERY_S = 5.0
#: The share of one core the looks may take: a look that cost more waits longer for the
#: next (many worktrees, large ones), so that the agents keep the machine.
CPU_SHARE = 0.02
#: Seconds, instead of LOOK_EVERY_S (docs/operations.md); 0 turns the looks off.
EVERY_VARIABLE = "KAIRO_OVERLAP_EVERY"
_LOOK_AT_LEAST_S = 0.2


def look_every(environment: Mapping[str, str]) -> float | None:
    """The interval KAIRO_OVERLAP_EVERY asks for, None for none; a value that is no number
    of seconds is warned of and the default kept (a warning stops no run)."""
    text = environment.get(EVERY_VARIABLE, "").strip()
    if not text:
        return LOOK_EVERY_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        log.warning("overlap_interval_ignored", value=text, default=LOOK_EVERY_S)
        return LOOK_EVERY_S
    return max(seconds, _LOOK_AT_LEAST_S) if seconds else None


def watched(state: ExecutionState) -> list[SubtaskView]:
    """The subtasks whose worktrees hold work under way: an agent runs there, or its
    check does. Not one resolving a conflict: its worktree holds the integration branch
    merged in, which is not its own work, and its conflict is known already."""
    return [
        view
        for view in state.subtasks.values()
        if view.state in ("running", "verifying")
        and view.worktree is not None
        and view.start_commit is not None
        and not _resolving(view)
    ]


def _resolving(view: SubtaskView) -> bool:
    attempt = view.current_attempt
    return attempt is not None and attempt.resolution is not None


class OverlapWatch:
    """What the looks keep from one to the next: each worktree's last tree and paths, and
    the last tree and integration head checked for conflicts."""

    def __init__(self, looks: WorktreeLooks, index_dir: Path) -> None:
        self._looks = looks
        self._index_dir = index_dir
        self._checked: dict[str, tuple[str, str]] = {}
        self._last: dict[str, WorktreeChange] = {}
        self._indexed: set[str] = set()  # subtasks an index file was made for

    def index(self, subtask_id: str) -> Path:
        return self._index_dir / f"{subtask_id}.index"

    async def look(self, state: ExecutionState) -> tuple[dict[str, Set[str]], dict[str, Set[str]]]:
        """The paths each watched subtask changed, and those that would conflict with the
        integration branch (only where that was not asked of the same tree and head)."""
        seen: dict[str, Set[str]] = {}
        conflicting: dict[str, Set[str]] = {}
        views = watched(state)
        for view in views:
            assert view.worktree is not None and view.start_commit is not None
            self._indexed.add(view.id)
            try:
                change = await self._looks.change(
                    Path(view.worktree),
                    start_commit=view.start_commit,
                    index=self.index(view.id),
                    leave_out=view.copied,
                    last=self._last.get(view.id),
                )
                self._last[view.id] = change
                seen[view.id] = change.paths
                head = state.integration_head
                asked = (change.tree, head or "")
                merged_since = head is not None and head != view.start_commit
                if change.paths and merged_since and self._checked.get(view.id) != asked:
                    assert head is not None
                    conflicting[view.id] = await self._looks.conflicting_paths(
                        change.tree, start_commit=view.start_commit, onto=head
                    )
                    self._checked[view.id] = asked
            except KairoError as error:  # its worktree going away as its subtask ends, say
                log.debug("overlap_look_failed", subtask_id=view.id, error=error.message)
        self._forget(self._indexed - {view.id for view in views})
        return seen, conflicting

    def forget_all(self) -> None:
        self._forget(set(self._indexed))

    def _forget(self, gone: Set[str]) -> None:
        """The index files of subtasks no longer watched go: a later attempt seeds anew."""
        for subtask_id in gone:
            self._indexed.discard(subtask_id)
            self._checked.pop(subtask_id, None)
            self._last.pop(subtask_id, None)
            with contextlib.suppress(OSError):
                self.index(subtask_id).unlink()


def cpu_seconds() -> float:
    """This process's CPU and that of the children it reaped (the looks' git processes,
    and any other command's that ended meanwhile: an overestimate, on the safe side)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def watch_overlaps(journal: Journal, looks: WorktreeLooks, every_s: float) -> None:
    """Until cancelled: look every `every_s` seconds, or less often where a look costs
    more than CPU_SHARE of a core over that time, and record what is new."""
    state = journal.state
    watch = OverlapWatch(looks, Path(state.created.run_root) / "overlaps")
    pause = every_s
    try:
        while True:
            await trio.sleep(pause)
            before = cpu_seconds()
            seen, conflicting = await watch.look(journal.state)
            pause = max(every_s, (cpu_seconds() - before) / CPU_SHARE)
            found = overlaps_to_record(journal.state, seen, conflicting, time.time())
            if found:
                for event in found:
                    log.info("overlap_found", subtasks=event.subtasks, kind=event.kind)
                await journal.append(found)
    finally:  # the supervisor ends (or stops): its looks' index files go with it
        watch.forget_all()
