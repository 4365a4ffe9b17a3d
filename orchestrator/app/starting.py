"""`start`: validate the plan, create its execution, hand it to its supervisor."""

from __future__ import annotations

import fcntl
import os
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from orchestrator import kairo_dir
from orchestrator.app.checkout_imports import checks_import_checkout
from orchestrator.app.launcher import Launcher
from orchestrator.app.launching import launch
from orchestrator.app.notes import Notify, PlanWarning, UncommittedChanges
from orchestrator.app.plans import PlanInRepo, chosen_sandbox, read_plan, require_runnable
from orchestrator.app.project import Project, project_at, repository_at
from orchestrator.app.results import Interrupted, Launched
from orchestrator.core import events as ev
from orchestrator.core.ids import default_integration_branch, short_id, tmux_session_name
from orchestrator.core.plan import ResolvedPlan
from orchestrator.errors import OwnershipError, UsageError
from orchestrator.git.invocation import git_sync
from orchestrator.git.repo import RepoPaths, has_uncommitted_changes, inside_work_tree
from orchestrator.git.spare_setting import spare_bytes, spares_to_keep
from orchestrator.git.worktree_paths import default_worktree_root, inside_git_directory
from orchestrator.runtime.log_records import create_execution
from orchestrator.store.ulid import new_ulid
from orchestrator.tmux.interactive import socket_from_environment, tmux_version

#: Asked whether to resume an interrupted execution; None: nobody to ask (a script).
AskToResume = Callable[[Interrupted], bool] | None


def start(
    repo: Path,
    store_url: str | None,
    plan: Path,
    *,
    fresh: bool,
    launcher: Launcher,
    notify: Notify,
    ask_to_resume: AskToResume = None,
) -> Launched:
    """Create an execution of `plan` and hand it to `launcher`'s supervisor; or resume an
    interrupted one of the same plan, if `ask_to_resume` says so."""
    paths = repository_at(repo)
    tmux_version()  # refuse before anything is created, not once agents start
    spares_to_keep(os.environ)  # likewise: the supervisor reads it too
    spare_bytes(os.environ)
    checked = read_plan(plan, paths)
    _refuse_placement_without_means(checked.loaded.plan, store_url)
    # An interrupted execution of this plan is offered before the plan file's own checks
    # (its program, its worktree_root, its branch): `resume` goes on with the plan its log
    # holds. With no store yet there is none, so those refusals come before the store is
    # made: a start refused creates nothing, not even the store's file.
    ready = None
    if store_url is None and not kairo_dir.default_store(paths.git_common_dir).exists():
        ready = _ready_to_start(paths, checked)
        if checked.loaded.plan.integration_branch:
            _refuse_a_taken_branch(paths, checked, checked.loaded.plan.integration_branch)
    with project_at(paths, store_url) as project, _one_start_at_a_time(paths) as started:
        unended = None if fresh else _unended_execution(project, checked.loaded.plan.name)
        if unended is not None:
            execution_id, status = unended
            if status != "PAUSED":
                _refuse_a_second_run(execution_id, checked.loaded.plan, status, checked.path)
            interrupted = Interrupted(execution_id, checked.loaded.plan.name, checked.path)
            _agree_to_resume(interrupted, ask_to_resume)
            return launch(project, execution_id, launcher, resume=True, supervised=started)
        execution_id = _create_execution(
            project, checked, ready or _ready_to_start(paths, checked), notify
        )
        return launch(project, execution_id, launcher, supervised=started)


def _refuse_placement_without_means(plan: ResolvedPlan, store_url: str | None) -> None:
    """`placement: workers` needs what every host shares: the PostgreSQL store, and a git
    remote (`review.push`); a conflict an agent resolves is not placed yet."""
    if plan.placement != "workers":
        return
    if store_url is None or store_url.partition(":")[0].lower() not in ("postgresql", "postgres"):
        raise UsageError(
            "placement: workers needs the PostgreSQL store (--store postgresql://... or"
            " KAIRO_STORE) that the workers share"
        )
    if plan.review.push is None:
        raise UsageError("placement: workers needs review.push: the git remote every host reaches")
    if any(spec.resolve_attempts for spec in plan.subtasks):
        raise UsageError("placement: workers does not run resolve_conflicts yet")


