"""Where the plan's checks run: in the plan's sandbox, as its agents do.

`setup`, `verify` and `integration_verify` run code an agent wrote: a script it changed, a
test it added, a dependency it named, a setup script an earlier subtask's agent rewrote and
the branch now carries. Under a sandbox each runs inside the same one as the agents
(ExecutionSandbox.wrap), in a place of its own: it may write its worktree (for
`integration_verify`, the integration checkout) and a scratch directory, made anew for each
run, that holds its TMPDIR; nothing of the user's. Its environment is the agents': the
supervisor's less its secrets (those of `sandbox.pass_env` pass), and the KAIRO_* variables
of the check. Under `local` a check runs as the user, with their whole environment.

The sandbox's process is the check's: its process group, its cgroup and its marker are
those of processes.run_shell, and bubblewrap ended ends its whole process namespace,
`setsid` children included.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.plan import Network, SandboxSpec, Step
from orchestrator.core.state import ExecutionState
from orchestrator.runtime.attempts import not_for_agents
from orchestrator.runtime.processes import CheckSandbox
from orchestrator.runtime.sandbox import AgentPlace, sandbox_for, without_secrets


@dataclass(frozen=True)
class CheckSetting:
    """How one run of a check is started: its environment, and its sandbox (None: it runs
    as it is)."""

    env: dict[str, str]
    sandbox: CheckSandbox | None = None


#: The step of `sandbox.network` each of processes.CHECKS is.
_STEPS: Mapping[str, Step] = {
    "setup": "setup",
    "verify": "verify",
    "integration": "integration_verify",
}


def check_network(spec: SandboxSpec, check: str) -> Network:
    """What `check` (one of processes.CHECKS) may reach: the plan's `sandbox.network` for
    setup, or for the checks (none by default: they run what is there)."""
    return spec.network_for(_STEPS[check])


def check_folder(run_root: str, check: str, subtask_id: str) -> Path:
    """The run folder of `check` run in `subtask_id`'s name, which holds its scratch: in
    the subtask's, beside its attempts' (numbers) and its agent's state, where no agent
    may write; `clean` removes its scratch with theirs."""
    return Path(run_root) / subtask_id / f"{check}-check"


def check_setting(
    state: ExecutionState,
    environment: Mapping[str, str],
    check: str,
    subtask_id: str,
    *,
    worktree: Path,
    own: Mapping[str, str],
) -> CheckSetting:
    """How `check` runs in `worktree`, in `subtask_id`'s name, with the supervisor's
    `environment` and the check's `own` variables (its KAIRO_*)."""
    spec = state.plan.sandbox
    sandbox = sandbox_for(spec, network=check_network(spec, check))
    if sandbox.kind == "local":
        return CheckSetting(env={**environment, **own})
    # The sandbox makes its scratch (TMPDIR) anew in this folder at each run.
    place = AgentPlace(
        worktree=worktree,
        run_dir=check_folder(state.created.run_root, check, subtask_id),
        git_common_dir=Path(state.created.git_common_dir),
        checkout=Path(state.created.repo_root),
    )
    # A check logs in to no model vendor: no agent kind's credentials pass.
    base = without_secrets(
        not_for_agents(environment), passed=spec.pass_env, kind="shell", vendor=False
    )
    withheld = {name: value for name, value in environment.items() if name not in base}
    return CheckSetting(
        env={**base, **own},
        sandbox=CheckSandbox(functools.partial(sandbox.wrap, place=place), withheld),
    )
