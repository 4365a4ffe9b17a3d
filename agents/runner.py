"""The in-pane runner: wraps one agent attempt inside its tmux pane and records how it ended.

    python -I -S -c "...; from agents.runner import main; ..." SPEC_PATH   (`runner_argv`)

The supervisor is not the agent's parent (the pane is), so it cannot `wait()` for it. This
runner is: it starts the agent, tees its output to the pane and to a log, and writes two
small JSON files atomically, which are the durable truth about the attempt:

    started_path  {"pid": runner pid, "agent_pid": int|null, "pgid": int|null,
                   "cgroup": path|null, "pane_id": "%3"|null, "started_at": iso}
    exit_path     {"exit_code": int, "signal": int|null, "runner_signal": int|null,
                   "killed": bool, "ended_at": iso, "output_tail": str,
                   "output_bytes": int|null, "output_sha256": hex|null}

then wakes the supervisor with `tmux wait-for -S CHANNEL` (a hint only: the supervisor also
polls) and prints a one-line footer. `exit_code` follows the shell: 128+N for a death by
signal N, 127 when the program does not exist, 126 when it cannot be started. `signal` is
N; `runner_signal` is the SIGTERM/SIGHUP/SIGINT the runner got, if any (the attempt was
stopped rather than failing on its own); `killed` says the group had to be SIGKILLed.
`output_bytes` and `output_sha256` are of what the runner wrote to the output log (null
where it could not keep one): the supervisor tells by them a log someone else changed.
An exit record found at the start (planted, or stale) is removed first: the runner's is
the only one there may be once it has started.

The runner runs outside the attempt's sandbox (the sandbox is part of the agent's command
line, `argv`), and its files lie in the attempt's run directory, which a sandboxed agent
can read but not write. In local mode any agent may write there, so none of them is ever
written through a link planted at its name, or at its temporary file's (runner_records).

The spec (written by the supervisor; keys marked ? are optional):

    {"argv": [str, ...], "cwd": str, "env": {str: str}, "output_log": str,
     "started_path": str, "exit_path": str, "tmux_socket": str|null,
     "wake_channel": str|null, "title": str, "tmux_bin"?: str, "grace_seconds"?: float,
     "credentials_path"?: str, "cgroup"?: str}

The agent gets exactly `env` (the supervisor's choice, not the pane's, which is the tmux
server's) and the variables of its credentials file, runs in `cwd` in a new session, so
its process group can be signalled as one, and its stdin is /dev/null. The spec holds no
secret: the agent's own (its API key, what the plan passes it) are in the credentials file

    {"env": {str: str}, "redact": [[name, value], ...]}

which the supervisor writes for this runner alone and the runner removes as it reads it,
before the agent starts; what the agent prints of `redact` is cut out of its output (the
pane, the log, the exit record's tail) as it streams (agents/redaction.py). A runner that
finds no such file starts no agent (exit 126): another process took it.

Everything the agent starts is held with it (agents/containment.py): in a cgroup v2 named
`cgroup` below the runner's own, where one can be made and joined, and then `started_path`
gives its path; otherwise by the runner as their subreaper. When the agent's own process
exits, or the runner is signalled, all that is left of the attempt (its group, and
whatever left the group) is sent SIGTERM, and what still runs after the grace SIGKILL; the
exit record is written only once none of it runs: a worktree is committed and removed
after the attempt, and nothing of the attempt may keep writing to it.

Standard library only, and nothing imported that is not used: this starts once per attempt
and sits in front of the agent's startup, 16 at once in a fan-out, on the cores that fill
the worktrees. `json` and `signal` would more than double the CPU Python itself takes to
start (their Python halves import `re`, `enum` and what those import), so the runner uses
their C halves, `_json` and `_signal`, which import nothing (docs/benchmarks.md, "Figures
behind the code").
"""

# pathlib would be a visible part of the runner's startup; os.path is free. contextlib likewise
# (collections, functools); a try/except-pass is free:
# ruff: noqa: PTH100, PTH108, PTH113, PTH118, PTH120, SIM105

from __future__ import annotations

import errno
import os
import select
import sys
import time

from agents.containment import Cgroup, Subreaper, become_subreaper, own_cgroup
from agents.redaction import StreamRedactor
from agents.runner_records import create_new, json_loads, write_all, write_json_atomic

