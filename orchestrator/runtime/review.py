"""Handing the result over for review: push the branches, run the pull request command.

Neither step changes any subtask's outcome: a push that fails or a `gh` that is not logged
in is recorded with its output, shown in the report, and the execution ends as its
subtasks say. Both run with GIT_TERMINAL_PROMPT=0, so a remote asking for a password
fails at once instead of waiting for a terminal nobody watches.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import trio

from orchestrator.core import events as ev
from orchestrator.core.report import build_report, to_markdown
from orchestrator.core.review_steps import NOT_RUN_BREACHED
from orchestrator.core.state import ExecutionState
from orchestrator.git.invocation import hardened_settings_env
from orchestrator.runtime.edges import Edges
from orchestrator.runtime.processes import OUTPUT_TAIL_BYTES

PR_BODY = "pull-request.md"
#: A review step's bound when the plan sets no execution timeout: a push or a `gh pr
#: create` takes seconds, and one waiting on a prompt or a dead network would keep the
#: execution running for ever.
REVIEW_STEP_TIMEOUT_S = 600.0
#: What a review step gets however late the execution is: its limit does not skip the step.
REVIEW_STEP_MIN_S = 30.0


def review_step_bound(state: ExecutionState, now: float) -> float:
    """Seconds a review step may take: REVIEW_STEP_TIMEOUT_S, or what is left of
    `execution_limits.timeout` if less, but at least REVIEW_STEP_MIN_S."""
    limit = state.plan.execution_limits.timeout_s
    if limit is None or state.started_at is None:
        return REVIEW_STEP_TIMEOUT_S
    left = limit - (now - state.started_at)
    return max(REVIEW_STEP_MIN_S, min(REVIEW_STEP_TIMEOUT_S, left))


async def run_review_step(
    edges: Edges, state: ExecutionState, step: ev.ReviewStep
) -> list[ev.ExecutionEvent]:
    # Just before anything leaves the machine, or a program of the plan runs with the
    # user's credentials: a remote's URL or a credential helper may be what was changed.
    breach = await edges.guard.compare("review")
    if breach is not None:
        return [
            breach,
            ev.ReviewStepFinished(step=step, exit_code=None, output_tail=NOT_RUN_BREACHED),
        ]
    review = state.plan.review
    created = state.created
    env = {
        **edges.environment,
        # The git these commands run is ours too: no hook, fsmonitor, pager or signing
        # program the repository's configuration names (git/invocation.py). Which remote,
        # its URL and its credentials are the user's configuration, which the guard has
        # just found as it was when the execution started.
        **hardened_settings_env(),
        "GIT_TERMINAL_PROMPT": "0",
        "KAIRO_EXECUTION_ID": state.execution_id,
        "KAIRO_INTEGRATION_BRANCH": created.integration_branch,
        "KAIRO_BASE_COMMIT": created.base_commit,
        "KAIRO_TITLE": f"kairo-orch: {state.plan.name}",
    }
    if step == "push":
        assert review.push is not None
        branches = [created.integration_branch]
        if review.push_subtask_branches:
            for view in state.subtasks.values():
                if view.branch and await edges.repository.branch_exists(view.branch):
                    branches.append(view.branch)
        refspecs = [f"refs/heads/{b}:refs/heads/{b}" for b in branches]
        command = shlex.join(["git", "push", "--porcelain", "--", review.push, *refspecs])
    else:
        assert review.pr_command is not None
        body = Path(created.run_root) / PR_BODY
        text = to_markdown(build_report(state, "COMPLETED" if _all_merged(state) else "FAILED"))
        await trio.Path(body).write_text(text, encoding="utf-8", errors="surrogateescape")
        env["KAIRO_REPORT_FILE"] = str(body)
        command = review.pr_command
    result = await edges.processes.run_shell(
        command,
        cwd=edges.repo_root,
        env=env,
        timeout_s=review_step_bound(state, time.time()),
        stop=edges.stop_now,
    )
    return [
        ev.ReviewStepFinished(
            step=step, exit_code=result.exit_code, output_tail=result.output[-OUTPUT_TAIL_BYTES:]
        )
    ]


def _all_merged(state: ExecutionState) -> bool:
    return len(state.merged) == len(state.subtasks)
