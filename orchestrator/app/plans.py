"""Reading a plan file against a repository: base resolved, tracked files listed, validated."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from orchestrator.app.checkout_imports import checks_import_checkout
from orchestrator.core.dag import merge_order
from orchestrator.core.plan import Limits, ResolvedPlan, SandboxSpec
from orchestrator.core.plan_file import LoadedPlan, load_plan
from orchestrator.core.plan_yaml import refuse_deep_nesting
from orchestrator.errors import KairoError, PlanError, UsageError
from orchestrator.git.copied_files import unmatched_patterns
from orchestrator.git.history import tracked_files_sync
from orchestrator.git.invocation import git_sync
from orchestrator.git.refs import rev_parse_sync
from orchestrator.git.repo import NotARepository, RepoPaths, discover_repo
from orchestrator.runtime.sandbox import bwrap_unavailable, sandbox_for


@dataclass(frozen=True)
class PlanInRepo:
    loaded: LoadedPlan
    base_commit: str | None  # None outside a repository
    path: Path
    checkout_warnings: tuple[str, ...] = ()  # of what the checkout has, not the plan file

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.loaded.warnings + self.checkout_warnings


#: Plenty for 10,000 subtasks; a plan file larger than this is not one (docs/plan.md).
MAX_PLAN_BYTES = 4 * 1024 * 1024


def read_plan_text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_PLAN_BYTES:
            raise UsageError(
                f"{path}: the plan file is {size / 1024 / 1024:.1f} MiB; a plan may be at "
                f"most {MAX_PLAN_BYTES // 1024 // 1024} MiB"
            )
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such plan file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{path}: cannot read the plan: {error}") from None


def _written_base(text: str) -> str:
    """`base` as written, before validation: the files of `split` are listed at that commit.

    A plan too broken to read gives HEAD here; `load_plan` then reports what is wrong.
    """
    try:
        data = YAML(typ="safe").load(text)
    except (YAMLError, RecursionError):
        return "HEAD"
    base = data.get("base") if isinstance(data, dict) else None
    usable = isinstance(base, str) and base.strip() and "\0" not in base
    return base if usable else "HEAD"  # type: ignore[return-value]


def read_plan(path: Path, repo: RepoPaths | None) -> PlanInRepo:
    text = read_plan_text(path)
    filename = str(path)
    if repo is None:
        return PlanInRepo(load_plan(text, filename, None), None, path)
    refuse_deep_nesting(text, filename)  # before any YAML parser, which it would stall
    base_name = _written_base(text)
    try:
        base_commit = rev_parse_sync(repo.toplevel, base_name)
    except KairoError:
        if base_name == "HEAD":  # HEAD names no commit only on a branch not yet born
            problem = (
                f"the repository at {repo.toplevel} has no commit yet: the subtasks "
                "branch from one, so commit first (or give the plan a `base`)"
            )
        else:
            problem = f"base '{base_name}' is not a commit of the repository at {repo.toplevel}"
        raise PlanError([f"{filename}: {problem}"]) from None
    tracked = tracked_files_sync(repo.toplevel, base_commit)
    loaded = load_plan(text, filename, tracked)
    push = loaded.plan.review.push
    if push is not None and not _push_has_target(repo.toplevel, push):
        raise PlanError(
            [
                f"{filename}: review.push: '{push}' is no remote of the repository at "
                f"{repo.toplevel} (`git remote` lists them), nor a URL or a path"
            ]
        )
    missing = [
        f"{filename}: worktree.copy_files: '{pattern}' matches no file of the checkout "
        f"{repo.toplevel} that git does not track: no worktree will have it"
        for pattern in unmatched_patterns(repo.toplevel, loaded.plan.worktree.copy_files, tracked)
    ]
    return PlanInRepo(loaded, base_commit, path, tuple(missing))


def _push_has_target(checkout: Path, push: str) -> bool:
    """Whether `git push PUSH` has somewhere to go: a configured remote, a URL (also
    `host:path`), or an existing path. Anything else git takes for a path that is not there,
    and says so only when the execution ends."""
    if "://" in push or ":" in push:
        return True
    try:  # a path is relative to the checkout, where the push runs
        if (checkout / Path(push).expanduser()).exists():
            return True
    except (RuntimeError, OSError):  # `~nobody/x`; a name too long to be a path
        pass
    remotes = git_sync("remote", cwd=checkout, check=False)
    return remotes.returncode != 0 or push in remotes.stdout.split()


def require_runnable(plan: ResolvedPlan) -> None:
    """EnvironmentProblem (exit 5) for what this machine lacks to run the plan: an agent
    kind, its program, the sandbox. Found at validate and start, not once agents run."""
    from agents.registry import require_available

    require_available(plan)
    require_agent_environment(plan)
    sandbox_for(plan.sandbox)


def chosen_sandbox(plan: ResolvedPlan) -> tuple[ResolvedPlan, tuple[str, ...]]:
    """The plan with the sandbox its agents will run in, and what `start` says of it: a
    plan that names none gets bubblewrap wherever it runs (docs/security.md)."""
    spec = plan.sandbox
    if spec.kind == "bwrap":
        return plan, ()
    if spec.kind == "local":
        return plan, (
            "sandbox: local: agents run as you, with your files, processes and network; "
            "a prompt injected through a file they read can do anything you can "
            "(docs/security.md)",
        )
    problem = bwrap_unavailable()
    kind = "bwrap" if problem is None else "local"
    chosen = plan.model_copy(update={"sandbox": spec.model_copy(update={"kind": kind})})
    if problem is None:
        return chosen, ()
    return chosen, (
        f"agents run without a sandbox, as you: {problem}; say `sandbox: {{kind: local}}` "
        "in the plan to choose that (docs/security.md)",
    )


def require_agent_environment(plan: ResolvedPlan) -> None:
    """EnvironmentProblem (exit 5) for what the agents' settings need of the environment of
    this command, whose supervisor gives it to them (agents/registry.py)."""
    from agents.registry import require_environment

    require_environment(plan, os.environ, root=os.geteuid() == 0)


@dataclass(frozen=True)
class PlannedSubtask:
    id: str
    agent_kind: str
    files: tuple[str, ...]
    depends_on: tuple[str, ...]
    limits: Limits
    resolve_attempts: int  # 0: a conflict ends it


@dataclass(frozen=True)
class PlanChecked:
    name: str
    base_commit: str | None  # None: checked outside a repository
    warnings: tuple[str, ...]
    merge_order: tuple[PlannedSubtask, ...]
    sandbox: SandboxSpec


def check_plan(plan: Path, repo: Path) -> PlanChecked:
    """`validate`: the plan checked as `start` checks it, touching nothing. Outside a
    repository too, where only `split` cannot be checked."""
    try:
        paths: RepoPaths | None = discover_repo(repo)
    except NotARepository:
        paths = None
    checked = read_plan(plan, paths)
    resolved, said = chosen_sandbox(checked.loaded.plan)
    require_runnable(resolved)
    warnings = checked.warnings + said
    if paths is not None:
        warnings += checks_import_checkout(
            resolved,
            checked.loaded.checks_import_checkout,
            paths.toplevel,
            str(plan),
            os.environ,
        )
    order = []
    for subtask_id in merge_order(resolved):
        spec = resolved.subtask(subtask_id)
        order.append(
            PlannedSubtask(
                spec.id,
                spec.agent.kind,
                tuple(spec.files),
                tuple(spec.depends_on),
                spec.limits,
                spec.resolve_attempts,
            )
        )
    return PlanChecked(resolved.name, checked.base_commit, warnings, tuple(order), resolved.sandbox)