TYPE_CHECKING = False  # the `typing` import costs ~2 ms, a seventh of the runner's startup
if TYPE_CHECKING:
    import signal  # for mypy, which knows no `_signal`: the same functions and numbers
    from _hashlib import HASH  # for mypy, which knows neither `_sha256` nor `_sha2`
    from typing import NotRequired, TypedDict

    class RunnerSpec(TypedDict):
        argv: list[str]
        cwd: str
        env: dict[str, str]
        output_log: str
        started_path: str
        exit_path: str
        tmux_socket: str | None
        wake_channel: str | None
        title: str
        tmux_bin: NotRequired[str]
        grace_seconds: NotRequired[float]
        credentials_path: NotRequired[str]
        cgroup: NotRequired[str]

else:
    import _signal as signal  # signal's C half, without its IntEnums (and `enum`)

TAIL_BYTES = 4096
COMMAND_SHOWN = 200  # characters of the agent's command shown atop its pane
GRACE_SECONDS = 5.0
# After SIGKILL, how long to keep copying output that is still buffered in the pipe; a
# process outside the group (one that called setsid) may hold it open for ever.
DRAIN_SECONDS = 0.5
# How often to look whether what the agent left has ended: nothing wakes the runner for it.
LEFT_POLL_SECONDS = 0.05
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
#: In the command line of every runner (`runner_argv`), which tells the supervisor a runner
#: from the other processes (runtime/attempts.py).
RUNNER_MAIN = "from agents.runner import main"
_REQUIRED = {
    "argv": list,
    "cwd": str,
    "env": dict,
    "output_log": str,
    "started_path": str,
    "exit_path": str,
    "title": str,
}


def runner_argv(spec_path: str, *, python: str = sys.executable) -> list[str]:
    """The pane command that runs this runner on `spec_path`.

    Under `-I -S`, with this package's directory put first on sys.path by hand, rather than
    `-m agents.runner`: the pane's cwd is a worktree of the user's repository, which may
    well hold an `agents/` package of its own, and no site-packages are needed (their
    setup is start-up time). Imported, not run by path, so that its cached bytecode is
    used, not compiled anew.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bootstrap = f"import sys; sys.path.insert(0, {root!r}); {RUNNER_MAIN}; sys.exit(main())"
    return [python, "-I", "-S", "-c", bootstrap, spec_path]


def load_spec(path: str) -> RunnerSpec:
    with open(path, encoding="utf-8") as f:
        raw = json_loads(f.read())
    if not isinstance(raw, dict):
        raise TypeError("the spec is not a JSON object")
    for key, kind in _REQUIRED.items():
        if not isinstance(raw.get(key), kind):
            raise TypeError(f"spec key {key!r} is missing or not a {kind.__name__}")
    if not raw["argv"] or not all(isinstance(a, str) for a in raw["argv"]):
        raise TypeError("spec key 'argv' must be a non-empty list of strings")
    if not all(isinstance(v, str) for v in raw["env"].values()):
        raise TypeError("spec key 'env' must map names to strings")
    spec: RunnerSpec = raw  # type: ignore[assignment]  # checked field by field above
    return spec


def _now() -> str:
    # time.strftime, not datetime: one import less, and milliseconds are enough.
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


class _Tee:
    """Copies agent output to the pane and the log, keeping the last TAIL_BYTES, and the
    length and SHA-256 of what went to the log (`digest` once `start_digest` was called)."""

    def __init__(self, log_path: str) -> None:
        self.tail = bytearray()
        self.pane_fd: int | None = 1
        self.log_fd: int | None = None
        self.logged = 0
        self.digest: HASH | None = None
        self.redactor: StreamRedactor | None = None  # once the agent has credentials
        try:
            # A new file, never one planted in its place (or a link through which we
            # would write someone else's).
            self.log_fd = create_new(log_path)
        except OSError as exc:  # the attempt still runs; its tail says why there is no log
            self.write(f"kairo runner: cannot open the output log: {exc}\n".encode())

    def start_digest(self) -> None:
        """Hashes what is logged from now on: after the agent started, off the path to it
        (the hash's module is a little of the runner's start)."""
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]  # Python 3.12 on
        except ImportError:
            from _sha256 import sha256  # type: ignore[import-not-found]
        self.digest = sha256()

    def write(self, data: bytes) -> None:
        self._copy(data if self.redactor is None else self.redactor.feed(data))

    def _copy(self, data: bytes) -> None:
        self.tail += data
        if len(self.tail) > 2 * TAIL_BYTES:
            del self.tail[:-TAIL_BYTES]
        # Unbuffered writes: each chunk is in the log as soon as the agent wrote it. A pane
        # that was closed (EIO) or a full disk must not stop the attempt, only the copy.
        if self.pane_fd is not None:
            try:
                write_all(self.pane_fd, data)
            except OSError:
                self.pane_fd = None
        if self.log_fd is not None:
            try:
                write_all(self.log_fd, data)
            except OSError:  # how much went in is unknown: no digest to tell it by
                self.log_fd, self.digest = None, None
                return
            self.logged += len(data)
            if self.digest is not None:
                self.digest.update(data)

    def close(self) -> None:
        if self.redactor is not None:  # the end of the stream: nothing held back is a secret
            self._copy(self.redactor.flush())
        if self.log_fd is not None:
            try:
                os.fsync(self.log_fd)
            except OSError:
                pass
            os.close(self.log_fd)

    def text(self) -> str:
        tail = bytes(self.tail[-TAIL_BYTES:])
        while tail and tail[0] & 0xC0 == 0x80:  # do not start inside a UTF-8 sequence
            tail = tail[1:]
        return tail.decode("utf-8", "replace")

    def log_record(self) -> dict[str, object]:
        """What an exit record says of the log: null where the runner kept none whole."""
        whole = self.log_fd is not None and self.digest is not None
        return {
            "output_bytes": self.logged if whole else None,
            "output_sha256": self.digest.hexdigest() if self.digest is not None and whole else None,
        }


class _NoCredentials(Exception):
    """The agent's credentials file was not there to take, or not whole."""


