"""The supervisor process: forked from the command that starts it, ahead of its execution.

A supervisor needs what `start` and `resume` have already imported (pydantic's models of
the plan and the events, the store) and more of its own (trio, structlog, the runtime),
about as much again (docs/benchmarks.md, "Figures behind the code"). A new interpreter
would import the shared part a second time, on the two cores that are about to fill
worktrees. So the command forks once it has imported what both use: the child becomes the
supervisor (a session leader of its own, no terminal, its output on a pipe) and imports
the rest while the parent validates the plan and creates the execution. Once the execution
exists it is handed over: one line of JSON on a pipe, the arguments of
`orchestrator.runtime.daemon` and its log file.

A command that fails before the handover just closes the pipe (or exits), and the waiting
child ends quietly at the end of it: nothing was claimed, nothing is left.

The fork is taken before the command opens its store, and where it runs no thread (its
git and tmux calls are subprocesses): a SQLite connection carried across a fork would
corrupt the log (the child's copy of SQLite's lock bookkeeping thinks it holds the parent's
locks), and a lock another thread held at the fork stays held in the child for ever, so
forking with either is refused. The child retitles itself (`ps` would show it as the
command it was forked from: `kairo-orch start plan.yaml`), `kairo-orch supervisor ID in
REPO`, and exits with `os._exit`, never unwinding into the command.

Standard library only: the CLI imports this before anything heavy.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from orchestrator.errors import EnvironmentProblem, KairoError, deliberate, exit_status
from orchestrator.runtime.without_rich import without_rich

if TYPE_CHECKING:
    from orchestrator.git.repo import RepoPaths


#: Starts the last line a supervisor that failed writes (to the command before a handover,
#: to its log after): why, in one line, which is what the command tells the user.
FAREWELL = "kairo-orch supervisor failed: "
#: How much of a log's end is searched for that line: it is written last.
LOG_TAIL_BYTES = 64 * 1024


def supervisor_log_path(run_root: Path) -> Path:
    return run_root / "supervisor.log"


def daemon_arguments(
    execution_id: str,
    *,
    repo: RepoPaths,
    store_url: str | None,
    handover_version: int,
    resume: bool = False,
    rerun_interrupted: bool = False,
    stop: str | None = None,
    previous_write: str | None = None,
) -> list[str]:
    """The arguments of `orchestrator.runtime.daemon` for `execution_id` in `repo`.

    The caller has claimed the execution; `handover_version` passes that claim on, and
    `previous_write` says when the row was last written before (ownership.Claim).
    """
    arguments = [
        execution_id,
        "--repo",
        str(repo.toplevel),
        "--git-dir",
        str(repo.git_dir),
        "--git-common-dir",
        str(repo.git_common_dir),
        "--handover-version",
        str(handover_version),
    ]
    if store_url:
        arguments += ["--store", store_url]
    if resume:
        arguments.append("--resume")
    if rerun_interrupted:
        arguments.append("--rerun-interrupted")
    if stop is not None:
        arguments += ["--stop", stop]
    if previous_write is not None:
        arguments += ["--previous-write", previous_write]
    return arguments


class PendingSupervisor:
    """A forked supervisor that is importing, or waiting for its execution."""

    def __init__(self) -> None:
        _refuse_to_fork_unsafely()
        handover_read, handover_write = os.pipe()
        words_read, words_write = os.pipe()
        sys.stdout.flush()  # what this command printed must not be printed twice
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(handover_write)
            os.close(words_read)
            _become_supervisor(handover_read, words_write)
        os.close(handover_read)
        os.close(words_write)
        self.pid = pid
        self._handover = os.fdopen(handover_write, "wb")
        # Only a failure to start writes here (an import error, say): it is what the user
        # is told. After the handover the child's output goes to its log.
        self._words = os.fdopen(words_read, "rb")
        self._status: int | None = None
        self._log_path: Path | None = None
        self._log_start = 0
        self.handed_over = False

    def hand_over(self, arguments: list[str], *, log_path: Path) -> None:
        """Give it its execution: the daemon's `arguments`; its output goes to `log_path`."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        # Where its own words will begin: an earlier supervisor's (resume) come before.
        self._log_start = log_path.stat().st_size if log_path.exists() else 0
        line = json.dumps({"arguments": arguments, "log": str(log_path)}) + "\n"
        try:
            self._handover.write(line.encode())
            self._handover.close()
        except BrokenPipeError:
            self._reap(block=True)
            raise EnvironmentProblem(
                f"the supervisor process could not start: {self._last_words()}"
            ) from None
        self.handed_over = True
        self._log_path = log_path

    def release(self) -> None:
        """Let go of its pipes. Before a handover this abandons it: it reads the end of
        the pipe and exits quietly, as after a command that failed."""
        with suppress(BrokenPipeError):
            self._handover.close()
        self._words.close()

    def failure(self) -> str | None:
        """Why it is gone, once it exited: its farewell (FAREWELL), on the pipe or in its
        log, else the last line it wrote to the pipe, else its exit status."""
        if not self._reap(block=False):
            return None
        return self._last_words()

    def kill(self) -> None:
        """Kill it (it never started its execution in time) and collect its status."""
        if not self._reap(block=False):
            with suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self._reap(block=True)

    def wait(self) -> int:
        """Its exit status, once it has exited (the shell's: 128+N for signal N)."""
        self._reap(block=True)
        assert self._status is not None
        return self._status

    def _reap(self, *, block: bool) -> bool:
        """Whether it has exited (collecting its status once)."""
        if self._status is None:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
            if pid == 0:
                return False
            self._status = os.waitstatus_to_exitcode(status)
        return True

    def _last_words(self) -> str:
        """Why it exited, as `failure` says (read once it has exited)."""
        said = ""
        if not self._words.closed:
            with self._words:
                said = self._words.read().decode(errors="replace")
        lines = [line.strip() for line in said.splitlines() if line.strip()]
        farewell = _last_farewell(lines) or self._farewell_in_log()
        if farewell:
            return farewell
        if lines:  # a crash of the interpreter itself, say, which writes no farewell
            return lines[-1]
        assert self._status is not None
        if self._status < 0:
            return f"it was killed by signal {-self._status} before it said anything"
        return f"it exited with status {self._status} and said nothing"

    def _farewell_in_log(self) -> str | None:
        """After a handover: the farewell at the end of its log, if it wrote one."""
        if self._log_path is None:
            return None
        try:
            with self._log_path.open("rb") as log:
                log.seek(max(self._log_start, log.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
                tail = log.read().decode(errors="replace")
        except OSError:
            return None
        return _last_farewell(tail.splitlines())


def _last_farewell(lines: list[str]) -> str | None:
    farewells = [line for line in lines if line.startswith(FAREWELL)]
    if not farewells:
        return None
    return farewells[-1].removeprefix(FAREWELL).strip() or None


def farewell(error: BaseException) -> str:
    """The one line FAREWELL introduces: the message of one of our errors; else the
    exception's type and text."""
    error = deliberate(error)
    if isinstance(error, KairoError):
        return error.message.replace("\n", " ")
    return f"{type(error).__name__}: {error}".replace("\n", " ")


def _refuse_to_fork_unsafely() -> None:
    stores = sys.modules.get("orchestrator.store.base")  # not imported: none is open
    if stores is not None and stores.open_stores():
        raise AssertionError("a supervisor is forked only before the command opens its store")
    threading = sys.modules.get("threading")  # not imported: no thread was started
    if threading is not None and threading.active_count() > 1:
        raise AssertionError("a supervisor is forked only from a command that runs no thread")


@contextmanager
def imports_out_of_gc() -> Iterator[None]:
    """The block's imports, without the cyclic garbage collector's passes over them.

    Imports make tens of thousands of objects (modules, classes, functions) that live as
    long as the process and are almost never garbage, so the collector's passes while they
    are made (over a hundred of them for a supervisor's imports) find next to nothing, at a
    measurable CPU cost on each side of the fork (docs/benchmarks.md). Afterwards every
    object there is frozen (`gc.freeze`), so that no later pass walks them either, and a
    forked child leaves their pages unwritten. That includes what garbage in cycles the
    imports left, never to be collected: a little memory once, the price of never walking
    the rest.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@contextmanager
def pending_supervisor() -> Iterator[PendingSupervisor]:
    """A supervisor starting up for the block, which abandons it unless it hands over."""
    supervisor = PendingSupervisor()
    try:
        yield supervisor
    finally:
        supervisor.release()


def _become_supervisor(handover_fd: int, words_fd: int) -> NoReturn:
    """In the forked child: leave the command's session and terminal, import the
    supervisor, wait for the execution and run it. Never returns into the command."""
    status = 1
    try:
        os.setsid()  # no terminal: closing the user's kills nothing
        _retitle("kairo-orch supervisor, waiting for its execution")
        null_fd = os.open(os.devnull, os.O_RDONLY)
        _let_go_of_inherited(keep=(handover_fd, words_fd, null_fd), null_fd=null_fd)
        for fd, target in ((0, null_fd), (1, words_fd), (2, words_fd)):
            os.dup2(target, fd)
        os.close(null_fd)
        os.close(words_fd)
        # Files of its own on those descriptors: the command's may have been replaced by
        # something that does not write to them (a test runner's capture, say).
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
        # As `python -P`: what it imports from here on is not looked for in the directory
        # it was started from, where a repository's own `trio/` could shadow the real one.
        here = {"", "."}
        with suppress(OSError):  # a directory deleted under the user's shell
            here.add(str(Path.cwd()))
        sys.path[:] = [p for p in sys.path if p not in here]
        status = _serve(handover_fd)
    except SystemExit as done:
        status = exit_status(done)
    except BaseException as error:
        with suppress(BaseException):
            if not isinstance(deliberate(error), KairoError):  # its log said why already
                traceback.print_exc()
            print(FAREWELL + farewell(error), file=sys.stderr)
    finally:
        with suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


def _let_go_of_inherited(*, keep: tuple[int, ...], null_fd: int) -> None:
    """Let go of what the command was given beyond stdin, stdout and stderr (a make's
    jobserver pipe, say), as a new process's `close_fds` would: the supervisor may run for
    days. Each is pointed at /dev/null rather than closed, so that no Python object that
    may still hold its number could later close the number reused by something else (the
    store's database), and only the open ones are visited (/dev/fd), however high the
    limit on descriptors is."""
    try:
        open_now = [int(entry.name) for entry in Path("/dev/fd").iterdir()]
    except OSError:
        return  # nowhere to look: they stay, as before there was a fork
    for fd in open_now:
        if fd > 2 and fd not in keep:
            with suppress(OSError):  # the listing's own descriptor, closed by now
                os.fstat(fd)
                os.dup2(null_fd, fd)


def _serve(handover_fd: int) -> int:
    without_rich()
    with imports_out_of_gc():
        from orchestrator.runtime import daemon  # its own imports, beside the command's work

    with os.fdopen(handover_fd, "rb") as handover:
        line = handover.readline()
    if not line.strip():
        return 0  # the command that forked it failed before it had an execution
    handed_over = json.loads(line)
    _output_to(handed_over["log"])
    arguments: list[str] = handed_over["arguments"]
    repo = arguments[arguments.index("--repo") + 1]
    _retitle(f"kairo-orch supervisor {arguments[0]} in {repo}")
    return daemon.main(arguments)


def _retitle(title: str) -> None:
    """What `ps` shows for this process, and its name (/proc comm) `kairo-orch`, which
    `ps -e` shows and ownership.py also goes by. setproctitle writes the title over the
    memory that /proc/PID/environ shows too: what it showed, the supervisor's whole
    environment with its secrets, is no longer there for an agent to read."""
    from setproctitle import setproctitle

    setproctitle(title)
    with suppress(OSError):  # not Linux: the title says it
        Path("/proc/self/comm").write_text("kairo-orch", encoding="ascii")


def _output_to(log: str) -> None:
    """stdout and stderr onto the log, off the pipe the command may be reading."""
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
