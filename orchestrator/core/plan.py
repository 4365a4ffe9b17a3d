"""The plan as the supervisor runs it: defaults applied, overrides merged, `split` expanded.

`plan_file.py` turns a `plan.yaml` into this; everything downstream (events, fold, decide)
sees only these frozen models, so what ran is exactly what the log recorded.
"""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.core.os_strings import OsStr

AgentKind = Literal["shell", "command", "claude-code", "codex", "aider"]
MAX_SUBTASKS = 10_000  # in one plan, splits expanded (docs/plan.md, "Limits of a plan")
#: Merges checked together by one run of `integration_verify` at most (merge_queue.py;
#: chosen by measurement: docs/benchmarks.md, "Checking merges in batches").
INTEGRATION_BATCH = 16
MAX_HANDED_BYTES = 64 * 1024  # of a prompt, or a file list, an agent gets in its environment
MergeOrder = Literal["plan", "completion"]
#: Where subtasks run: on the owner's host, or on workers of other hosts (operations.md).
Placement = Literal["local", "workers"]
ADAPTER_KINDS: tuple[AgentKind, ...] = ("claude-code", "codex", "aider")  # `binary`, `model`...
# `permission_mode` by kind: what `claude --help` lists for --permission-mode, and the values
# of `codex exec --sandbox`. Aider has no such setting.
PERMISSION_MODES: dict[str, tuple[str, ...]] = {
    "claude-code": ("acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "plan"),
    "codex": ("read-only", "workspace-write", "danger-full-access"),
}


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Endpoint(Frozen):
    """Where an agent program sends its model requests: a gateway, a proxy, a local model."""

    url: str
    key_env: str | None = None  # the variable of kairo-orch's environment holding its key


class AgentSpec(Frozen):
    kind: AgentKind = "shell"
    run: str | None = None  # kind shell: one command line for /bin/sh -c
    command: tuple[str, ...] | None = None  # kind command: argv; {prompt} {prompt_file} {files}
    idempotent: bool = False
    # Kinds claude-code, codex and aider (None: the adapter's default, see docs/plan.md):
    binary: str | None = None  # the program, a name looked up on PATH or a path
    model: str | None = None
    permission_mode: str | None = None  # one of PERMISSION_MODES[kind]
    extra_args: tuple[str, ...] = ()  # passed to the program after the adapter's own flags
    endpoint: Endpoint | None = None
    # Every kind: variables the agent gets as written, past the secret filter (the plan
    # named them); `${NAME}` in a value is NAME of kairo-orch's environment, so a key
    # need not be written in the plan (agents/endpoints.py).
    env: dict[str, str] = {}


class Limits(Frozen):
    timeout_s: float | None = None  # wall clock of one attempt
    max_attempts: int = 3
    token_budget: int | None = None


class ExecutionLimits(Frozen):
    timeout_s: float | None = None
    token_budget: int | None = None


class WorktreeSetup(Frozen):
    """How each new worktree is made ready before its first attempt."""

    copy_files: tuple[str, ...] = ()  # globs of the main checkout's untracked or ignored files
    setup: str | None = None  # a command line run once in each new worktree
    port_base: int = 20000
    ports: int = 10  # KAIRO_PORT: port_base + ports * the subtask's index in the plan


#: What a step under bwrap reaches: nothing, its model endpoint (an agent's) and nothing
#: else, or every network the machine has.
Network = Literal["none", "endpoint", "all"]
NETWORKS: tuple[Network, ...] = ("none", "endpoint", "all")
#: The steps `SandboxSpec.network_for` answers for; the checks are `network.checks`.
Step = Literal["agent", "setup", "verify", "integration_verify"]


class NetworkSpec(Frozen):
    """`sandbox.network`: per step. A setup that installs needs its registry; a check only
    runs what is there; an agent needs its model."""

    agent: Network = "endpoint"
    setup: Network = "all"
    checks: Network = "none"  # verify and integration_verify

    @classmethod
    def everywhere(cls, value: Network) -> NetworkSpec:
        """One value for every step: `endpoint` is an agent's, and none for the others."""
        other: Network = "none" if value == "endpoint" else value
        return cls(agent=value, setup=other, checks=other)


class SandboxSpec(Frozen):
    """Where agents may write and what they see (runtime/sandbox.py)."""

    # `auto` (a plan that names no kind) is chosen at `start`: bwrap wherever it runs, else
    # local (app/plans.py); an execution's log holds what was chosen. A log written
    # before there was a choice holds `local` or `bwrap`.
    kind: Literal["local", "bwrap", "auto"] = "local"
    network: NetworkSpec = NetworkSpec()
    writable: tuple[str, ...] = ()  # bwrap only: more paths it may write, e.g. ~/.claude
    pass_env: tuple[str, ...] = ()  # secret-looking variables agents get all the same

    def network_for(self, step: Step) -> Network:
        """What `step` reaches under bwrap (under `local`, everything the user can)."""
        if self.kind == "local":
            return "all"
        if step == "agent":
            return self.network.agent
        return self.network.setup if step == "setup" else self.network.checks


class ReviewSpec(Frozen):
    """What is done with the result once every subtask has settled."""

    push: str | None = None  # a remote: the integration branch is pushed there
    push_subtask_branches: bool = False  # the subtasks' own branches as well
    pr_command: str | None = None  # run once, e.g. `gh pr create ... --body-file ...`


class ResolvedSubtask(Frozen):
    id: str
    title: str
    prompt: str
    depends_on: tuple[str, ...] = ()  # concrete ids: a dependency on a split names all its parts
    files: tuple[OsStr, ...] = ()  # owned files, concrete paths at the base commit
    allow_empty: bool = False
    agent: AgentSpec
    verify: str | None = None  # effective: the subtask's own, else the plan's
    limits: Limits = Limits()
    split_of: str | None = None  # the plan entry a generated subtask came from
    # `resolve_conflicts`: how many attempts an agent gets at resolving a merge conflict
    # of this subtask's (0: none, the subtask ends conflicted as it always did).
    resolve_attempts: int = 0


class ResolvedPlan(Frozen):
    version: Literal[1] = 1
    name: str
    base: str = "HEAD"  # commit-ish, resolved once at start
    integration_branch: str | None = None
    max_parallel: int = 4
    merge_order: MergeOrder = "plan"
    placement: Placement = "local"
    worktree_root: str | None = None  # as written; relative to the repository root
    integration_verify: str | None = None
    integration_batch: int = INTEGRATION_BATCH
    worktree: WorktreeSetup = WorktreeSetup()
    sandbox: SandboxSpec = SandboxSpec()
    review: ReviewSpec = ReviewSpec()
    execution_limits: ExecutionLimits = ExecutionLimits()
    subtasks: tuple[ResolvedSubtask, ...]  # in the order written, splits expanded in place

    def port_of(self, subtask_id: str) -> int:
        """The first of the ports this subtask's worktree may use (KAIRO_PORT)."""
        return self.worktree.port_base + self.worktree.ports * self._index[subtask_id]

    def subtask(self, subtask_id: str) -> ResolvedSubtask:
        return self.subtasks[self._index[subtask_id]]

    @cached_property
    def _index(self) -> dict[str, int]:
        """Each subtask's place in `subtasks`: a plan may hold a thousand."""
        return {subtask.id: i for i, subtask in enumerate(self.subtasks)}