def _take_credentials(path: str | None, tee: _Tee) -> dict[str, str]:
    """The variables only this agent may have (its API key, what the plan passes it), from
    the file the supervisor wrote for this runner: removed as it is read, so that no file
    keeps them; from now on, what the agent prints of them is cut out of its output."""
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as credentials:
            os.unlink(path)
            raw = json_loads(credentials.read())
    except (OSError, ValueError) as exc:
        raise _NoCredentials(f"its credentials are not in {path} ({exc})") from None
    try:
        env, redact = raw["env"], raw["redact"]  # type: ignore[index]
        secrets = [(str(name), value.encode()) for name, value in redact]
        given = _variables(env)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise _NoCredentials(f"its credentials file {path} is malformed ({exc!r})") from None
    tee.redactor = StreamRedactor(secrets)
    return given


def _variables(found: object) -> dict[str, str]:
    if not isinstance(found, dict) or not all(
        isinstance(name, str) and isinstance(value, str) for name, value in found.items()
    ):
        raise TypeError("not a map of names to values")
    return found


def _killpg(pgid: int, sig: int) -> None:
    # Either error means the group is gone (macOS answers EPERM for a group of zombies).
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class _Held:
    """All the processes of the attempt: the agent's group, and what its cgroup or its
    subreaper (the runner) holds besides (agents/containment.py)."""

    def __init__(self, cgroup_name: str | None) -> None:
        self.cgroup: Cgroup | None = None
        self.subreaper: Subreaper | None = None
        self._home: Cgroup | None = None
        parent = own_cgroup() if cgroup_name else None
        if parent is not None and cgroup_name is not None:
            try:
                cgroup = Cgroup.make(parent, cgroup_name)
            except OSError:  # not ours to write: a user without delegated cgroups
                cgroup = None
            if cgroup is not None:
                try:  # by the runner, so that the agent is in it from its first instant
                    cgroup.add()
                    self.cgroup, self._home = cgroup, Cgroup(parent)
                except OSError:  # made, but not to be joined (controllers enabled above)
                    cgroup.end()
        if self.cgroup is None and become_subreaper():
            self.subreaper = Subreaper()

    def step_out(self) -> None:
        """The runner leaves the cgroup it shared with the agent only until the agent was
        started: ending the cgroup (`cgroup.kill`) ends the attempt, not the runner."""
        if self.cgroup is not None and self._home is not None:
            try:
                self._home.add()
            except OSError:  # it may not leave: ending the cgroup would end the runner too
                self.cgroup = None

    def signal(self, agent: int, sig: int) -> None:
        _killpg(agent, sig)
        if self.cgroup is not None:
            self.cgroup.signal(sig)
        elif self.subreaper is not None:
            self.subreaper.signal(sig)

    def others_run(self, agent: int) -> bool:
        """Whether anything of the attempt but the agent, which has exited, still runs."""
        if self.cgroup is not None:
            return self.cgroup.populated()
        return self.subreaper is not None and self.subreaper.populated(agent)

    def reap(self, agent: int) -> None:
        if self.subreaper is not None:
            self.subreaper.reap(agent)

    def end(self, agent: int | None) -> None:
        """SIGKILL to whatever of the attempt is left, and its cgroup removed (`agent`: the
        agent's pid, or None where none was started)."""
        if self.cgroup is not None:
            self.cgroup.end()
        elif self.subreaper is not None and agent is not None:
            _killpg(agent, signal.SIGKILL)
            self.subreaper.end(agent)


