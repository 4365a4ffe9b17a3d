"""Resource constraints: each looks at an attempt's context and says how far over it is.

A chain is evaluated in order; the most severe action wins and the first EMERGENCY_STOP
ends the evaluation. The context is numbers and a state snapshot, never an agent's tool
history, so every constraint is a pure function and tests in microseconds. Actions:

    ALLOW           nothing to say
    WARN_CONTINUE   recorded once, the work goes on (a budget 80% spent)
    GRACEFUL_EXIT   no further attempt starts; a running one may finish
    EMERGENCY_STOP  the running attempt is killed now (its partial work is saved), and no
                    further attempt starts

Users add their own constraint through the `kairo_orch.constraints` entry point group: an
object with `name`, `validate(context)` and `on_violation(validation)` (docs/operations.md).
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from orchestrator.core import events as ev
from orchestrator.core.reasons import Reason, ReasonCode, as_reason, sentence
from orchestrator.core.state import ExecutionState

Phase = Literal["running", "next_attempt"]
WARN_FRACTION = 0.8


class ResourceAction(enum.IntEnum):
    ALLOW = 0
    WARN_CONTINUE = 1
    GRACEFUL_EXIT = 2
    EMERGENCY_STOP = 3


@dataclass(frozen=True)
class ResourceContext:
    state: ExecutionState
    subtask_id: str
    attempt: int  # the running attempt, or the one about to start
    phase: Phase
    attempt_elapsed_s: float = 0.0
    execution_elapsed_s: float = 0.0
    #: The whole execution's tokens, from `state` unless given: `decide` looks at every
    #: attempt of a state at once, and the sum over all of them would make that quadratic.
    #: Running attempts' live counts included (`decide`'s `live_tokens`).
    execution_tokens: int = -1
    #: What the running attempt has used so far, by its stream's live count: not yet in
    #: `state`, which learns an attempt's usage when it exits.
    attempt_tokens: int = 0

    def __post_init__(self) -> None:
        if self.execution_tokens < 0:
            object.__setattr__(self, "execution_tokens", execution_tokens(self.state))

    @property
    def subtask_tokens(self) -> int:
        return self.state.subtask(self.subtask_id).tokens + self.attempt_tokens


def execution_tokens(state: ExecutionState, live: Mapping[str, int] | None = None) -> int:
    """Every attempt's tokens, and `live`: running attempts' counts so far, by subtask."""
    return sum(view.tokens for view in state.subtasks.values()) + sum((live or {}).values())


def token_allowance(state: ExecutionState, subtask_id: str) -> int | None:
    """What the subtask's next attempt may spend before a budget is spent: the least of
    what its own budget and the execution's have left (None when neither is set)."""
    left = []
    budget = state.spec(subtask_id).limits.token_budget
    if budget is not None:
        left.append(budget - state.subtask(subtask_id).tokens)
    budget = state.plan.execution_limits.token_budget
    if budget is not None:
        left.append(budget - execution_tokens(state))
    return max(0, min(left)) if left else None


@dataclass(frozen=True)
class ResourceValidation:
    constraint: str
    ok: bool
    severity: Literal["ok", "near", "over"] = "ok"
    # Built-in constraints give a Reason (timeout, max_attempts, token_budget); a user's
    # may give a plain sentence, which is kept whole (reasons.as_reason).
    reason: Reason | str = ""


class ResourceConstraint(Protocol):
    name: str

    def validate(self, context: ResourceContext) -> ResourceValidation: ...

    def on_violation(self, validation: ResourceValidation) -> ResourceAction: ...


@dataclass(frozen=True)
class Verdict:
    action: ResourceAction
    violations: tuple[tuple[ResourceValidation, ResourceAction], ...] = ()

    @property
    def reason(self) -> Reason | None:
        """The reason of the violation that decided the action (None: nothing to say)."""
        for validation, action in self.violations:
            if action == self.action:
                return as_reason(validation.reason)
        return None


def evaluate(chain: Sequence[ResourceConstraint], context: ResourceContext) -> Verdict:
    action = ResourceAction.ALLOW
    violations: list[tuple[ResourceValidation, ResourceAction]] = []
    for constraint in chain:
        validation = constraint.validate(context)
        if validation.ok:
            continue
        answer = constraint.on_violation(validation)
        violations.append((validation, answer))
        action = max(action, answer)
        if answer == ResourceAction.EMERGENCY_STOP:
            break
    return Verdict(action=action, violations=tuple(violations))


def _ok(name: str) -> ResourceValidation:
    return ResourceValidation(constraint=name, ok=True)


class _Timeout(abc.ABC):
    """A wall clock limit: past it, whatever runs is stopped at once."""

    name = "timeout"

    @abc.abstractmethod
    def limit_and_elapsed(self, context: ResourceContext) -> tuple[float | None, float]: ...

    @abc.abstractmethod
    def what(self, context: ResourceContext) -> str: ...

    def validate(self, context: ResourceContext) -> ResourceValidation:
        limit, elapsed = self.limit_and_elapsed(context)
        if limit is None or elapsed <= limit:
            return _ok(self.name)
        reason = Reason(
            code=ReasonCode.TIMEOUT,
            detail=f"{self.what(context)} ran longer than its limit of {limit:g} s",
        )
        return ResourceValidation(self.name, ok=False, severity="over", reason=reason)

    def on_violation(self, validation: ResourceValidation) -> ResourceAction:
        return ResourceAction.EMERGENCY_STOP


