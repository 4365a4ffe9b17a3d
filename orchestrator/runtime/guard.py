"""The guard of what the user owns, at the edge: it takes the record before any agent
runs (or reads it back on a resume), keeps every object of it reachable on guard refs,
and compares the repository with it after every attempt and check, before every review
step, at the end and on a resume (core/guard.py says what, and why).

Comparisons take turns, and coalesce: one asked for while another runs is covered by
the next to start, which serves every request made before it began. A merge step holds
the guard while it moves the integration branch, so that no comparison sees it half way
(what it moved the branch to is accepted until the log says so), after the comparison
any agent's or check's end asked for.

What a comparison costs: two git processes when nothing changed (`for-each-ref`, and an
`add` into the guard's own index of the checkout, which rehashes only the files whose
stat data changed), one more for each worktree waiting between its commit and its merge,
and the git directory's few files read and hashed (docs/benchmarks.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from collections.abc import AsyncIterator, Collection, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
import trio

from orchestrator.core import events as ev
from orchestrator.core.guard import (
    GUARD_NAMESPACE,
    STASH,
    GuardChange,
    GuardRecord,
    Moment,
    Ownership,
    PathChange,
    StashEntry,
    UserState,
    branch_change,
    changes,
    is_guarded,
    is_kairo_worktree,
    news,
    reported_in,
    restore_path,
)
from orchestrator.core.guard_scope import (
    link_problem,
    linked_worktrees,
    moved_branches,
    suspects,
    watched_worktrees,
)
from orchestrator.core.ids import short_id
from orchestrator.core.state import ExecutionState
from orchestrator.errors import KairoError
from orchestrator.git import user_state as user
from orchestrator.git.merge import MERGES_LOOKED_BACK
from orchestrator.git.refs import parents_of
from orchestrator.git.repo import Identity, RepoPaths, own_index, worktree_dirs

if TYPE_CHECKING:
    from orchestrator.runtime.journal import Journal

log = structlog.get_logger(__name__)


@dataclass
class IntegrationMove:
    """What a comparison before a merge step found, and where the step moved the branch."""

    breach: ev.GuardBreached | None
    heads: list[str] = field(default_factory=list)

    @property
    def events(self) -> list[ev.ExecutionEvent]:
        return [self.breach] if self.breach is not None else []


class NoGuard:
    """Where nothing of a user's is at hand: the in-memory world, a worker's own clone."""

    async def begin(self, journal: Journal, triggers: Collection[str] = ()) -> None:
        return None

    async def compare(
        self, moment: Moment, triggers: Collection[str] = ()
    ) -> ev.GuardBreached | None:
        return None

    @asynccontextmanager
    async def moving_integration(self, moment: Moment) -> AsyncIterator[IntegrationMove]:
        yield IntegrationMove(None)

    async def settled(self, subtask_id: str, attempt: int, worktree: Path) -> None:
        return None


def guard_folder(run_root: str) -> Path:
    """The record, the copies of the files it guards, and its own index files."""
    return Path(run_root) / "guard"


class UserGuard:
    """The guard of one execution's supervisor, on this host's repository. `running_
    executions`: the short ids of the repository's other executions that have not ended,
    whose refs are theirs to move."""

    def __init__(
        self,
        paths: RepoPaths,
        identity: Identity,
        environment: Mapping[str, str],
        running_executions: Collection[str] = (),
    ) -> None:
        self._paths = paths
        self._identity = identity
        self._environment = environment
        self._running = frozenset(running_executions)
        self._lock = trio.Lock()
        self._asked = 0
        self._served = 0
        self._triggers: set[str] = set()
        self._journal: Journal | None = None
        self._record: GuardRecord | None = None
        self._reported: dict[tuple[str, str], str | None] = {}
        self._checkout: user.TreeSnapshots | None = None
        self._checkout_paths: tuple[str, list[PathChange]] | None = None
        self._index_read: tuple[str | None, str] | None = None
        self._stash_read: tuple[str | None, tuple[StashEntry, ...]] | None = None
        self._worktrees: dict[str, tuple[int, str, user.TreeSnapshots]] = {}
        self._integration_moved_to: list[str] = []
        self._whose: dict[str, bool] = {}  # ref name -> guarded

    # -- the record ---------------------------------------------------------------------

    async def begin(self, journal: Journal, triggers: Collection[str] = ()) -> None:
        """Read the record back, or take it (at the start, before any agent runs); on a
        resume, compare at once: agents may have run while no supervisor watched."""
        self._journal = journal
        state = journal.state
        folder = guard_folder(state.created.run_root)
        self._checkout = user.TreeSnapshots(
            self._paths.toplevel, folder / "checkout.index", self._paths.git_dir / "index"
        )
        recorded = state.guard
        if recorded is not None and recorded.host == socket.gethostname():
            record, problem = await trio.to_thread.run_sync(_read_record, folder, recorded)
            if record is not None:
                self._record = record
                self._reported = reported_in(state.breaches)
                self._integration_moved_to += await self._unlogged_merges(state)
                breach = await self.compare("resume", triggers)
                if breach is not None:
                    await journal.append([breach])
                return
            await journal.append([self._lost_record(state, folder, problem, triggers)])
        await journal.append([await self._take(state, folder)])

    async def _unlogged_merges(self, state: ExecutionState) -> list[str]:
        """The merges a supervisor that died wrote onto the integration branch and did not
        log, oldest first: each of a subtask waiting for its merge, onto the one before,
        down to the head the log knows. The merge step finds them and logs them
        (git/merge.py); until then they are no change. Anything else on the branch is."""
        head = state.integration_head
        if head is None:
            return []
        ref = f"refs/heads/{state.created.integration_branch}"
        found = (await user.read_ref_values(self._paths.toplevel)).get(ref)
        waiting = {
            view.head_commit
            for view in state.subtasks.values()
            if view.state == "succeeded" and view.head_commit is not None
        }
        chain: list[str] = []
        commit = found
        while commit is not None and commit != head and len(chain) < MERGES_LOOKED_BACK:
            try:
                parents = await parents_of(self._paths.toplevel, commit)
            except KairoError:
                return []
            if len(parents) != 2 or parents[1] not in waiting:
                return []
            chain.append(commit)
            commit = parents[0]
        return chain[::-1] if commit == head else []

    def _lost_record(
        self, state: ExecutionState, folder: Path, problem: str, triggers: Collection[str]
    ) -> ev.GuardBreached:
        record = folder / "record.json"
        change = GuardChange(
            kind="unreadable",
            name=str(record),
            was=state.guard.record_sha256 if state.guard else None,
            now=f"the guard's record {record} {problem}: what it guarded is not known any "
            "more, and a new record is taken",
            restore="",
        )
        blamed = suspects(state, triggers)
        return ev.GuardBreached(changes=(change,), subtask_ids=blamed, moment="resume")

    async def _take(self, state: ExecutionState, folder: Path) -> ev.GuardRecorded:
        paths = self._paths
        owner = self._ownership(state)
        refs = await user.read_all_refs(paths.toplevel)
        guarded = {name: ref for name, ref in refs.items() if is_guarded(name, owner)}
        heads = self._read_heads()
        stash = await user.read_stash(paths.toplevel) if STASH in refs else ()
        watched, directories = await self._watched_files()
        facts, contents = await trio.to_thread.run_sync(user.read_files, watched, directories)
        copies = folder / "copies"
        await trio.to_thread.run_sync(user.save_copies, copies, contents)
        index = paths.git_dir / "index"
        index_copy = await trio.to_thread.run_sync(user.copy_index, index, copies)
        assert self._checkout is not None
        checkout = await self._checkout.tree()
        staged = await user.index_tree(paths.toplevel, index, folder / "staged.index")
        commits = [ref.oid for ref in guarded.values() if ref.type == "commit"]
        commits += [head for head in heads.values() if not head.startswith("ref: ")]
        commits += [entry.oid for entry in stash]
        others = [ref.oid for ref in guarded.values() if ref.type != "commit"]
        snapshot, kept = await user.keep_reachable(
            paths.toplevel,
            namespace=f"{GUARD_NAMESPACE}/{short_id(state.execution_id)}",
            tree=checkout,
            commits=[c for c in commits if c],
            others=[*others, *([staged] if staged else [])],
            identity=self._identity,
            message=f"kairo-orch: what the user owned when execution {state.execution_id} started",
        )
        found = UserState(
            refs={name: ref.value for name, ref in guarded.items()},
            heads=heads,
            stash=stash,
            files=facts,
            checkout=checkout,
            index=await user.index_entries(paths.toplevel, index),
        )
        self._record = GuardRecord(
            state=found,
            snapshot_commit=snapshot,
            kept=kept,
            checkout_root=str(paths.toplevel),
            index_file=str(index),
            index_copy=index_copy,
            copies=str(copies),
            watched_files=tuple(map(str, watched)),
            watched_directories=tuple(map(str, directories)),
            running_executions=tuple(sorted(self._running)),
        )
        self._reported = {}
        digest = await trio.to_thread.run_sync(_write_record, folder, self._record)
        log.info("guard_recorded", refs=len(guarded), files=len(facts), snapshot=snapshot)
        return ev.GuardRecorded(
            record_sha256=digest,
            snapshot_commit=snapshot,
            host=socket.gethostname(),
            refs=len(guarded),
            files=len(facts),
        )

    def _guarded(self, ref: str, state: ExecutionState) -> bool:
        """`is_guarded`, asked once a ref name: the same thousands come back each time."""
        known = self._whose.get(ref)
        if known is None:
            known = self._whose[ref] = is_guarded(ref, self._ownership(state))
        return known

    def _ownership(self, state: ExecutionState) -> Ownership:
        return Ownership(
            short_id=short_id(state.execution_id),
            integration_branch=state.created.integration_branch,
            running_executions=self._running,
        )

    def _read_heads(self) -> dict[str, str]:
        """The HEAD of the main worktree, and of every linked one kairo-orch did not make."""
        common = self._paths.git_common_dir
        heads = {}
        main = user.read_head(common)
        if main is not None:
            heads[str(common.parent)] = main
        for linked in user.linked_worktrees(common):
            if not is_kairo_worktree(linked.path, linked.head):
                heads[linked.path] = linked.head
        return heads

    async def _watched_files(self) -> tuple[list[Path], list[Path]]:
        paths = self._paths
        files, directories = user.git_directory_files(paths.git_common_dir, paths.git_dir)
        for linked in user.linked_worktrees(paths.git_common_dir):
            if not is_kairo_worktree(linked.path, linked.head):
                files += [linked.admin / name for name in user.WORKTREE_METADATA]
        configs = [paths.git_common_dir / "config", *user.global_config_files(self._environment)]
        files += configs[1:]
        for config in configs:
            files += await user.included_files(config, paths.toplevel)
        return list(dict.fromkeys(files)), directories

    # -- comparing ------------------------------------------------------------------------

    async def compare(
        self, moment: Moment, triggers: Collection[str] = ()
    ) -> ev.GuardBreached | None:
        """What changed since the last comparison, as an event for the caller to append
        (None: nothing, or a comparison that began after this was asked covered it)."""
        if self._record is None:
            return None
        self._triggers |= set(triggers)
        self._asked += 1
        ticket = self._asked
        async with self._lock:
            if self._served >= ticket:
                return None
            return await self._compare_now(moment)

    @asynccontextmanager
    async def moving_integration(self, moment: Moment) -> AsyncIterator[IntegrationMove]:
        """Hold the guard while the caller moves the integration branch and says where to
        (`IntegrationMove.heads`), after a comparison if one was asked for and not made
        yet: every agent's and check's end asks for one, so a merge step always follows
        a look made after the last of them. It makes none of its own: what a merge reads
        runs nothing of the repository's (git/invocation.py), the branch is moved by
        compare-and-swap, and a look before each step would find only what an agent
        still running did, which its own end finds and blames on it (a git process a
        step, at a thousand subtasks, for nothing more)."""
        if self._record is None:
            yield IntegrationMove(None)
            return
        async with self._lock:
            asked = self._served < self._asked
            move = IntegrationMove(await self._compare_now(moment) if asked else None)
            try:
                yield move
            finally:
                self._integration_moved_to += move.heads

    async def settled(self, subtask_id: str, attempt: int, worktree: Path) -> None:
        """The worktree as its attempt's commit (or check) left it: from now until its
        merge or next attempt, a change there is no work of its own."""
        if self._journal is None:
            return
        async with self._lock:
            known = self._worktrees.pop(subtask_id, None)
            if known is not None:
                known[2].forget()
            await self._watch(subtask_id, attempt, worktree)

    async def _watch(self, subtask_id: str, attempt: int, worktree: Path) -> None:
        assert self._journal is not None
        folder = guard_folder(self._journal.state.created.run_root) / "worktrees"
        try:
            seed = own_index(worktree_dirs(worktree))  # refused where its link was rewritten
            snapshots = user.TreeSnapshots(worktree, folder / f"{subtask_id}.index", seed)
            self._worktrees[subtask_id] = (attempt, await snapshots.tree(), snapshots)
        except KairoError as error:  # taken at the next comparison
            log.info("worktree_not_watched", subtask_id=subtask_id, error=error.message)
            (folder / f"{subtask_id}.index").unlink(missing_ok=True)

    def _still_watched(self, subtask_id: str, attempt: int) -> bool:
        """Whether the log, as it is now, still has the worktree waiting: a comparison's
        state is the one it began with, and a merge's worktree may have moved since."""
        assert self._journal is not None
        now = self._journal.state
        return any(
            (sid, number) == (subtask_id, attempt) for sid, number, _ in watched_worktrees(now)
        )

    async def _compare_now(self, moment: Moment) -> ev.GuardBreached | None:
        assert self._journal is not None and self._record is not None
        self._served = self._asked
        triggers, self._triggers = self._triggers, set()
        state = self._journal.state
        try:
            found = await self._changes(state, self._record)
        except KairoError as error:  # what cannot be read cannot be vouched for
            log.warning("guard_could_not_compare", error=error.message)
            found = [_unreadable(str(self._paths.git_common_dir), error)]
            new, _ = news(found, self._reported)
            self._reported.update({change.key: change.now for change in new})
        else:
            new, self._reported = news(found, self._reported)
        if not new:
            return None
        blamed = suspects(state, triggers)
        log.warning("guard_breached", changes=len(new), suspects=blamed, moment=moment)
        return ev.GuardBreached(changes=tuple(new), subtask_ids=blamed, moment=moment)

    async def _changes(self, state: ExecutionState, record: GuardRecord) -> list[GuardChange]:
        paths = self._paths
        refs = await user.read_ref_values(paths.toplevel)
        guarded = {name: value for name, value in refs.items() if self._guarded(name, state)}
        watched = [Path(p) for p in record.watched_files]
        directories = [Path(p) for p in record.watched_directories]
        facts, _ = await trio.to_thread.run_sync(user.read_files, watched, directories)
        assert self._checkout is not None
        checkout = await self._checkout.tree()
        found = UserState(
            refs=guarded,
            heads=self._read_heads(),
            stash=await self._stash() if STASH in refs else (),
            files=facts,
            checkout=checkout,
            index=await self._index_entries(record),
        )
        out = changes(record, found, await self._checkout_changes(record, checkout))
        out += self._kept_refs(record, refs)
        out += self._own_branches(state, refs)
        out += self._links(state)
        return out + await self._watched_worktrees(state)

    async def _stash(self) -> tuple[StashEntry, ...]:
        """The stash's entries, read again only when the file that holds them changed."""
        digest = _digest(user.stash_log(self._paths.git_common_dir))
        if digest is None or self._stash_read is None or self._stash_read[0] != digest:
            self._stash_read = (digest, await user.read_stash(self._paths.toplevel))
        return self._stash_read[1]

    async def _index_entries(self, record: GuardRecord) -> str:
        """The index's entries, read again only when its file changed since last read."""
        index = Path(record.index_file)
        digest = _digest(index)
        if digest == record.index_copy:
            return record.state.index
        if self._index_read is None or self._index_read[0] != digest:
            self._index_read = (digest, await user.index_entries(self._paths.toplevel, index))
        return self._index_read[1]

    async def _checkout_changes(self, record: GuardRecord, tree: str) -> list[PathChange]:
        if tree == record.state.checkout:
            return []
        if self._checkout_paths is None or self._checkout_paths[0] != tree:
            found = await user.tree_changes(self._paths.toplevel, record.state.checkout, tree)
            self._checkout_paths = (tree, found)
        return self._checkout_paths[1]

    def _kept_refs(self, record: GuardRecord, refs: Mapping[str, str]) -> list[GuardChange]:
        """The guard's own refs: one deleted lets the next gc take what it kept."""
        out = []
        for ref, oid in record.kept.items():
            change = branch_change(None, ref, oid, refs.get(ref))
            if change is not None:
                out.append(change.model_copy(update={"kind": "ref"}))
        return out

    def _own_branches(self, state: ExecutionState, refs: Mapping[str, str]) -> list[GuardChange]:
        moved = self._integration_moved_to
        if state.integration_head in moved:  # the log caught up with a merge step
            del moved[: moved.index(state.integration_head) + 1]
        out = []
        for branch in moved_branches(state, refs):
            if branch.subtask_id is None and branch.found in moved:
                continue  # a merge step moved it there, and its events are on their way
            change = branch_change(branch.subtask_id, branch.ref, branch.logged, branch.found)
            if change is not None:
                out.append(change)
        return out

    def _link_problem(self, worktree: Path) -> str | None:
        resolved = worktree.resolve()
        if not resolved.exists():
            return None  # gone (a user removed it): git runs nothing there
        link = user.read_link(resolved)
        common = str(self._paths.git_common_dir.resolve())
        return link_problem(str(resolved), link.points_at, link.points_back, link.common, common)

    def _links(self, state: ExecutionState) -> list[GuardChange]:
        out = []
        for sid, worktree in linked_worktrees(state):
            problem = self._link_problem(Path(worktree))
            if problem is not None:
                out.append(
                    GuardChange(
                        kind="link",
                        name=f"{worktree}/.git",
                        was="linked",
                        now=problem,
                        restore=f"git -C {self._paths.toplevel} worktree repair {worktree}",
                        subtask_id=sid,
                    )
                )
        return out

    async def _watched_worktrees(self, state: ExecutionState) -> list[GuardChange]:
        """Each waiting worktree against its snapshot from when its wait began (taken
        when `settled` was not told of it: after a resume, first seen now)."""
        out = []
        for sid, (attempt, _, snapshots) in list(self._worktrees.items()):
            # One `settled` told of may not be in the log yet: kept until it is over.
            view = state.subtask(sid)
            current = view.current_attempt
            over = view.worktree is None or view.state in ("merged", "failed", "stopped")
            if over or current is None or current.number != attempt:
                del self._worktrees[sid]
                snapshots.forget()
        for sid, attempt, path in watched_worktrees(state):
            worktree = Path(path)
            known = self._worktrees.get(sid)
            if known is None:
                await self._watch(sid, attempt, worktree)
                continue
            if self._link_problem(worktree) is not None:
                continue  # `_links` says what is wrong with it; our git refuses it
            _, baseline, snapshots = known
            try:
                tree = await snapshots.tree()
                found = (
                    [] if tree == baseline else await user.tree_changes(worktree, baseline, tree)
                )
            except KairoError as error:
                if self._still_watched(sid, attempt):
                    out.append(_unreadable(path, error))
                continue
            for change in found:
                out.append(
                    GuardChange(
                        kind="worktree",
                        name=f"{path}/{change.path}",
                        was=change.was,
                        now=change.now,
                        restore=restore_path(path, change.path, change.was, baseline),
                        subtask_id=sid,
                    )
                )
        return out


