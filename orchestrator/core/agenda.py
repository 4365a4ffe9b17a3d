"""The subtasks each part of `decide` looks at, kept current event by event.

Deciding by scanning every subtask after every event makes a plan's cost grow with its
square. The agenda sorts the subtasks by what can happen to them next (waiting for their
dependencies, ready to start, running, waiting to merge or to be released), so that
`decide` looks only at the few each step concerns: the running ones (at most
`max_parallel`), the first ready ones, the head of the merge queue.

It is a cache of the state and nothing more: `Agenda.of(state)` sorts every subtask, and
`advance` sorts again only those the events touched and the subtasks that depend on them,
which is all an event can change (a property test holds the two equal on generated
histories). Mutable, unlike the state: it is advanced once an append is durable.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from orchestrator.core import events as ev
from orchestrator.core.continuation import AUTHENTICATION_FAILED
from orchestrator.core.dag import merge_order
from orchestrator.core.resolution import awaiting_resolution, ended_unmerged
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import ACTIVE, TERMINAL, SubtaskView

Program = tuple[str, str | None]  # an agent program: (kind, binary)


class Group(Enum):
    PENDING = "pending"
    READY = "ready"  # pending, every dependency merged
    BLOCKED = "blocked"  # pending, a dependency ended without merging: to be skipped
    ACTIVE = "active"  # holds one of the `max_parallel` places
    SUCCEEDED = "succeeded"  # accepted, waiting for its merge
    TO_RELEASE = "to_release"  # merged, its worktree still there
    UNSETTLED = "unsettled"  # the execution cannot end while it is here
    LOGGED_OUT = "logged_out"  # its last attempt's agent could not log in
    TO_RESOLVE = "to_resolve"  # conflicted, an agent's resolution of it to come


@dataclass
class Agenda:
    ids: tuple[str, ...]  # in the plan as written
    position: dict[str, int]  # in `ids`
    dependents: dict[str, tuple[str, ...]]
    depends_on: dict[str, tuple[str, ...]]
    program: dict[str, Program]
    merge_sequence: tuple[str, ...]  # `merge_order: plan`
    merge_position: dict[str, int]  # in `merge_sequence`
    members: dict[Group, set[str]] = field(default_factory=lambda: {g: set() for g in Group})
    ready: list[int] = field(default_factory=list)  # READY's positions, sorted
    pending_by_program: dict[Program, set[str]] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    total_tokens: int = 0
    merge_head: int = 0  # where the first subtask of merge_sequence not yet ended is
    _groups: dict[str, frozenset[Group]] = field(default_factory=dict)
    _unchecked: tuple[str, ...] = ()  # the state's conflicted_unchecked, as last sorted

    @classmethod
    def of(cls, state: ExecutionState) -> Agenda:
        plan = state.plan
        dependents: dict[str, list[str]] = {s.id: [] for s in plan.subtasks}
        for spec in plan.subtasks:
            for dependency in spec.depends_on:
                dependents[dependency].append(spec.id)
        ids = tuple(s.id for s in plan.subtasks)
        sequence = merge_order(plan)
        agenda = cls(
            ids=ids,
            position={sid: i for i, sid in enumerate(ids)},
            dependents={sid: tuple(later) for sid, later in dependents.items()},
            depends_on={s.id: s.depends_on for s in plan.subtasks},
            program={s.id: (s.agent.kind, s.agent.binary) for s in plan.subtasks},
            merge_sequence=sequence,
            merge_position={sid: i for i, sid in enumerate(sequence)},
        )
        agenda._sort(state, state.subtasks)
        agenda._unchecked = state.conflicted_unchecked
        return agenda

    def advance(self, events: Iterable[ev.ExecutionEvent], state: ExecutionState) -> None:
        """Sort again what `events`, now folded into `state`, may have moved.

        An event that names subtasks changes those alone (and whether their
        dependents may start); any other, or a re-run (which un-skips its dependents),
        is taken to change anything: such events are few in an execution.
        """
        touched: set[str] = set()
        for event in events:
            named = ev.subtasks_named(event)
            if not named or isinstance(event, ev.SubtaskRerun):
                self._sort(state, state.subtasks)
                self._unchecked = state.conflicted_unchecked
                return
            for subtask_id in named:
                touched.add(subtask_id)
                touched.update(self.dependents[subtask_id])
        # A conflict with merges still to be checked is settled by what becomes of them, an
        # event that need not name the conflicted subtask (integration_fold.py): whether
        # its dependents are blocked changes with it.
        for subtask_id in set(self._unchecked) ^ set(state.conflicted_unchecked):
            touched.add(subtask_id)
            touched.update(self.dependents[subtask_id])
        self._unchecked = state.conflicted_unchecked
        self._sort(state, touched)

    def _sort(self, state: ExecutionState, subtask_ids: Iterable[str]) -> None:
        earliest = self.merge_head
        for sid in subtask_ids:
            view = state.subtask(sid)
            self._place(sid, self._groups_of(state, view))
            self.total_tokens += view.tokens - self.tokens.get(sid, 0)
            self.tokens[sid] = view.tokens
            position = self.merge_position[sid]
            if view.state not in TERMINAL and position < earliest:
                earliest = position  # a re-run subtask: the queue waits for it again
        self.merge_head = earliest
        while self.merge_head < len(self.merge_sequence):
            head = self.merge_sequence[self.merge_head]
            if state.subtask(head).state not in TERMINAL:
                break
            self.merge_head += 1

    def _groups_of(self, state: ExecutionState, view: SubtaskView) -> frozenset[Group]:
        groups: set[Group] = set()
        if view.state == "pending":
            groups.add(Group.PENDING)
            dependencies = [state.subtask(d) for d in self.depends_on[view.id]]
            if all(d.state == "merged" for d in dependencies):
                groups.add(Group.READY)
            if any(ended_unmerged(state, d) for d in dependencies):
                groups.add(Group.BLOCKED)
        elif view.state in ACTIVE:
            groups.add(Group.ACTIVE)
        elif view.state == "succeeded":
            groups.add(Group.SUCCEEDED)
        if view.state == "merged" and view.worktree is not None:
            groups.add(Group.TO_RELEASE)
        if awaiting_resolution(state, view):
            groups.add(Group.TO_RESOLVE)
        if view.state not in TERMINAL or groups & {Group.TO_RELEASE, Group.TO_RESOLVE}:
            groups.add(Group.UNSETTLED)
        attempt = view.current_attempt
        if attempt is not None and attempt.result == AUTHENTICATION_FAILED:
            groups.add(Group.LOGGED_OUT)
        return frozenset(groups)

    def _place(self, subtask_id: str, groups: frozenset[Group]) -> None:
        before = self._groups.get(subtask_id, frozenset())
        if groups == before:
            return
        self._groups[subtask_id] = groups
        position = self.position[subtask_id]
        for group in before - groups:
            self.members[group].discard(subtask_id)
            if group is Group.READY:
                del self.ready[bisect.bisect_left(self.ready, position)]
        for group in groups - before:
            self.members[group].add(subtask_id)
            if group is Group.READY:
                bisect.insort(self.ready, position)
        by_program = self.pending_by_program.setdefault(self.program[subtask_id], set())
        if Group.PENDING in groups:
            by_program.add(subtask_id)
        else:
            by_program.discard(subtask_id)

    # What decide asks.

    def in_plan_order(self, subtask_ids: Iterable[str]) -> list[str]:
        return sorted(subtask_ids, key=self.position.__getitem__)

    def group(self, group: Group) -> list[str]:
        """The group's subtasks in plan order."""
        return self.in_plan_order(self.members[group])

    def ready_in_plan_order(self) -> Iterator[str]:
        return (self.ids[position] for position in list(self.ready))

    def logged_out(self) -> dict[Program, str]:
        """Each program an attempt could not log in with, and its first such subtask."""
        found: dict[Program, str] = {}
        for sid in self.group(Group.LOGGED_OUT):
            found.setdefault(self.program[sid], sid)
        return found
