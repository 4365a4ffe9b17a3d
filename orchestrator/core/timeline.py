"""When each subtask waited, ran, was checked and merged: the HTML report's timeline.

Pure, from the log's events and the time the store wrote each (the events themselves carry
few times of their own). A supervisor's absence (killed, then resumed) is a gap: drawn at a
fixed width, so that a night between a crash and its resume does not squeeze the work of
either side into a line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from orchestrator.core import events as ev
from orchestrator.core.plan import ResolvedPlan
from orchestrator.core.reasons import sentence

SpanKind = Literal[
    "waiting",  # for its dependencies to merge
    "queued",  # ready, for one of the `max_parallel` places
    "preparing",  # its worktree
    "agent",  # an attempt's agent at work
    "committing",  # what the attempt left, committed
    "verifying",  # the subtask's `verify`
    "merge_queue",  # accepted, for its turn to merge
    "integration",  # merged, `integration_verify` on the integration branch
]
MarkKind = Literal["merged", "conflicted", "failed", "skipped", "stopped"]

#: The share of the axis a gap takes at most, whatever its length.
GAP_SHARE = 0.05


@dataclass(frozen=True)
class LoggedEvent:
    """An event as the log holds it: its seq, and the unix time the store wrote it."""

    seq: int
    at: float
    event: ev.ExecutionEvent


def unix_time(created_at: str) -> float:
    """A store's timestamp ('2026-12-02T17:14:51.123456Z') as unix time."""
    return datetime.fromisoformat(created_at.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class Span:
    kind: SpanKind
    start: float
    end: float
    outcome: str = ""  # accepted, sent_back, failed, interrupted, running, paused, ...
    note: str = ""  # what a pointer over it says
    attempt: int | None = None


@dataclass(frozen=True)
class Mark:
    kind: MarkKind
    at: float
    note: str = ""


@dataclass(frozen=True)
class TimelineRow:
    subtask_id: str
    spans: tuple[Span, ...]
    marks: tuple[Mark, ...]


@dataclass(frozen=True)
class Gap:
    """No supervisor between `start` (the last sign of the one before: its last heartbeat,
    or in a log that does not say, its last event) and `end` (its resume)."""

    start: float
    end: float


@dataclass(frozen=True)
class Timeline:
    start: float
    end: float
    rows: tuple[TimelineRow, ...]
    gaps: tuple[Gap, ...]

    def position(self, moment: float) -> float:
        """Where `moment` is on the axis, from 0 to 1, gaps drawn at GAP_SHARE at most."""
        drawn = 0.0
        before = self.start
        moment = min(max(moment, self.start), self.end)
        for gap in self.gaps:
            if moment <= gap.start:
                break
            drawn += gap.start - before
            drawn += self._gap_width(gap) * min(1.0, (moment - gap.start) / _length(gap))
            before = gap.end
            if moment <= gap.end:
                return drawn / self._drawn_length
        drawn += max(0.0, moment - before)
        return drawn / self._drawn_length

    @property
    def _active(self) -> float:
        return (self.end - self.start) - sum(_length(gap) for gap in self.gaps)

    def _gap_width(self, gap: Gap) -> float:
        return min(_length(gap), GAP_SHARE * max(self._active, 1e-6))

    @property
    def _drawn_length(self) -> float:
        length = self._active + sum(self._gap_width(gap) for gap in self.gaps)
        return length if length > 0 else 1.0


def _length(gap: Gap) -> float:
    return max(gap.end - gap.start, 1e-9)


@dataclass
class _Row:
    """What the events said so far of one subtask."""

    spans: list[Span] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    scheduled: float | None = None
    attempt: int | None = None
    attempt_start: float = 0.0
    exited: float | None = None
    committed: float | None = None
    verified: float | None = None
    accepted: float | None = None  # its turn in the merge queue began
    merged: float | None = None  # its integration check began

    def close_attempt(self, at: float, outcome: str, note: str) -> None:
        if self.attempt is None:
            return
        number = self.attempt
        agent_end = self.exited if self.exited is not None else at
        said = f"attempt {number}: {note}"
        self.spans.append(Span("agent", self.attempt_start, agent_end, outcome, said, number))
        if self.exited is not None:
            commit_end = self.committed if self.committed is not None else at
            self.spans.append(Span("committing", self.exited, commit_end, outcome, "commit"))
        if self.committed is not None and self.verified is not None:
            self.spans.append(Span("verifying", self.committed, self.verified, outcome, "verify"))
        self.attempt = self.exited = self.committed = self.verified = None


def build_timeline(
    plan: ResolvedPlan, logged: Sequence[LoggedEvent], *, end: float | None = None
) -> Timeline:
    """The timeline of the log `logged`; `end`: the snapshot's time for an execution still
    running (else its last event's). Spans still open at the end have the outcome
    `running` if `end` is given, else `paused`."""
    start = logged[0].at if logged else 0.0
    last = logged[-1].at if logged else 0.0
    until = max(end, last) if end is not None else last
    rows = {spec.id: _Row() for spec in plan.subtasks}
    merged_at: dict[str, float] = {}
    gaps: list[Gap] = []
    previous = start
    checked = plan.integration_verify is not None  # a merge is then checked before it counts
    for item in logged:
        event = item.event
        if isinstance(event, ev.SupervisorStarted) and event.resumed and item.at > previous:
            gaps.append(Gap(_last_alive(event, previous, item.at), item.at))
        previous = item.at
        for subtask_id in ev.subtasks_named(event):
            if subtask_id in rows:
                _advance(subtask_id, rows[subtask_id], event, item.at, merged_at, checked=checked)
    # Subtasks wait from their first supervisor's start (before it, nothing could run).
    began = next((i.at for i in logged if isinstance(i.event, ev.SupervisorStarted)), start)
    open_outcome = "running" if end is not None else "paused"
    built = []
    for spec in plan.subtasks:
        row = rows[spec.id]
        ready = _ready_at(spec.depends_on, merged_at, began)
        spans = _waits(spec.depends_on, ready, row, began, until)
        _close_open(row, until, open_outcome)
        built.append(TimelineRow(spec.id, (*spans, *row.spans), tuple(row.marks)))
    return Timeline(start, until, tuple(built), tuple(gaps))


def _last_alive(started: ev.SupervisorStarted, last_event: float, resumed: float) -> float:
    """When the supervisor before `started` was last known alive: its last heartbeat, where
    the log says (it beats on after its last event, until it dies), else its last event."""
    heartbeat = started.previous_heartbeat_at
    if heartbeat is None:
        return last_event
    return min(max(heartbeat, last_event), resumed)


def _advance(
    subtask_id: str,
    row: _Row,
    event: ev.ExecutionEvent,
    at: float,
    merged_at: dict[str, float],
    *,
    checked: bool,
) -> None:
    match event:
        case ev.SubtaskScheduled():
            row.scheduled = at
        case ev.AttemptStarted(attempt=number):
            if row.scheduled is not None and not row.spans:
                row.spans.append(Span("preparing", row.scheduled, at, "", "its worktree"))
            row.attempt, row.attempt_start = number, at
        case ev.ResolutionStarted(attempt=number):
            # An agent's resolution of a conflict is an attempt like any other: drawn.
            row.attempt, row.attempt_start = number, at
        case ev.AttemptExited():
            row.exited = at
        case ev.AttemptCommitted():
            row.committed = at
        case ev.VerifyFinished():
            row.verified = at
        case ev.AttemptInterrupted():
            row.close_attempt(at, "interrupted", "interrupted (its supervisor stopped)")
        case ev.AttemptJudged(accepted=True):
            row.close_attempt(at, "accepted", "accepted")
            row.accepted = at
        case ev.AttemptJudged(reason=reason, final=final):
            said = sentence(reason) if reason is not None else "not accepted"
            row.close_attempt(at, "failed" if final else "sent_back", said)
        case ev.SubtaskMerged(diffstat=diffstat):
            _close_queue(row, at, "merged")
            row.marks.append(Mark("merged", at, diffstat or "no file changes"))
            if checked:
                row.merged = at
            else:
                merged_at[subtask_id] = at
        case ev.IntegrationVerified(exit_code=code):
            if row.merged is not None:
                outcome = "" if code == 0 else "failed"
                row.spans.append(Span("integration", row.merged, at, outcome, "integration_verify"))
                row.merged = None
            if code == 0:
                merged_at[subtask_id] = at
        case ev.IntegrationChecked(exit_code=0, subtask_ids=run):
            if row.merged is not None:
                note = (
                    f"integration_verify, with {len(run) - 1} other merge(s)"
                    if len(run) > 1
                    else "integration_verify"
                )
                row.spans.append(Span("integration", row.merged, at, "", note))
                row.merged = None
            merged_at[subtask_id] = at
        case ev.MergesUndone(culprit=culprit):
            if row.merged is not None:
                note = (
                    "integration_verify failed after its merge"
                    if subtask_id == culprit
                    else "merge undone: an earlier merge broke the check"
                )
                row.spans.append(Span("integration", row.merged, at, "failed", note))
                row.merged = None
            if subtask_id != culprit:
                row.accepted = at  # back in the merge queue
        case ev.SubtaskConflicted(conflicts=conflicts):
            _close_queue(row, at, "conflicted")
            paths = ", ".join(conflict.path for conflict in conflicts)
            row.marks.append(Mark("conflicted", at, paths))
        case ev.SubtaskFailed(reason=reason):
            _end(row, at, "failed", sentence(reason))
        case ev.SubtaskSkipped(reason=reason):
            _end(row, at, "skipped", sentence(reason))
        case ev.SubtaskStopped(reason=reason):
            _end(row, at, "stopped", sentence(reason))
        case _:
            pass


def _close_queue(row: _Row, at: float, outcome: str) -> None:
    if row.accepted is not None:
        row.spans.append(Span("merge_queue", row.accepted, at, outcome, "waiting to merge"))
        row.accepted = None


def _end(row: _Row, at: float, kind: MarkKind, note: str) -> None:
    row.close_attempt(at, kind, note)
    _close_queue(row, at, kind)
    row.marks.append(Mark(kind, at, note))


def _close_open(row: _Row, until: float, outcome: str) -> None:
    row.close_attempt(until, outcome, outcome)
    _close_queue(row, until, outcome)
    if row.merged is not None:
        row.spans.append(Span("integration", row.merged, until, outcome, "integration_verify"))


def _ready_at(depends_on: Sequence[str], merged_at: dict[str, float], start: float) -> float | None:
    """When the last of its dependencies merged (None: one has not)."""
    if not depends_on:
        return start
    times = [merged_at.get(dependency) for dependency in depends_on]
    return None if any(t is None for t in times) else max(t for t in times if t is not None)


def _waits(
    depends_on: Sequence[str], ready: float | None, row: _Row, start: float, until: float
) -> list[Span]:
    """Waiting for its dependencies, then for a place, up to its schedule (or its end)."""
    ended = row.marks[0].at if row.marks and row.scheduled is None else None
    stop = row.scheduled if row.scheduled is not None else (ended if ended is not None else until)
    spans = []
    names = ", ".join(depends_on)
    waited = min(ready if ready is not None else stop, stop)
    if depends_on and waited > start:
        spans.append(Span("waiting", start, waited, "", f"waiting for {names} to merge"))
    if ready is not None and stop > ready:
        spans.append(Span("queued", ready, stop, "", "waiting for a place"))
    return spans