class _State:
    """What the signal handlers saw; module-level because handlers take no context."""

    stop_signal: int | None = None


def _on_stop(signum: int, _frame: object) -> None:
    if _State.stop_signal is None:
        _State.stop_signal = signum


def _spawn(argv: list[str], cwd: str, env: dict[str, str]) -> tuple[int, int]:
    """Start the agent in a session of its own, in `cwd`, with `env`, stdin /dev/null and
    stdout and stderr on a pipe; return its pid and the pipe's read end.

    posix_spawn, not subprocess: importing subprocess (threading, selectors, contextlib) was
    about a third of this runner's start-up, paid by every agent of a fan-out. It has no
    working-directory action, so the runner itself steps into `cwd` for the spawn. An
    error (no such program or directory) is raised as the OSError it is.
    """
    out_r, out_w = os.pipe()  # both close on exec; dup2 makes the agent's 1 and 2 its own
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.chdir(cwd)
        pid = os.posix_spawn(
            _find_program(argv[0], env),
            argv,
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, out_w, 1),
                (os.POSIX_SPAWN_DUP2, out_w, 2),
            ],
            setsid=True,
            # Python ignores these; an ignored signal stays ignored across exec.
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
        )
    except BaseException:
        os.close(out_r)
        raise
    finally:
        os.close(out_w)
        os.fchdir(here)
        os.close(here)
    return pid, out_r


def _find_program(name: str, env: dict[str, str]) -> str:
    """`name` looked up on the PATH of the agent's environment, as subprocess and execvpe
    do (posix_spawnp would use the runner's, the tmux server's); relative entries and
    names with a slash are relative to the current directory, the agent's. Not
    shutil.which: its import is as slow as the runner's own start, and it would say 127
    for a program that is there but not executable, where a shell says 126."""
    if os.sep in name:
        return name
    denied = None
    for directory in os.get_exec_path(env):
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            if os.access(candidate, os.X_OK):
                return candidate
            denied = denied or candidate
    if denied is not None:  # found, but not executable: exit 126, as a shell would
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), denied)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


def _supervise(
    pid: int, out_fd: int | None, tee: _Tee, wake_r: int, grace: float, held: _Held
) -> bool:
    """Copy output until the agent and all it started are done; return whether SIGKILL was
    needed.

    The agent is left unreaped (waitid WNOWAIT) until the end, so that its pid, which is the
    group id, cannot be reused by an unrelated process while we still signal the group.
    """
    exited = False
    term_at: float | None = None
    kill_at: float | None = None
    while True:
        now = time.monotonic()
        if not exited:
            exited = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        if term_at is None and (exited or _State.stop_signal is not None):
            held.signal(pid, signal.SIGTERM)
            term_at = now
        if term_at is not None and kill_at is None and now >= term_at + grace:
            held.signal(pid, signal.SIGKILL)
            kill_at = now
        # Done once the agent exited, nobody holds the pipe open (EOF) and nothing else of
        # the attempt runs; or after SIGKILL plus a short drain.
        if exited and kill_at is not None and now >= kill_at + DRAIN_SECONDS:
            return True
        left = exited and out_fd is None and held.others_run(pid)
        if exited and out_fd is None and not left:
            return kill_at is not None
        deadline = term_at + grace if kill_at is None and term_at is not None else None
        if kill_at is not None:
            deadline = kill_at + DRAIN_SECONDS
        if left:  # nothing wakes us when they end: look again soon
            soon = now + LEFT_POLL_SECONDS
            deadline = soon if deadline is None else min(deadline, soon)
        timeout = None if deadline is None else max(0.0, deadline - now)
        fds = [wake_r] if out_fd is None else [wake_r, out_fd]
        ready, _, _ = select.select(fds, [], [], timeout)
        if wake_r in ready:
            os.read(wake_r, 512)  # SIGCHLD or a stop signal: the checks above run again
            held.reap(pid)
        if out_fd is not None and out_fd in ready:
            chunk = os.read(out_fd, 65536)
            if chunk:
                tee.write(chunk)
            else:
                os.close(out_fd)
                out_fd = None


