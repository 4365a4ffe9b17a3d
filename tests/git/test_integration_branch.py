"""The supervisor's first step: the integration branch, made at the base or adopted."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.plan import ResolvedPlan
from orchestrator.core.state import ExecutionState, initial_state
from orchestrator.errors import StepFailed
from orchestrator.git.refs import rev_parse
from orchestrator.git.repo import Identity, RepoPaths
from orchestrator.git.workspace import LocalWorktreeProvider
from orchestrator.runtime.edge_adapters import GitRepository, LocalProcesses, TmuxPanes
from orchestrator.runtime.edges import Edges
from orchestrator.runtime.effects import execute
from tests.git.conftest import GitCommands, run

BRANCH = "kairo/p/abc"
IDENTITY = Identity("Test User", "test@example.com")


def execution(repo: Path, base: str, plan: ResolvedPlan | None = None) -> ExecutionState:
    created = ev.ExecutionCreated(
        plan=plan or ResolvedPlan.model_validate({"name": "p", "subtasks": []}),
        plan_path=str(repo.parent / "plan.yaml"),
        repo_root=str(repo),
        git_common_dir=str(repo / ".git"),
        base_commit=base,
        integration_branch=BRANCH,
        tmux_socket=None,
        tmux_session="kairo-p-abc",
        worktree_root=str(repo.parent / "worktrees"),
        run_root=str(repo.parent / "runs"),
    )
    return initial_state("E1", created)


def edges(repo: Path) -> Edges:
    paths = RepoPaths(repo, repo / ".git", repo / ".git")
    return Edges(
        repo_root=repo,
        workspaces=LocalWorktreeProvider(paths),
        repository=GitRepository(repo, repo / ".git", IDENTITY),
        panes=TmuxPanes(None),
        processes=LocalProcesses(),
        environment={},
    )


async def test_a_fresh_execution_makes_its_branch_at_the_base_with_one_git_process(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = run(repo, "rev-parse", "HEAD~1").strip()
    where = edges(repo)
    commands = GitCommands(monkeypatch)
    events = await execute(where, execution(repo, base), cmd.CreateIntegrationBranch())
    assert commands.taken() == ["update-ref"]
    assert events == [ev.IntegrationBranchCreated(branch=BRANCH, commit=base)]
    assert await rev_parse(repo, BRANCH) == base


async def test_a_branch_made_by_a_supervisor_that_died_before_saying_so_is_adopted(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The base was HEAD~1; the branch moved on before the crash (or was made there).
    base = run(repo, "rev-parse", "HEAD~1").strip()
    head = run(repo, "rev-parse", "HEAD").strip()
    run(repo, "branch", BRANCH, head)
    where = edges(repo)
    commands = GitCommands(monkeypatch)
    events = await execute(where, execution(repo, base), cmd.CreateIntegrationBranch())
    assert commands.taken() == ["update-ref", "show-ref", "rev-parse"]
    assert events == [ev.IntegrationBranchCreated(branch=BRANCH, commit=head)]
    assert await rev_parse(repo, BRANCH) == head


@pytest.mark.parametrize("what", ["missing", "a tree", "an annotated tag"])
async def test_a_base_that_is_not_a_commit_makes_no_branch(repo: Path, what: str) -> None:
    run(repo, "tag", "-a", "-m", "v1", "v1")
    base = {
        "missing": "0123456789" * 4,
        "a tree": run(repo, "rev-parse", "HEAD^{tree}").strip(),
        "an annotated tag": run(repo, "rev-parse", "v1").strip(),  # the tag object's oid
    }[what]
    with pytest.raises(StepFailed, match=f"cannot create branch '{BRANCH}'"):
        await execute(edges(repo), execution(repo, base), cmd.CreateIntegrationBranch())
    assert run(repo, "branch", "--list", BRANCH) == ""
