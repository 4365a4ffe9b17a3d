"""The plan as written: the pydantic models of its sections (`Raw*`), with every check a
value can have on its own (types, ranges, durations, ids, branch names). The rules
between keys are plan_resolve's; loading a file is plan_file's."""

from __future__ import annotations

import posixpath
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from orchestrator.core.branch_names import branch_name_problem
from orchestrator.core.durations import EXPECTED as DURATION_EXPECTED
from orchestrator.core.durations import parse_duration
from orchestrator.core.ids import ID_PATTERN
from orchestrator.core.plan import (
    INTEGRATION_BATCH,
    MAX_SUBTASKS,
    NETWORKS,
    AgentKind,
    MergeOrder,
    Network,
    NetworkSpec,
    Placement,
)
from orchestrator.core.plan_variables import AgentVariable, EnvName, Url, VariableValue


def _plan_id(value: str) -> str:
    if ID_PATTERN.fullmatch(value) is None:
        raise PydanticCustomError(
            "plan_id",
            "must be 1 to 63 characters of a-z, 0-9, '.', '_' and '-', "
            "starting with a letter or digit",
        )
    if branch_name_problem(value) is not None:  # it names branches: `a..b`, `a.lock`
        raise PydanticCustomError(
            "plan_id", "may not hold '..' nor end with '.lock' or '.': it names git branches"
        )
    return value


def _branch(value: str) -> str:
    _non_blank(value)
    problem = branch_name_problem(value)
    if problem is not None:
        raise PydanticCustomError("plan_branch", problem)
    return value


def _non_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("plan_blank", "must not be empty")
    return value


def _version(value: int) -> int:
    # Not Literal[1]: pydantic lets `true` pass as 1, and a plan saying `version: true`
    # has not understood the key.
    if value != 1:
        raise PydanticCustomError("plan_version", "must be 1 (the only plan version)")
    return value


def _duration(value: Any) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError:
        raise PydanticCustomError("plan_duration", DURATION_EXPECTED) from None
    if seconds > MAX_DURATION_S:
        raise PydanticCustomError("plan_duration", "must be at most 30 days (720h)")
    return seconds


def _at_most(limit: int) -> AfterValidator:
    def check(value: int) -> int:
        if value > limit:
            raise PydanticCustomError("plan_number", f"must be at most {limit:,}")
        return value

    return AfterValidator(check)


