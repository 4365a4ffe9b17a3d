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
    token_allowance,
)
from orchestrator.core.decide import decide
from orchestrator.core.plan import AgentSpec, ExecutionLimits, Limits, ResolvedPlan, ResolvedSubtask
from orchestrator.core.reasons import ReasonCode
from orchestrator.core.reasons import sentence_or_none as said
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
    assert said(verdict.reason) == "g: said so"
    assert verdict.reason is not None and verdict.reason.code is ReasonCode.OTHER
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
    assert (said(past.reason) or "").startswith(
        "timeout: attempt 1 ran longer than its limit of 3 s"
    )


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
    assert said(ended.subtask("a").reason) == "token_budget: the subtask used 105 of its 100 tokens"


def test_a_running_attempt_whose_stream_spent_the_budget_is_stopped_at_once() -> None:
    state = running_state(token_budget=100)
    assert [e.action for e in decide(state, now=101.0, live_tokens={"a": 79}).events] == []  # type: ignore[attr-defined]
    near = decide(state, now=101.0, live_tokens={"a": 80}).events
    assert [e.action for e in near] == ["WARN_CONTINUE"]  # type: ignore[attr-defined]
    state = feed(state, near)
    stop = decide(state, now=101.0, live_tokens={"a": 100}).events
    assert [(e.action, said(e.reason)) for e in stop] == [  # type: ignore[attr-defined]
        ("EMERGENCY_STOP", "token_budget: the subtask used 100 of its 100 tokens")
    ]
    state = feed(state, stop)
    assert KillAttempt(subtask_id="a", attempt=1) in decide(state, now=102.0).commands


def test_the_execution_budget_stops_a_running_attempt_its_live_count_spent() -> None:
    state = running_state()  # the execution's budget: 1000, and no subtask budget
    assert decide(state, now=101.0, live_tokens={"a": 800}).events[0].action == "WARN_CONTINUE"  # type: ignore[union-attr]
    stop = decide(state, now=101.0, live_tokens={"a": 1000}).events
    assert [e.action for e in stop if isinstance(e, ev.ConstraintViolated)] == ["EMERGENCY_STOP"]
    assert "the execution used 1000 of its 1000 tokens" in said(stop[0].reason)  # type: ignore[union-attr]


def test_an_attempt_its_filter_stopped_at_its_allowance_is_set_aside_and_not_retried() -> None:
    state = running_state(token_budget=100)
    state = feed(
        state,
        [
            ev.AttemptExited(
                subtask_id="a",
                attempt=1,
                exit_code=143,
                tokens=104,
                result="token_budget",
                is_error=True,
            )
        ],
    )
    stop = decide(state, now=101.0).events
    assert [(type(e).__name__, e.action) for e in stop] == [  # type: ignore[union-attr]
        ("ConstraintViolated", "EMERGENCY_STOP")
    ]
    state = feed(state, stop)
    assert state.subtask("a").current_attempt.stopped_by is not None  # type: ignore[union-attr]
    ref = "refs/kairo/stopped/abc/a/1"
    state = feed(
        state,
        [
            ev.AttemptCommitted(
                subtask_id="a", attempt=1, head_commit=BASE, changed=False, recovery_ref=ref
            )
        ],
    )
    state = feed(state, decide(state).events)
    view = state.subtask("a")
    assert (view.state, len(view.attempts)) == ("failed", 1)
    assert said(view.reason) == (
        f"token_budget: the subtask used 104 of its 100 tokens; its partial work is on {ref}"
    )


def test_a_limit_met_before_an_attempt_runs_fails_the_subtask_and_touches_no_attempt() -> None:
    spec = ResolvedSubtask(id="a", title="a", prompt="", agent=AgentSpec(run="true"))
    plan = ResolvedPlan(name="p", subtasks=(spec,), execution_limits=ExecutionLimits(timeout_s=5))
    state = feed(
        start(plan),
        [
            ev.SupervisorStarted(pid=1, host="h", at=100.0),
            ev.SubtaskScheduled(subtask_id="a", start_commit=BASE),
            ev.WorkspaceCreated(subtask_id="a", path="/w/a", branch="b", commit=BASE),
        ],
    )
    events = decide(state, now=200.0).events  # resumed long after the execution's limit
    state = feed(state, events)  # an emergency stop of an attempt not started: no crash
    assert state.subtask("a").state == "failed" and state.subtask("a").attempts == ()
    assert (said(state.subtask("a").reason) or "").startswith("timeout: the execution ran longer")


def test_an_attempt_may_spend_what_the_tighter_budget_has_left() -> None:
    state = running_state(token_budget=300)  # the execution's: 1000
    assert token_allowance(state, "a") == 300
    state = feed(state, [ev.AttemptExited(subtask_id="a", attempt=1, exit_code=1, tokens=250)])
    assert token_allowance(state, "a") == 50
    unbounded = running_state()
    assert token_allowance(unbounded, "a") == 1000


def test_what_an_interrupted_attempt_had_used_still_counts() -> None:
    state = running_state(token_budget=100)
    state = feed(
        state,
        [
            ev.AttemptInterrupted(
                subtask_id="a", attempt=1, recovery_ref=None, rerun=True, tokens=90
            )
        ],
    )
    assert state.subtask("a").tokens == 90 and token_allowance(state, "a") == 10