@contextmanager
def _one_start_at_a_time(paths: RepoPaths) -> Iterator[Callable[[], None]]:
    """Held from the look for a running execution of the plan until the new one's
    supervisor runs (`launch` calls what this yields): two `start`s of one plan at the
    same instant would otherwise both see none, and run every agent twice. An flock, which
    the kernel lets go of if this process dies; one repository's, so starts from clones on
    other machines sharing a PostgreSQL store are not held by it."""
    path = kairo_dir.start_lock(paths.git_common_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    held = [descriptor]

    def release() -> None:
        while held:
            os.close(held.pop())  # which lets go of the flock

    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield release
    finally:
        release()


@dataclass(frozen=True)
class _Ready:
    plan: ResolvedPlan  # its sandbox chosen
    worktree_root: Path
    warnings: tuple[str, ...]  # of what this machine would run the plan's agents and checks with


def _ready_to_start(paths: RepoPaths, checked: PlanInRepo) -> _Ready:
    """Refuse a plan this machine cannot run; where its worktrees go."""
    plan, warnings = chosen_sandbox(checked.loaded.plan)
    require_runnable(plan)
    strictness = checked.loaded.checks_import_checkout
    warnings += checks_import_checkout(
        plan, strictness, paths.toplevel, str(checked.path), os.environ
    )
    return _Ready(plan, _worktree_root(paths, plan, checked.path), warnings)


def _create_execution(project: Project, checked: PlanInRepo, ready: _Ready, notify: Notify) -> str:
    plan_path = checked.path
    plan = ready.plan
    worktree_root = ready.worktree_root
    assert checked.base_commit is not None
    for warning in checked.warnings + ready.warnings:
        notify(PlanWarning(warning))
    if has_uncommitted_changes(project.paths):
        notify(UncommittedChanges(checked.base_commit))
    execution_id = new_ulid()
    integration = plan.integration_branch or default_integration_branch(plan.name, execution_id)
    _refuse_a_taken_branch(project.paths, checked, integration)
    created = ev.ExecutionCreated(
        plan=plan,
        plan_path=str(plan_path.resolve()),
        repo_root=str(project.paths.toplevel),
        git_common_dir=str(project.paths.git_common_dir),
        base_commit=checked.base_commit,
        integration_branch=integration,
        tmux_socket=socket_from_environment(),
        tmux_session=tmux_session_name(plan.name, execution_id),
        worktree_root=str(worktree_root / short_id(execution_id)),
        run_root=str(project.paths.runs / execution_id),
    )
    create_execution(project.store, execution_id, created, repository=project.paths.key)
    return execution_id


def _refuse_a_taken_branch(paths: RepoPaths, checked: PlanInRepo, integration: str) -> None:
    """The integration branch must be new, and git must be able to make it: refs are
    paths, so `kairo/x` cannot be made while a branch `kairo` exists, nor `kairo` while
    `kairo/x` does."""
    listed = git_sync(
        "for-each-ref", "--format=%(refname:short)", "refs/heads/", cwd=paths.toplevel
    )
    for branch in listed.stdout.splitlines():
        if branch == integration:
            raise UsageError(
                f"{checked.path}: integration branch '{integration}' already exists; delete "
                "it or name another in the plan"
            )
        if integration.startswith(f"{branch}/") or branch.startswith(f"{integration}/"):
            raise UsageError(
                f"{checked.path}: integration branch '{integration}' cannot be made beside "
                f"the branch '{branch}' (git keeps branches as paths, and one would be the "
                "other's folder); name another in the plan"
            )


def _unended_execution(project: Project, plan_name: str) -> tuple[str, str] | None:
    """The newest execution of the plan that has not ended, and its status."""
    for row in project.unended():
        if row.plan_name == plan_name:
            return row.execution_id, project.status_of(project.state(row.execution_id), row)
    return None


def _refuse_a_second_run(
    execution_id: str, plan: ResolvedPlan, status: str, plan_path: Path
) -> NoReturn:
    """The same agents twice, at twice the cost, is rarely what a second `start` means."""
    short = short_id(execution_id)
    another = (
        f"a second one needs an integration branch other than the plan's {plan.integration_branch}"
        if plan.integration_branch
        else f"`kairo-orch start --fresh {shlex.quote(str(plan_path))}` starts another beside it"
    )
    raise OwnershipError(
        f"execution {execution_id} of plan {plan.name} is {status}: `kairo-orch attach "
        f"{short}` shows it, `kairo-orch stop {short}` ends it, and {another}",
        execution_id=execution_id,
    )


def _agree_to_resume(interrupted: Interrupted, ask: AskToResume) -> None:
    """An interrupted execution of the same plan is resumed, not silently run again."""
    fresh = shlex.quote(str(interrupted.plan_path))
    if ask is None:
        raise OwnershipError(
            f"execution {interrupted.execution_id} of plan {interrupted.plan_name} was "
            f"interrupted: `kairo-orch resume {short_id(interrupted.execution_id)}` goes on "
            f"with it, or `kairo-orch start --fresh {fresh}` starts a new one",
            execution_id=interrupted.execution_id,
        )
    if not ask(interrupted):
        raise UsageError(f"nothing started: say `kairo-orch start --fresh {fresh}` to start anew")


def _worktree_root(paths: RepoPaths, plan: ResolvedPlan, plan_path: Path) -> Path:
    """The plan's worktree_root (relative to the repository root), else beside the checkout."""
    if plan.worktree_root is None:
        within = inside_work_tree(paths.toplevel.parent)
        return default_worktree_root(paths.toplevel, parent_in_a_working_tree=within)
    root = (paths.toplevel / plan.worktree_root).resolve()
    if root == paths.toplevel or paths.toplevel in root.parents:
        raise UsageError(
            f"{plan_path}: worktree_root {plan.worktree_root} lies inside the working tree "
            f"{paths.toplevel}; it must lie outside it"
        )
    if inside_git_directory(root):
        raise UsageError(
            f"{plan_path}: worktree_root {plan.worktree_root} lies inside a .git directory "
            f"({root}), where Claude Code refuses to edit any file; name a folder outside it"
        )
    return root