def _unreadable(name: str, error: KairoError) -> GuardChange:
    return GuardChange(
        kind="unreadable",
        name=name,
        was=None,
        now=f"git could no longer read {name}: {error.message}",
        restore="",
    )


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _write_record(folder: Path, record: GuardRecord) -> str:
    """record.json, whole or not at all, and on disk before its event is appended."""
    folder.mkdir(parents=True, exist_ok=True)
    # Python's JSON, not pydantic's: a name git gives may hold any bytes (a lone surrogate
    # in the str), which `ensure_ascii` writes as an escape and reads back the same.
    content = json.dumps(record.model_dump(), ensure_ascii=True).encode()
    temporary = folder / "record.json.tmp"
    with open(temporary, "wb") as out:
        out.write(content)
        out.flush()
        os.fsync(out.fileno())
    temporary.replace(folder / "record.json")
    return hashlib.sha256(content).hexdigest()


def _read_record(folder: Path, recorded: ev.GuardRecorded) -> tuple[GuardRecord | None, str]:
    """The record, if it is the one the log names; else why not."""
    try:
        content = (folder / "record.json").read_bytes()
    except OSError:
        return None, "is gone"
    digest = hashlib.sha256(content).hexdigest()
    if digest != recorded.record_sha256:
        return None, f"was changed (its SHA-256 is now {digest})"
    return GuardRecord.model_validate(json.loads(content)), ""
