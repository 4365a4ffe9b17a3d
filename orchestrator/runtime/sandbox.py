"""Where an agent may write, and what of the machine it sees.

    local   the agent runs as the user, like any program they start
    bwrap   bubblewrap (the default wherever it runs, docs/security.md): the agent reaches
            its worktree, a scratch directory of its own (TMPDIR, its git scratch), its
            subtask's agent state (sessions kept across attempts until `clean`) and the
            plan's `sandbox.writable`; it reads the rest of the machine, less what holds
            other people's secrets or a way out; its network none, all, or (the default)
            its model endpoint's alone, through agents/egress.py outside and
            agents/forwarder.py inside

A way out is a unix socket of the host (tmux's: `run-shell`; PostgreSQL's: peer
authentication as root; D-Bus, docker), a process of the machine to signal, a capability,
a file of the user's that a later program of theirs runs (hooks in ~/.claude, `notify` in
~/.codex, the repository's objects and refs). Hence, inside:

- new user, process, IPC and hostname namespaces, every capability dropped, the agent
  mapped to a uid that is not 0 (Codex's own bubblewrap nests only then), ended with its
  runner (`--die-with-parent`);
- an empty tmpfs over /tmp, /run and /dev/shm (where sockets live; not /var/tmp, where
  checkouts and tools are kept for good, as a CI's clone), over the
  user's home and the agent's HOME (their keys and other tools' tokens), over the user's
  checkout (its uncommitted files, `.env`) and over `.git/kairo` (the store, other
  attempts' files); the programs the agent needs bound back read-only: its PATH entries,
  its own program, the Python running kairo-orch (`_programs`);
- the repository's git directory read-only, its `config` reduced to what git needs to
  read the repository (a remote's URL may hold a token); the worktree's private git
  directory a scratch copy with HEAD detached at the attempt's start, and new objects in a
  scratch object directory borrowing the repository's as an alternate. The agent may
  commit there, and its commits are thrown away with the scratch: the supervisor commits
  what the agent left in the worktree, through an index of its own (git/commit.py).

Under bwrap, agents that keep state (Claude Code, Codex) keep it in the subtask's state
directory (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`), never the user's: the user's logins and
settings are not theirs, and what they write there never runs in the user's next session.
They log in with a key in their environment (CREDENTIALS); an OAuth login is not copied.

The sandbox wraps the agent program alone (AgentAdapter.argv's `contain`): the in-pane
runner and the stream filter that counts its tokens run outside it, and the attempt's run
directory, where they write its records and its usage, is read-only inside (the agent reads
its prompt there). Only a kind whose agent claims its own usage (`claims_usage`: a shell
command, which has no filter) gets its usage file, that one file, writable. The wrapper is
part of the agent's command line under the runner, so the runner's process-group kill
reaches it (no --new-session).

Whatever the kind, variables that are secrets by their name or by their value
(core/secrets.py) are withheld unless the plan passes them (`sandbox.pass_env`) or the
agent's kind needs them to log in.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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

#: The uid and gid the agent has inside: not root, whom bubblewrap would otherwise keep.
SANDBOX_UID = 1000
#: Who the agent's own git commits as, inside (its commits never leave the sandbox).
AGENT_NAME, AGENT_EMAIL = "kairo-orch agent", "agent@kairo-orch.invalid"

# Where the sockets of a machine live, and what is nobody's but the session's. Not
# /var/tmp: it outlives a boot and holds checkouts and installed tools (a CI's clone).
_HIDDEN_ROOTS = ("/tmp", "/run", "/dev/shm")

# Folders of a home that hold many tools' files: a tool in one of them is bound by its own
# folder (~/.local/bin), not the whole (~/.local/share holds keyrings).
_SHARED_HOME_FOLDERS = frozenset({".local", ".cache", ".config", ".var"})

# The sections of a repository's config that git needs to read it: not `remote` (a URL
# may hold a token), `credential`, `http` (headers), `include` or anything else.
_GIT_CONFIG_KEPT = frozenset({"core", "extensions"})


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
    """Where one attempt's agent works, and what of it is its own."""

    worktree: Path
    run_dir: Path  # the attempt's files: read-only inside (the prompt)
    git_common_dir: Path
    #: The agent's state, kept across the subtask's attempts until `clean`, and the
    #: variables that tell its program where it is (AgentAdapter.state_variables).
    state_dir: Path | None = None
    state_variables: tuple[str, ...] = ()
    #: The commit the attempt starts from: the scratch git directory's detached HEAD.
    start_commit: str | None = None
    #: The user's checkout, hidden: what it holds uncommitted is theirs alone.
    checkout: Path | None = None
    #: What the agent reaches when its network is `endpoint`
    #: (agents.endpoints.egress_routes); None: nothing at all.
    egress: EgressRoutes | None = None
    #: The usage file, writable for an agent that appends its own (AgentAdapter.claims_usage).
    usage_claims: Path | None = None

    @property
    def scratch(self) -> Path:
        """What the agent may write of its attempt's: TMPDIR and its git scratch."""
        return self.run_dir / "scratch"


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