class AttemptTimeout(_Timeout):
    """The wall clock of one attempt (`limits.timeout`)."""

    name = "attempt_timeout"

    def limit_and_elapsed(self, context: ResourceContext) -> tuple[float | None, float]:
        if context.phase != "running":
            return None, 0.0
        limit = context.state.spec(context.subtask_id).limits.timeout_s
        return limit, context.attempt_elapsed_s

    def what(self, context: ResourceContext) -> str:
        return f"attempt {context.attempt}"


class ExecutionTimeout(_Timeout):
    """The wall clock of the whole execution (`execution_limits.timeout`)."""

    name = "execution_timeout"

    def limit_and_elapsed(self, context: ResourceContext) -> tuple[float | None, float]:
        return context.state.plan.execution_limits.timeout_s, context.execution_elapsed_s

    def what(self, context: ResourceContext) -> str:
        return "the execution"


class MaxAttempts:
    """How many attempts a subtask gets (`limits.max_attempts`)."""

    name = "max_attempts"

    def validate(self, context: ResourceContext) -> ResourceValidation:
        limit = context.state.spec(context.subtask_id).limits.max_attempts
        if context.phase != "next_attempt" or context.attempt <= limit:
            return _ok(self.name)
        last = context.state.subtask(context.subtask_id).current_attempt
        why = (
            f"; the last one: {sentence(last.reason)}"
            if last is not None and last.reason is not None
            else ""
        )
        return ResourceValidation(
            self.name,
            ok=False,
            severity="over",
            reason=Reason(
                code=ReasonCode.MAX_ATTEMPTS, detail=f"{limit} attempt(s) were not accepted{why}"
            ),
        )

    def on_violation(self, validation: ResourceValidation) -> ResourceAction:
        return ResourceAction.GRACEFUL_EXIT


class _TokenBudget(abc.ABC):
    name = "token_budget"
    scope = ""

    @abc.abstractmethod
    def budget(self, context: ResourceContext) -> int | None: ...

    @abc.abstractmethod
    def used(self, context: ResourceContext) -> int: ...

    def validate(self, context: ResourceContext) -> ResourceValidation:
        budget = self.budget(context)
        used = self.used(context)
        if budget is None or used < WARN_FRACTION * budget:
            return _ok(self.name)
        over = used >= budget
        return ResourceValidation(
            self.name,
            ok=False,
            severity="over" if over else "near",
            reason=Reason(
                code=ReasonCode.TOKEN_BUDGET,
                detail=(
                    f"{self.scope} used {used} of its {budget} tokens"
                    + ("" if over else f" ({100 * used // budget}%)")
                ),
            ),
        )

    def on_violation(self, validation: ResourceValidation) -> ResourceAction:
        # Spent: a running attempt is ended now, as a timeout ends one (its stream counted
        # past the budget), and none follows.
        if validation.severity == "over":
            return ResourceAction.EMERGENCY_STOP
        return ResourceAction.WARN_CONTINUE


class SubtaskTokenBudget(_TokenBudget):
    name = "subtask_token_budget"
    scope = "the subtask"

    def budget(self, context: ResourceContext) -> int | None:
        return context.state.spec(context.subtask_id).limits.token_budget

    def used(self, context: ResourceContext) -> int:
        return context.subtask_tokens


class ExecutionTokenBudget(_TokenBudget):
    name = "execution_token_budget"
    scope = "the execution"

    def budget(self, context: ResourceContext) -> int | None:
        return context.state.plan.execution_limits.token_budget

    def used(self, context: ResourceContext) -> int:
        return context.execution_tokens


BUILT_IN: tuple[ResourceConstraint, ...] = (
    ExecutionTimeout(),
    AttemptTimeout(),
    MaxAttempts(),
    SubtaskTokenBudget(),
    ExecutionTokenBudget(),
)


def violation_events(
    state: ExecutionState, context: ResourceContext, verdict: Verdict
) -> Iterator[ev.ConstraintViolated]:
    """Every validation that was not ALLOW, once (a warning is not repeated)."""
    for validation, action in verdict.violations:
        if action == ResourceAction.ALLOW:
            continue
        if action == ResourceAction.WARN_CONTINUE:
            if f"{validation.constraint}:{context.subtask_id}" in state.warned:
                continue
        elif action != verdict.action:
            continue  # a lesser exit beside the one that decides says nothing more
        if context.phase == "next_attempt":  # nothing runs to stop: no further attempt
            action = min(action, ResourceAction.GRACEFUL_EXIT)
        yield ev.ConstraintViolated(
            constraint=validation.constraint,
            action=action.name,  # type: ignore[arg-type]
            reason=as_reason(validation.reason),
            subtask_id=context.subtask_id,
            attempt=context.attempt,
        )
