"""`plan.yaml` (docs/plan.md) as written, and `load_plan`, which turns it into the
ResolvedPlan the supervisor runs.

Loading has three layers, each reporting every problem it finds with `file:line:col`:
YAML syntax (plan_yaml), the shape of each key (the `Raw*` models of plan_raw, worded
by plan_errors), and the rules between keys (ids, dependencies, agents, splits: `_Loader`).
A plan with any problem raises one PlanError listing them all in file order.

Choices plan.md leaves open, made the way a user would expect:
- Values keep their YAML types (strict): `max_parallel: "4"` is an error, not 4.
- `depends_on`, `files` and `split.files` take one string or a list.
- Durations: `30m`, `90s`, `4h`, `1.5h`, `1h30m`; a bare number is seconds.
- Globs match tracked POSIX paths from the repository root with `**`, `{a,b}`, leading-dot
  names matched like any other (as git's pathspecs do) and `!glob` to exclude.
- `worktree_root` relative to the repository must start with `..` once normalized; an
  absolute one cannot be checked without the repository, so the runtime checks it.
- In a subtask, `verify: null`, `limits: {timeout: null}` (or `token_budget: null`) and
  `agent: {run: null}` clear what the plan sets; `agent: {kind: null}` keeps its kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from orchestrator.core.ids import ID_PATTERN
from orchestrator.core.plan import MAX_SUBTASKS, ResolvedPlan
from orchestrator.core.plan_errors import Problems, describe_value
from orchestrator.core.plan_raw import (
    RawAgent,
    RawExecutionLimits,
    RawLimits,
    RawNetwork,
    RawPlan,
    RawReview,
    RawSandbox,
    RawSplit,
    RawSubtask,
    RawWorktree,
)
from orchestrator.core.plan_resolve import Resolver
from orchestrator.core.plan_yaml import parse_yaml

_SECTIONS = {
    "agent": tuple(RawAgent.model_fields),
    "limits": tuple(RawLimits.model_fields),
    "execution_limits": tuple(RawExecutionLimits.model_fields),
    "split": tuple(RawSplit.model_fields),
}
_PLAN_KEYS = {
    "": tuple(RawPlan.model_fields),
    "worktree": tuple(RawWorktree.model_fields),
    "sandbox": tuple(RawSandbox.model_fields),
    "network": tuple(RawNetwork.model_fields),
    "review": tuple(RawReview.model_fields),
    **_SECTIONS,
}
_SUBTASK_KEYS = {"": tuple(RawSubtask.model_fields), **_SECTIONS}


@dataclass(frozen=True)
class LoadedPlan:
    plan: ResolvedPlan
    warnings: tuple[str, ...] = ()  # `file:line:col: sentence`, in file order
    # `checks_import_checkout`: a key of `validate` and `start` only, so no part of the
    # plan the event log records
    checks_import_checkout: str = "warn"


def load_plan(text: str, filename: str, tracked_files: Sequence[str] | None) -> LoadedPlan:
    """Parse, check and resolve a plan; PlanError lists every problem found.

    `tracked_files` are the POSIX paths tracked at the base commit, relative to the
    repository root; None when there is no repository to ask (then `split` is an error and
    `files` globs resolve to nothing).
    """
    doc = parse_yaml(text, filename)
    problems = Problems(filename, doc)
    if not isinstance(doc.data, dict):
        found = "empty" if doc.data is None else describe_value(doc.data)
        problems.at_value(
            (), f"the plan must be a mapping of version, name, subtasks...; it is {found}"
        )
        problems.raise_if_any()
    items = doc.data.get("subtasks")
    items = items if isinstance(items, list) else []
    if len(items) > MAX_SUBTASKS:  # at once: checking a million of them would take minutes
        problems.at_key(
            ("subtasks",), f"the plan has {len(items):,} subtasks; at most {MAX_SUBTASKS:,}"
        )
        problems.raise_if_any()
    head = problems.validate(RawPlan, doc.data, (), "", _PLAN_KEYS)
    subtasks = [
        problems.validate(RawSubtask, item, ("subtasks", i), _subject(item), _SUBTASK_KEYS)
        for i, item in enumerate(items)
    ]
    default_agent, agent_known = _default_agent(head, doc.data)
    plan, warnings = Resolver(
        problems,
        head,
        subtasks,
        [_raw_id(item) for item in items],
        default_agent,
        agent_known,
        tracked_files,
    ).resolve()
    strictness = head.checks_import_checkout if head is not None else "warn"
    return LoadedPlan(plan=plan, warnings=warnings, checks_import_checkout=strictness)


def _raw_id(item: Any) -> str | None:
    """The id as written, even when its subtask is invalid: dependencies on a subtask
    that has some other problem are not reported as unknown too.
    """
    value = item.get("id") if isinstance(item, dict) else None
    return value if isinstance(value, str) else None


def _subject(item: Any) -> str:
    value = _raw_id(item)
    return f"subtask '{value}': " if value and ID_PATTERN.fullmatch(value) else ""


def _default_agent(head: RawPlan | None, data: dict[str, Any]) -> tuple[RawAgent | None, bool]:
    """The plan's `agent`, and whether it is usable. When some other top-level key failed
    validation the plan has no `head`, but its agent may still be sound: checking the
    subtasks' agents against it then reports their problems in the same round.
    """
    if head is not None:
        return head.agent, True
    if data.get("agent") is None:
        return None, True
    try:
        return RawAgent.model_validate(data["agent"]), True
    except ValidationError:  # reported already, by the plan's own validation
        return None, False


__all__ = ["LoadedPlan", "RawAgent", "RawPlan", "RawSubtask", "load_plan"]
