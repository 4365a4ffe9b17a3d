"""The constraint chain's composition rules and the built-in constraints, with no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.core import events as ev
from orchestrator.core.commands import KillAttempt
from orchestrator.core.constraints import (
    BUILT_IN,
    ResourceAction,
    ResourceContext,
    ResourceValidation,
    evaluate,
)
from orchestrator.core.decide import decide
from orchestrator.core.plan import AgentSpec, ExecutionLimits, Limits, ResolvedPlan, ResolvedSubtask
from tests.core.test_decide import BASE, feed, start


@dataclass
class Fixed:
    """A constraint that always answers the same, counting how often it was asked."""

    name: str
    action: ResourceAction
    asked: int = 0

    def validate(self, context: ResourceContext) -> ResourceValidation:
        self.asked += 1
        ok = self.action == ResourceAction.ALLOW
        return ResourceValidation(self.name, ok=ok, severity="over", reason=f"{self.name}: said so")

    def on_violation(self, validation: ResourceValidation) -> ResourceAction:
        return self.action


def context(**limits: object) -> ResourceContext:
    spec = ResolvedSubtask(
        id="a", title="a", prompt="", agent=AgentSpec(run="true"), limits=Limits(**limits)
    )  # type: ignore[arg-type]
    state = start(ResolvedPlan(name="p", subtasks=(spec,)))
    return ResourceContext(state=state, subtask_id="a", attempt=1, phase="running")


def test_the_most_severe_action_wins() -> None:
    chain = [
        Fixed("w", ResourceAction.WARN_CONTINUE),
        Fixed("g", ResourceAction.GRACEFUL_EXIT),
        Fixed("a", ResourceAction.ALLOW),
    ]
    verdict = evaluate(chain, context())
    assert verdict.action == ResourceAction.GRACEFUL_EXIT
    assert verdict.reason == "g: said so"
    assert [v.constraint for v, _ in verdict.violations] == ["w", "g"]


def test_the_first_emergency_stop_ends_the_evaluation() -> None:
    later = Fixed("later", ResourceAction.GRACEFUL_EXIT)
    verdict = evaluate([Fixed("stop", ResourceAction.EMERGENCY_STOP), later], context())
    assert verdict.action == ResourceAction.EMERGENCY_STOP
    assert later.asked == 0


def test_an_empty_or_allowing_chain_allows() -> None:
    assert evaluate([], context()).action == ResourceAction.ALLOW
    assert evaluate([Fixed("a", ResourceAction.ALLOW)], context()).violations == ()


def test_the_attempt_timeout_is_an_emergency_stop_past_its_limit() -> None:
    within = evaluate(
        BUILT_IN, ResourceContext(**{**context(timeout_s=3).__dict__, "attempt_elapsed_s": 2.9})
    )
    past = evaluate(
        BUILT_IN, ResourceContext(**{**context(timeout_s=3).__dict__, "attempt_elapsed_s": 3.1})
    )
    assert within.action == ResourceAction.ALLOW
    assert past.action == ResourceAction.EMERGENCY_STOP
    assert past.reason.startswith("timeout: attempt 1 ran longer than its limit of 3 s")


def running_state(**limits: object):  # type: ignore[no-untyped-def]
    spec = ResolvedSubtask(
        id="a", title="a", prompt="", agent=AgentSpec(run="true"), limits=Limits(**limits)
    )  # type: ignore[arg-type]
    state = start(
        ResolvedPlan(
            name="p", subtasks=(spec,), execution_limits=ExecutionLimits(token_budget=1000)
        )
    )
    return feed(
        state,
        [
            ev.SubtaskScheduled(subtask_id="a", start_commit=BASE),
            ev.WorkspaceCreated(subtask_id="a", path="/w/a", branch="b", commit=BASE),
            ev.AttemptStarted(
                subtask_id="a", attempt=1, idempotency_key="k", run_dir="/r", start_commit=BASE
            ),
            ev.AttemptPaneOpened(subtask_id="a", attempt=1, pane_id="%1", at=100.0),
        ],
    )


def test_decide_stops_an_attempt_past_its_timeout_and_kills_it() -> None:
    state = running_state(timeout_s=3)
    assert decide(state, now=102.0).events == ()
    stop = decide(state, now=104.0).events
    assert [type(e) for e in stop] == [ev.ConstraintViolated]
    assert stop[0].action == "EMERGENCY_STOP"  # type: ignore[union-attr]
    state = feed(state, stop)
    assert KillAttempt(subtask_id="a", attempt=1) in decide(state, now=105.0).commands
    assert decide(state, now=105.0).events == ()  # recorded once


def test_a_token_budget_warns_at_80_percent_then_ends_the_subtask() -> None:
    state = running_state(token_budget=100)
    state = feed(
        state,
        [
            ev.AttemptExited(subtask_id="a", attempt=1, exit_code=1, tokens=85),
            ev.AttemptCommitted(
                subtask_id="a", attempt=1, head_commit="h1", changed=True, tree="t1"
            ),
        ],
    )
    state = feed(state, decide(state).events)  # judged: sent back
    warned = decide(state).events
    assert [(type(e).__name__, getattr(e, "action", None)) for e in warned] == [
        ("ConstraintViolated", "WARN_CONTINUE"),
        ("AttemptStarted", None),
    ]
    state = feed(state, warned)
    state = feed(
        state,
        [
            ev.AttemptPaneOpened(subtask_id="a", attempt=2, pane_id="%2", at=1.0),
            ev.AttemptExited(subtask_id="a", attempt=2, exit_code=1, tokens=20),
            ev.AttemptCommitted(
                subtask_id="a", attempt=2, head_commit="h2", changed=True, tree="t2"
            ),
        ],
    )
    state = feed(state, decide(state).events)
    ended = feed(state, decide(state).events)
    assert ended.subtask("a").state == "failed"
    assert ended.subtask("a").reason == "token_budget: the subtask used 105 of its 100 tokens"
