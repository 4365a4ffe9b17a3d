"""The agenda against the scan it replaces: on generated histories, an agenda advanced
event by event holds what one sorted anew holds, and `decide` through it answers what
the scanning `decide` of before (scan_decide.py) answered, at every step."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.agenda import Agenda
from orchestrator.core.continuation import AUTHENTICATION_FAILED
from orchestrator.core.decide import decide
from orchestrator.core.lifecycle import Move, allowed
from orchestrator.core.plan import AgentSpec, ResolvedPlan, ResolvedSubtask
from orchestrator.core.reasons import Reason, ReasonCode
from orchestrator.core.state import ExecutionState, apply
from tests.core import scan_decide
from tests.core.integration_answers import check_answer, undo_answer
from tests.core.test_decide import World, start

STEPS = 120


@st.composite
def plans(draw: st.DrawFn) -> ResolvedPlan:
    size = draw(st.integers(1, 9))
    subtasks = []
    for i in range(size):
        earlier = [f"s{j}" for j in range(i)]
        deps = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=2)) if earlier else []
        subtasks.append(
            ResolvedSubtask(
                id=f"s{i}",
                title=f"s{i}",
                prompt="",
                depends_on=tuple(deps),
                # Two programs, so that one logged out leaves the other's subtasks alone.
                agent=AgentSpec(kind="shell", run="true", binary=draw(st.sampled_from(["a", "b"]))),
                verify=draw(st.sampled_from([None, "check"])),
                allow_empty=draw(st.booleans()),
            )
        )
    return ResolvedPlan.model_validate(
        {
            "name": "p",
            "max_parallel": draw(st.integers(1, 4)),
            "merge_order": draw(st.sampled_from(["plan", "completion"])),
            "integration_verify": draw(st.sampled_from([None, "it"])),
            "integration_batch": draw(st.integers(1, 4)),
            "subtasks": subtasks,
        }
    )


def answer(draw: st.DrawFn, state: ExecutionState, command: cmd.Command) -> list[ev.ExecutionEvent]:
    """What the edge answers, healthy or not: the outcomes drawn."""
    sid = command.subtask_id
    merging = command.subtask_ids if isinstance(command, cmd.MergeSubtask) else (sid,)
    if draw(st.integers(0, 19)) == 0 and sid and not isinstance(command, cmd.ReleaseWorkspace):
        # A step that failed: a check's fails every merge waiting for it (supervisor.py).
        checking = isinstance(command, cmd.CheckIntegration | cmd.UndoMerges)
        return [
            ev.SubtaskFailed(subtask_id=failed, reason=Reason(code=ReasonCode.OTHER, detail="x"))
            for failed in (state.unverified if checking else (sid,))
        ]
    world = World(
        exit_codes={sid: draw(st.sampled_from([0, 0, 1]))},
        unchanged=[sid] if draw(st.integers(0, 3)) == 0 else [],
        conflicts=[s for s in merging if draw(st.integers(0, 5)) == 0],
        verify_fails=[sid] if draw(st.integers(0, 3)) == 0 else [],
        results={sid: (AUTHENTICATION_FAILED, True)} if draw(st.integers(0, 15)) == 0 else {},
    )
    match command:
        case cmd.CreateIntegrationBranch():
            return [ev.IntegrationBranchCreated(branch="i", commit="b" * 40)]
        case cmd.CheckIntegration():
            # A failure drawn for some runs and not others: a check that is no function
            # of the tree, which the queue must survive as well.
            broken = command.subtask_ids if draw(st.integers(0, 2)) == 0 else ()
            return [check_answer(state, command, broken)]
        case cmd.UndoMerges():
            return [undo_answer(state)]
        case cmd.KillAttempt():
            return []
    return world.answer(state, command)


def disturbance(draw: st.DrawFn, state: ExecutionState) -> list[ev.ExecutionEvent]:
    """Now and then what a stop or a recovery records: a stop, an interrupted attempt, a
    subtask run again."""
    roll = draw(st.integers(0, 39))
    if roll == 0 and state.stop is None:
        return [
            ev.StopRequested(mode=draw(st.sampled_from(["graceful", "now"])), source="t", at=1.0)
        ]
    running = [v for v in state.subtasks.values() if v.state == "running" and v.current_attempt]
    if roll == 1 and running:
        view = draw(st.sampled_from(running))
        attempt = view.current_attempt
        assert attempt is not None
        if not attempt.finished:
            interrupted = ev.AttemptInterrupted(
                subtask_id=view.id,
                attempt=attempt.number,
                recovery_ref=None,
                rerun=draw(st.booleans()),
            )
            return [interrupted]
    stopped = [v for v in state.subtasks.values() if allowed(Move.RERUN, v.state) and v.attempts]
    if roll == 2 and stopped and state.ended is None:
        return [ev.SubtaskRerun(subtask_id=draw(st.sampled_from(stopped)).id)]
    return []


def held(agenda: Agenda) -> dict[str, object]:
    """What an agenda holds, to compare one advanced with one sorted anew."""
    return {
        "members": {g.value: sorted(ids) for g, ids in agenda.members.items()},
        "ready": list(agenda.ready),
        "pending_by_program": {p: sorted(i) for p, i in agenda.pending_by_program.items() if i},
        "tokens": agenda.total_tokens,
        "merge_head": agenda.merge_head,
    }


def folded(state: ExecutionState, events: list[ev.ExecutionEvent]) -> ExecutionState:
    for event in events:
        state = apply(state, event, state.seq + 1)
    return state


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans(), data=st.data())
def test_decide_through_an_advanced_agenda_answers_as_the_scan_did(
    plan: ResolvedPlan, data: st.DataObject
) -> None:
    state = start(plan)
    agenda = Agenda.of(state)
    for _ in range(STEPS):
        assert held(agenda) == held(Agenda.of(state))
        decision = decide(state, agenda=agenda)
        assert decision == scan_decide.decide(state)
        events = list(decision.events) or disturbance(data.draw, state)
        if not events and decision.commands:
            command = data.draw(st.sampled_from(decision.commands))
            events = answer(data.draw, state, command)
        if not events:
            if not decision.commands:
                break  # ended, or waiting on nothing this history answers
            continue
        before = state
        state = folded(state, events)
        if len(state.anomalies) > len(before.anomalies):
            state = before  # a move the journal would refuse: not part of any history
            continue
        agenda.advance(events, state)
