"""Where an agent may write, and what of the supervisor's environment it sees.

    local   the agent runs as the user, like any program they start (the default)
    bwrap   bubblewrap: the whole filesystem read-only but for the agent's own worktree,
            its worktree's private git directory, the object store (content-addressed:
            adding objects harms nobody), the attempt's run directory (prompt, usage file,
            and TMPDIR), where the agent program keeps its sessions (~/.claude, ~/.codex:
            without them it could not resume one) and the plan's `sandbox.writable`;
            without any capability, in a process namespace of its own; its network
            none, all, or (the default) its model endpoint's alone, through
            agents/egress.py outside and agents/forwarder.py inside

Under bwrap an agent cannot move a ref, so it cannot commit itself, and need not: the
supervisor commits what it leaves. The wrapper is part of the agent's command line inside
the in-pane runner, so the runner's process-group kill reaches it (no --new-session).

Whatever the kind, variables that are secrets by their name or by their value
(core/secrets.py) are withheld unless the plan passes them (`sandbox.pass_env`) or the
agent's kind needs them to log in.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import agents.egress
import agents.forwarder
from agents.endpoints import EgressRoutes
from orchestrator.core.plan import AgentKind, Network, SandboxSpec
from orchestrator.core.secrets import is_secret
from orchestrator.errors import EnvironmentProblem

# What each kind of agent logs in with: passed without being listed.
CREDENTIALS: Mapping[AgentKind, tuple[str, ...]] = {
    "claude-code": ("ANTHROPIC_", "CLAUDE_"),
    "codex": ("OPENAI_", "CODEX_"),
    "aider": ("ANTHROPIC_", "OPENAI_", "AIDER_"),
}


def without_secrets(
    env: Mapping[str, str], *, passed: Sequence[str], kind: AgentKind, vendor: bool = True
) -> dict[str, str]:
    """`env` less its secrets, but those passed, and, for an agent that talks to its
    `vendor` (not an endpoint of the plan's, which must not see the user's vendor keys),
    those its kind logs in with."""
    own = CREDENTIALS.get(kind, ()) if vendor else ()
    return {
        name: value
        for name, value in env.items()
        if not is_secret(name, value) or name in passed or name.startswith(own)
    }


@dataclass(frozen=True)
class AgentPlace:
    """What an agent of one attempt may write."""

    worktree: Path
    run_dir: Path
    git_common_dir: Path
    agent_state: tuple[Path, ...] = ()  # the program's own sessions (AgentAdapter.state_paths)
    # What the agent reaches when its network is `endpoint` (agents.endpoints.egress_routes);
    # None: nothing at all.
    egress: EgressRoutes | None = None


class ExecutionSandbox(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def network(self) -> Network:
        """What the agents it wraps reach."""
        ...

    def wrap(self, argv: list[str], place: AgentPlace) -> list[str]:
        """The command line that runs `argv` inside the sandbox."""
        ...


class LocalSandbox:
    kind = "local"
    network: Network = "all"

    def wrap(self, argv: list[str], place: AgentPlace) -> list[str]:
        return argv


def _worktree_git_dir(worktree: Path) -> Path:
    """A linked worktree's own git directory, from its `.git` file ("gitdir: PATH")."""
    text = (worktree / ".git").read_text(encoding="utf-8").strip()
    if not text.startswith("gitdir: "):
        raise EnvironmentProblem(f"{worktree}/.git does not name its git directory")
    return (worktree / text.removeprefix("gitdir: ")).resolve()