def run(spec: RunnerSpec) -> int:
    """Run the attempt `spec` describes, record it, wake the supervisor; return its exit code."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    for stop in STOP_SIGNALS:
        signal.signal(stop, _on_stop)
    # A Python-level handler is what makes SIGCHLD write to the wakeup fd.
    signal.signal(signal.SIGCHLD, lambda _s, _f: None)

    try:  # an exit record there already is none of this runner's, which is the only one
        os.unlink(spec["exit_path"])
    except FileNotFoundError:
        pass
    tee = _Tee(spec["output_log"])
    held = _Held(spec.get("cgroup"))
    started: dict[str, object] = {"pid": os.getpid(), "agent_pid": None, "pgid": None}
    started["pane_id"] = os.environ.get("TMUX_PANE")
    killed = False
    code: int
    sig: int | None = None
    try:
        env = {**spec["env"], **_take_credentials(spec.get("credentials_path"), tee)}
        pid, out_fd = _spawn(spec["argv"], spec["cwd"], env)
    except (OSError, _NoCredentials) as exc:
        held.step_out()
        held.end(None)  # its cgroup, empty
        tee.start_digest()
        tee.write(f"kairo runner: cannot start {spec['argv'][0]!r}: {exc}\n".encode())
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        write_json_atomic(spec["started_path"], {**started, "cgroup": None, "started_at": _now()})
    else:
        held.step_out()
        started.update(agent_pid=pid, pgid=pid)
        started["cgroup"] = held.cgroup.path if held.cgroup is not None else None
        write_json_atomic(spec["started_path"], {**started, "started_at": _now()})
        tee.start_digest()
        if tee.pane_fd is not None:  # so that a quiet agent's pane says what it waits on
            _to_pane(tee.pane_fd, f"[kairo] {spec['title']}: {_command_line(spec['argv'])}\n")
        grace = float(spec.get("grace_seconds", GRACE_SECONDS))
        killed = _supervise(pid, out_fd, tee, wake_r, grace, held)
        held.end(pid)  # whatever is left, before the record says the attempt is over
        returncode = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        code, sig = (128 - returncode, -returncode) if returncode < 0 else (returncode, None)
    tee.close()
    write_json_atomic(
        spec["exit_path"],
        {
            "exit_code": code,
            "signal": sig,
            "runner_signal": _State.stop_signal,
            "killed": killed,
            "ended_at": _now(),
            "output_tail": tee.text(),
            **tee.log_record(),
        },
    )
    how = f"killed by {_signal_name(sig)} (exit {code})" if sig else f"exited {code}"
    if tee.pane_fd is not None:  # before the wake-up, after which the pane may be closed
        _to_pane(tee.pane_fd, f"[kairo] {spec['title']} {how}\n")
    _wake(spec)
    return min(code, 255)


def _command_line(argv: list[str]) -> str:
    """The agent's command, on one line of a pane: a shell agent's as its plan wrote it."""
    shown = argv[2] if argv[:2] == ["/bin/sh", "-c"] and len(argv) == 3 else " ".join(argv)
    shown = " ".join(shown.split())
    return shown if len(shown) <= COMMAND_SHOWN else shown[: COMMAND_SHOWN - 1] + "…"


def _signal_name(number: int) -> str:
    import signal as named  # here: the agent has ended, nothing waits on this runner

    try:
        return named.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _wake(spec: RunnerSpec) -> None:
    channel = spec.get("wake_channel")
    if not channel:
        return
    socket = spec.get("tmux_socket")
    argv = [spec.get("tmux_bin", "tmux"), *(["-L", socket] if socket else []), "wait-for", "-S"]
    # Failing to wake is not fatal: the exit file is written and the supervisor polls for it.
    # Without -L, tmux uses $TMUX, which inside the pane names the pane's own server.
    import subprocess  # here: the agent has ended, nothing waits on this runner's start-up

    try:
        subprocess.run([*argv, channel], stdin=subprocess.DEVNULL, capture_output=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        pass


def _to_pane(fd: int, line: str) -> None:
    try:
        write_all(fd, line.encode())
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m agents.runner SPEC_PATH", file=sys.stderr)
        return 2
    try:
        spec = load_spec(args[0])
    except (OSError, ValueError, TypeError) as exc:
        print(f"kairo runner: cannot read the spec {args[0]}: {exc}", file=sys.stderr)
        return 2
    return run(spec)


if __name__ == "__main__":
    sys.exit(main())