def _one_or_many(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def _outside_tree(value: str) -> str:
    _non_blank(value)
    if ".git" in posixpath.normpath(value).split("/"):
        raise PydanticCustomError(
            "plan_worktree_root",
            "must not lie inside a .git directory: Claude Code refuses to edit any file there",
        )
    if posixpath.isabs(value):
        return value
    # Lexical: `wt`, `./wt` and `a/../wt` land inside the working tree, where git would see
    # the worktrees as untracked files. `../x` may still re-enter it (`../<repo>/x`); the
    # runtime, which knows the repository's path, checks that.
    if posixpath.normpath(value).split("/")[0] != "..":
        tilde = "; '~' is not expanded, so write an absolute path" if value[:1] == "~" else ""
        raise PydanticCustomError(
            "plan_worktree_root",
            "must lie outside the working tree, e.g. ../.kairo-worktrees" + tilde,
        )
    return value


def _inside_checkout(value: str) -> str:
    _non_blank(value)
    if posixpath.isabs(value) or posixpath.normpath(value).split("/")[0] == "..":
        raise PydanticCustomError(
            "plan_copy_glob", "must be a glob relative to the repository root, e.g. .env"
        )
    return value


def _arguments(value: Any) -> Any:
    # Worded here, not by pydantic: `extra_args: --max-turns 30` (one string) and
    # `[--max-turns, 30]` (a number) are the two mistakes worth a precise hint.
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    example = "e.g. [--max-turns, '30']"
    if isinstance(value, str):
        raise PydanticCustomError(
            "plan_extra_args", f"must be a list of arguments, one item each, {example}"
        )
    if isinstance(value, list):
        raise PydanticCustomError(
            "plan_extra_args",
            f"must be a list of strings; put numbers and true/false in quotes, {example}",
        )
    raise PydanticCustomError("plan_extra_args", f"must be a list of arguments, {example}")


Id = Annotated[str, AfterValidator(_plan_id)]
Text = Annotated[str, AfterValidator(_non_blank)]
# Caps (docs/plan.md, "Limits of a plan"): past them a plan is a typo or an attack, and a
# number must also fit the event log's JSON (integers up to 2^53).
MAX_DURATION_S = 30 * 24 * 3600.0
MAX_PARALLEL = 1000
MAX_ATTEMPTS = 100
MAX_TOKENS = 2**53 - 1
Duration = Annotated[float, BeforeValidator(_duration)]
Tokens = Annotated[int, Field(ge=1), _at_most(MAX_TOKENS)]
Globs = Annotated[list[str], BeforeValidator(_one_or_many)]


class _Raw(BaseModel):
    # strict: YAML already typed every value; coercing "4" to 4 would hide a quoting mistake.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class RawEndpoint(_Raw):
    url: Url
    key_env: EnvName | None = None


class RawAgent(_Raw):
    kind: AgentKind | None = None
    run: Text | None = None
    command: Annotated[list[str], Field(min_length=1)] | None = None
    idempotent: bool = False
    binary: Text | None = None
    model: Text | None = None
    permission_mode: Text | None = None  # which values: plan_resolve, by kind
    extra_args: Annotated[list[str], BeforeValidator(_arguments)] = []
    endpoint: RawEndpoint | None = None
    env: dict[AgentVariable, VariableValue] = {}


class RawLimits(_Raw):
    timeout: Duration | None = None
    max_attempts: Annotated[int, Field(ge=1), _at_most(MAX_ATTEMPTS)] = 3
    token_budget: Tokens | None = None


class RawExecutionLimits(_Raw):
    timeout: Duration | None = None
    token_budget: Tokens | None = None


class RawWorktree(_Raw):
    copy_files: Annotated[
        list[Annotated[str, AfterValidator(_inside_checkout)]], BeforeValidator(_one_or_many)
    ] = []
    setup: Text | None = None
    port_base: Annotated[int, Field(ge=1024, le=65000)] = 20000
    ports: Annotated[int, Field(ge=1, le=1000)] = 10


def _switch(value: Any) -> Any:
    # `true` and `false` are what the setting was before it had three values.
    return ("all" if value else "none") if isinstance(value, bool) else value


def _network(value: Any) -> Any:
    """`network:` one value for every step (`endpoint` is an agent's: none for the
    others), or a mapping of steps."""
    value = _switch(value)
    if isinstance(value, dict):
        return value
    if value not in NETWORKS:
        raise PydanticCustomError(
            "plan_network",
            "must be none, endpoint or all (true: all, false: none), or a mapping such as "
            "{agent: endpoint, setup: all, checks: none}",
        )
    return NetworkSpec.everywhere(value).model_dump()


class RawNetwork(_Raw):
    agent: Annotated[Network, BeforeValidator(_switch)] = "endpoint"
    setup: Annotated[Literal["none", "all"], BeforeValidator(_switch)] = "all"
    checks: Annotated[Literal["none", "all"], BeforeValidator(_switch)] = "none"


class RawSandbox(_Raw):
    kind: Literal["local", "bwrap"] | None = None  # None: bwrap wherever it runs
    network: Annotated[RawNetwork, BeforeValidator(_network)] = RawNetwork()
    writable: Annotated[list[Text], BeforeValidator(_one_or_many)] = []
    pass_env: Annotated[list[Text], BeforeValidator(_one_or_many)] = []


class RawReview(_Raw):
    push: Text | None = None
    push_subtask_branches: bool = False
    pr_command: Text | None = None


def _resolve_shorthand(value: Any) -> Any:
    # `agent` (or `true`) is `{by: agent}`; `off` and `false` turn the plan's choice off for
    # a subtask.
    if value is True:
        return {"by": "agent"}
    if value is False:
        return {"by": "off"}
    return {"by": value} if isinstance(value, str) else value


class RawResolveConflicts(_Raw):
    by: Literal["agent", "off"] = "agent"
    attempts: Annotated[int, Field(ge=1), _at_most(MAX_ATTEMPTS)] = 1

    @property
    def allowed(self) -> int:
        """Attempts at resolving a conflict: 0 when off."""
        return 0 if self.by == "off" else self.attempts


NO_RESOLVING = RawResolveConflicts(by="off")  # neither the plan nor the subtask asks for it


ResolveConflicts = Annotated[RawResolveConflicts, BeforeValidator(_resolve_shorthand)]


class RawSplit(_Raw):
    files: Annotated[Globs, Field(min_length=1)]
    # no default: it decides how many agents the split starts
    max_files: Annotated[int, Field(ge=1), _at_most(MAX_SUBTASKS)]
    by: Literal["directory", "count"] = "directory"


class RawSubtask(_Raw):
    id: Id
    title: Text | None = None
    prompt: str = ""
    depends_on: Annotated[list[str], BeforeValidator(_one_or_many)] = []
    files: Globs | None = None
    allow_empty: bool = False
    agent: RawAgent | None = None
    verify: Text | None = None
    limits: RawLimits | None = None
    split: RawSplit | None = None
    resolve_conflicts: ResolveConflicts | None = None


class RawPlan(_Raw):
    version: Annotated[int, AfterValidator(_version)]
    name: Id
    base: Text = "HEAD"
    integration_branch: Annotated[str, AfterValidator(_branch)] | None = None
    max_parallel: Annotated[int, Field(ge=1), _at_most(MAX_PARALLEL)] = 4
    merge_order: MergeOrder = "plan"
    placement: Placement = "local"
    worktree_root: Annotated[str, AfterValidator(_outside_tree)] | None = None
    agent: RawAgent | None = None
    verify: Text | None = None
    integration_verify: Text | None = None
    integration_batch: Annotated[int, Field(ge=1), _at_most(MAX_SUBTASKS)] = INTEGRATION_BATCH
    worktree: RawWorktree | None = None
    sandbox: RawSandbox | None = None
    review: RawReview | None = None
    limits: RawLimits | None = None
    execution_limits: RawExecutionLimits | None = None
    resolve_conflicts: ResolveConflicts | None = None
    # What `validate` and `start` make of a check that would test the checkout (docs/plan.md)
    checks_import_checkout: Literal["warn", "error", "off"] = "warn"
    subtasks: Annotated[list[Any], Field(min_length=1)]  # each validated on its own

    def resolve_attempts(self, subtask: RawSubtask) -> int:
        """The subtask's own `resolve_conflicts`, else the plan's: attempts, 0 when off."""
        return (subtask.resolve_conflicts or self.resolve_conflicts or NO_RESOLVING).allowed