@dataclass(frozen=True)
class BwrapSandbox:
    binary: str
    network: Network = "endpoint"
    writable: tuple[str, ...] = ()
    kind: str = "bwrap"
    environment: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    def wrap(self, argv: list[str], place: AgentPlace) -> list[str]:
        # Under `endpoint`: egress in front of bubblewrap, outside, and the forwarder in
        # front of the agent, inside (a program of the sandbox's like the agent's own).
        egress = _through_egress(argv, place) if self.network == "endpoint" else None
        inside = argv if egress is None else egress.inside
        scratch = place.scratch
        # Made anew: what an agent of an earlier run of this attempt left (a link where
        # a file of ours goes) is gone, not written through.
        if scratch.exists():
            shutil.rmtree(scratch)
        tmp, objects = scratch / "tmp", scratch / "objects"
        for folder in (tmp, objects):
            folder.mkdir(parents=True)
        common = place.git_common_dir.resolve()
        private = _private_git_dir(place.worktree)
        hidden = self._hidden(place)
        args = [self.binary, "--unshare-user", "--uid", str(SANDBOX_UID)]
        args += ["--gid", str(SANDBOX_UID), "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        # No capability, not even as root in its namespace: no `mount -o remount,rw /`.
        args += ["--cap-drop", "ALL", "--die-with-parent"]
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for folder in hidden:
            args += ["--tmpfs", str(folder)]
        # Read-only, bound back over what was hidden: the repository's git directory (a
        # bind of itself where nothing hid it: harmless), the programs, the prompt.
        args += ["--ro-bind", str(common), str(common)]
        config = _reduced_git_config(common, scratch)
        if config is not None:
            args += ["--ro-bind", str(config), str(common / "config")]
        sealed = [folder for folder in hidden if folder == place.checkout]
        if (common / "kairo").is_dir():
            args += ["--tmpfs", str(common / "kairo")]
            sealed.append(common / "kairo")
        for program in _programs(inside, self.environment, self._homes(), hidden):
            args += ["--ro-bind", str(program), str(program)]
        args += ["--ro-bind", str(place.run_dir), str(place.run_dir)]
        # An identity for its git in its own home (a tmpfs: yours is not there): a
        # program that finds none writes one into the repository's config (Aider does),
        # which is read-only. Its commits are its own, thrown away.
        identity = scratch / "gitconfig"
        identity.write_text(f"[user]\n\tname = {AGENT_NAME}\n\temail = {AGENT_EMAIL}\n")
        for home in self._homes():
            if home in hidden:  # a tmpfs, where the file can be made
                args += ["--ro-bind", str(identity), str(home / ".gitconfig")]
        writable = [place.worktree, scratch]
        if place.usage_claims is not None:  # that one file of the run directory: its word
            writable.append(place.usage_claims)
        if place.state_dir is not None:
            place.state_dir.mkdir(parents=True, exist_ok=True)
            writable.append(place.state_dir)
        writable += [Path(p).expanduser() for p in self.writable]
        for path in writable:
            if path.exists():
                args += ["--bind", str(path), str(path)]
        if private is not None:
            copy = _scratch_git_dir(private, scratch / "git", place.start_commit)
            args += ["--bind", str(copy), str(private)]
        args += ["--setenv", "GIT_OBJECT_DIRECTORY", str(objects)]
        args += ["--setenv", "GIT_ALTERNATE_OBJECT_DIRECTORIES", str(common / "objects")]
        args += ["--setenv", "TMPDIR", str(tmp)]
        for name in place.state_variables:
            assert place.state_dir is not None
            args += ["--setenv", name, str(place.state_dir)]
        # Claude Code's own switch: it allows bypassPermissions under root only in a sandbox.
        args += ["--setenv", "IS_SANDBOX", "1"]
        if self.network != "all":
            args.append("--unshare-net")  # its own loopback, and nothing else
        # What hides the user's files is no place to write either: a write there fails
        # as it would have, rather than vanishing with the sandbox.
        for folder in sealed:
            args += ["--remount-ro", str(folder)]
        if egress is None:
            return [*args, "--chdir", str(place.worktree), "--", *argv]
        args += egress.bwrap
        return [*egress.front, *args, "--chdir", str(place.worktree), "--", *inside]

    def _homes(self) -> tuple[Path, ...]:
        """The user's home and the agent's HOME, where they differ."""
        homes = {Path(pwd.getpwuid(os.getuid()).pw_dir)}
        if self.environment.get("HOME"):
            homes.add(Path(self.environment["HOME"]))
        return tuple(sorted(h for h in homes if h != Path("/")))

    def _hidden(self, place: AgentPlace) -> list[Path]:
        """What an empty tmpfs goes over, outermost first (a later mount inside an earlier
        one stays seen)."""
        hidden = [Path(root) for root in _HIDDEN_ROOTS if Path(root).is_dir()]
        hidden += [home for home in self._homes() if home.is_dir() or _under(home, hidden)]
        if place.checkout is not None and place.checkout != Path("/"):
            hidden.append(place.checkout)
        return sorted(set(hidden), key=lambda path: len(path.parts))


@dataclass(frozen=True)
class _Egress:
    front: list[str]  # egress and its options, in front of bubblewrap, outside
    bwrap: list[str]  # bubblewrap's arguments for it: the proxy's variables, the socket
    inside: list[str]  # the forwarder in front of the agent's command line


def _through_egress(argv: list[str], place: AgentPlace) -> _Egress | None:
    """How an agent whose network is its model endpoint reaches it; None for one that has
    no model to reach (a shell command given no base URL): no network is all it needs."""
    routes = place.egress
    if routes is None or not routes.lead_anywhere:
        return None
    # Bound read-only: the agent may connect to the socket, not replace it. Egress makes
    # the directory before bubblewrap starts.
    socket_dir = place.run_dir / "egress"
    socket = str(socket_dir / "egress.sock")
    options = ["--socket", socket, "--proxy", str(routes.proxy)]
    options += [arg for entry in routes.allow for arg in ("--allow", entry)]
    options += [arg for port, to in routes.forwards for arg in ("--forward", f"{port}={to}")]
    options += [arg for port, url in routes.reverse for arg in ("--reverse", f"{port}={url}")]
    options += [arg for name in routes.hold for arg in ("--hold", name)]
    proxy = f"http://127.0.0.1:{routes.proxy}"
    environment = {
        **{name: proxy for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")},
        **{name: "localhost,127.0.0.1,::1" for name in ("NO_PROXY", "no_proxy")},
    }
    listen = [arg for port in routes.ports for arg in ("--listen", str(port))]
    inside = [*_program(agents.forwarder.__file__, ["--socket", socket, *listen]), *argv]
    bwrap = [arg for item in environment.items() for arg in ("--setenv", *item)]
    bwrap += ["--ro-bind", str(socket_dir), str(socket_dir)]
    return _Egress(_program(agents.egress.__file__, options), bwrap, inside)


def _program(module_file: str, options: list[str]) -> list[str]:
    """A standard-library program of ours, by path under `-I -S` as the stream filters are
    (the worktree may hold an `agents/` package of its own), its options, then `--`."""
    return [sys.executable, "-I", "-S", str(Path(module_file).absolute()), *options, "--"]


def _under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _programs(
    argv: Sequence[str],
    environment: Mapping[str, str],
    homes: Sequence[Path],
    hidden: Sequence[Path],
) -> list[Path]:
    """What the agent runs that a tmpfs would hide: the folders of its PATH, its program
    and the paths its command line names, the Python kairo-orch runs on (the stream
    filters), each as the folder of the tool that holds it (~/.pyenv for
    ~/.pyenv/shims/python3: the shim runs the rest)."""
    named: list[Path] = [Path(entry) for entry in environment.get("PATH", "").split(":") if entry]
    program = shutil.which(argv[0], path=environment.get("PATH")) if argv else None
    named += [Path(program)] if program else []
    named += [Path(arg) for arg in argv if arg.startswith("/")]
    named += [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable)]
    found: set[Path] = set()
    for path in named:
        for form in {path, Path(os.path.realpath(path))}:
            if form.exists() and _under(form, hidden):
                folder = _tool_folder(form, homes)
                # A folder holding something hidden (a program beside the checkout)
                # would show it again: the program alone, then.
                found.add(form if any(folder in h.parents for h in hidden) else folder)
    # Outermost first, and none inside another: bwrap binds them in order.
    ordered = sorted(found, key=lambda path: len(path.parts))
    return [p for i, p in enumerate(ordered) if not _under(p, ordered[:i])]


def _tool_folder(path: Path, homes: Sequence[Path]) -> Path:
    for home in homes:
        if home in path.parents:
            parts = path.relative_to(home).parts
            depth = 2 if parts[0] in _SHARED_HOME_FOLDERS and len(parts) > 1 else 1
            return home.joinpath(*parts[:depth])
    return path if path.is_dir() else path.parent


def _private_git_dir(worktree: Path) -> Path | None:
    """The worktree's own git directory, as kairo-orch trusts it (never as a `.git` file an
    agent rewrote names it); None for a checkout that is no linked worktree."""
    from orchestrator.git.invocation import locate

    dirs = locate(worktree)
    return dirs.git_dir if dirs.git_dir != dirs.common else None


def _scratch_git_dir(private: Path, scratch: Path, start_commit: str | None) -> Path:
    """A copy of the worktree's own git directory that the agent may write: its index (a
    copy, so that git sees the files unchanged), and HEAD detached at `start_commit`, since
    no branch can move in the read-only common directory."""
    scratch.mkdir(parents=True)
    for name in ("commondir", "gitdir", "index", "config.worktree", "HEAD"):
        if (private / name).is_file():
            shutil.copyfile(private / name, scratch / name, follow_symlinks=False)
    if start_commit is not None:
        (scratch / "HEAD").write_text(f"{start_commit}\n", encoding="ascii")
    return scratch


def _reduced_git_config(common: Path, scratch: Path) -> Path | None:
    """The repository's config with only the sections git needs to read the repository,
    written into the scratch; None where there is no config to reduce."""
    try:
        text = (common / "config").read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    kept: list[str] = []
    keeping = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            name = stripped[1:].split("]")[0].split()[0].split(".")[0].strip('"').lower()
            keeping = name in _GIT_CONFIG_KEPT
        if keeping:
            kept.append(line)
    reduced = scratch / "git-config"
    reduced.write_text("\n".join(kept) + "\n", encoding="utf-8", errors="surrogateescape")
    return reduced


def bwrap_unavailable() -> str | None:
    """Why no bubblewrap sandbox can be made here, or None when one can."""
    binary = shutil.which("bwrap")
    if binary is None:
        return (
            "bubblewrap is not installed (`make install` installs it, or apt-get install "
            "bubblewrap)"
        )
    problem = _bwrap_problem(binary)
    return None if problem is None else f"bubblewrap cannot make a sandbox here: {problem}"


@functools.cache
def _bwrap_problem(binary: str) -> str | None:
    """Why bubblewrap cannot make a sandbox here (AppArmor or a kernel forbidding user
    namespaces, a container without them), found by making one; None when it can."""
    probe = [binary, "--unshare-user", "--uid", str(SANDBOX_UID), "--unshare-pid"]
    probe += ["--unshare-ipc", "--unshare-uts", "--cap-drop", "ALL", "--die-with-parent"]
    probe += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    try:
        done = subprocess.run(
            [*probe, "--", "true"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if done.returncode == 0:
        return None
    return (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]


def sandbox_for(spec: SandboxSpec, network: Network | None = None) -> ExecutionSandbox:
    """The sandbox of the plan (`auto`: bwrap where it runs), its network the agents'
    unless `network` is given (a check's); EnvironmentProblem (exit 5) when the plan names
    bwrap and it cannot run here."""
    if spec.kind == "local":
        return LocalSandbox()
    problem = bwrap_unavailable()
    if problem is None:
        binary = shutil.which("bwrap")
        assert binary is not None
        return BwrapSandbox(
            binary=binary, network=network or spec.network_for("agent"), writable=spec.writable
        )
    if spec.kind == "auto":
        return LocalSandbox()
    raise EnvironmentProblem(f"the plan's sandbox is bwrap, but {problem}")