@dataclass(frozen=True)
class BwrapSandbox:
    binary: str
    network: Network = "endpoint"
    writable: tuple[str, ...] = ()
    kind: str = "bwrap"

    def wrap(self, argv: list[str], place: AgentPlace) -> list[str]:
        writable = [
            place.worktree,
            _worktree_git_dir(place.worktree),
            place.git_common_dir / "objects",
            place.run_dir,
            *place.agent_state,
            *(Path(p).expanduser() for p in self.writable),
        ]
        for path in place.agent_state:
            if not path.exists() and not path.suffix:  # a directory the program would make
                path.mkdir(parents=True, exist_ok=True)
        # Not a tmpfs over /tmp: the repository itself may live there. TMPDIR instead.
        tmp = place.run_dir / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        args = [self.binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        # No capability, not even as root (bwrap keeps root's otherwise): no `mount -o
        # remount,rw /`, no writing past a file's permissions. Its own process namespace:
        # it sees and signals only what it started.
        args += ["--cap-drop", "ALL", "--unshare-pid"]
        args += ["--die-with-parent", "--setenv", "TMPDIR", str(tmp)]
        # Claude Code's own switch: it allows bypassPermissions under root only in a sandbox.
        args += ["--setenv", "IS_SANDBOX", "1"]
        for path in writable:
            if path.exists():
                args += ["--bind", str(path), str(path)]
        if self.network != "all":
            args.append("--unshare-net")  # its own loopback, and nothing else
        routes = place.egress
        if self.network != "endpoint" or routes is None or not routes.lead_anywhere:
            # An agent with no model to reach (a shell command given no base URL) needs no
            # egress: no network is all the endpoint it has.
            return [*args, "--chdir", str(place.worktree), "--", *argv]
        return _through_egress(args, argv, place, routes)


def _through_egress(
    bwrap: list[str], argv: list[str], place: AgentPlace, routes: EgressRoutes
) -> list[str]:
    """`bwrap` running `argv` with egress in front of it, outside, and the forwarder
    inside, in front of the agent: its model endpoint its only way out."""
    # Bound read-only: the agent may connect to the socket, not replace it. Egress makes
    # the directory before bubblewrap starts.
    socket_dir = place.run_dir / "egress"
    socket = str(socket_dir / "egress.sock")
    proxy = f"http://127.0.0.1:{routes.proxy}"
    environment = {
        **{name: proxy for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")},
        **{name: "localhost,127.0.0.1,::1" for name in ("NO_PROXY", "no_proxy")},
    }
    bwrap = [*bwrap, *(arg for item in environment.items() for arg in ("--setenv", *item))]
    bwrap += ["--ro-bind", str(socket_dir), str(socket_dir)]
    options = ["--socket", socket, "--proxy", str(routes.proxy)]
    options += [arg for entry in routes.allow for arg in ("--allow", entry)]
    options += [arg for port, to in routes.forwards for arg in ("--forward", f"{port}={to}")]
    options += [arg for port, url in routes.reverse for arg in ("--reverse", f"{port}={url}")]
    options += [arg for name in routes.hold for arg in ("--hold", name)]
    listen = [arg for port in routes.ports for arg in ("--listen", str(port))]
    inside = ["--socket", socket, *listen]
    return [
        *_program(agents.egress.__file__, options),
        *bwrap,
        "--chdir",
        str(place.worktree),
        "--",
        *_program(agents.forwarder.__file__, inside),
        *argv,
    ]


def _program(module_file: str, options: list[str]) -> list[str]:
    """A standard-library program of ours, by path under `-I -S` as the stream filters are
    (the worktree may hold an `agents/` package of its own), its options, then `--`."""
    return [sys.executable, "-I", "-S", str(Path(module_file).absolute()), *options, "--"]


def sandbox_for(spec: SandboxSpec) -> ExecutionSandbox:
    """The sandbox of the plan; EnvironmentProblem (exit 5) when it cannot run here."""
    if spec.kind == "local":
        return LocalSandbox()
    binary = shutil.which("bwrap")
    if binary is None:
        raise EnvironmentProblem(
            "the plan's sandbox is bwrap, but bubblewrap is not installed "
            "(`make install` installs it, or apt-get install bubblewrap)"
        )
    return BwrapSandbox(binary=binary, network=spec.network_for("agent"), writable=spec.writable)
