"""Starting a supervisor process ahead of its execution, so that its start-up overlaps ours.

A supervisor is a new interpreter that imports trio, structlog, pydantic and the whole
runtime: about 0.3 s, which used to come between `start` creating an execution and the
first worktree. So `start` and `resume` start the process first, before their own heavy
imports, and it imports while they validate the plan and create the execution (two
cores do both at once). Once the execution exists, it is handed over: one line of JSON on
the process's stdin, the arguments of `orchestrator.runtime.daemon` and its log file.

A command that fails before the handover just closes the pipe (or exits), and the waiting
process ends quietly at the end of its stdin: nothing was claimed, nothing is left.

Standard library only: the CLI imports this before anything heavy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from orchestrator.errors import EnvironmentProblem

#: The daemon's only argument when it is to wait for its execution on stdin.
AWAIT_HANDOVER = "--await-handover"


def supervisor_log_path(run_root: Path) -> Path:
    return run_root / "supervisor.log"


def daemon_arguments(
    execution_id: str,
    *,
    repo_root: Path,
    store_url: str | None,
    handover_version: int,
    resume: bool = False,
    rerun_interrupted: bool = False,
    stop: str | None = None,
) -> list[str]:
    """The arguments of `orchestrator.runtime.daemon` for `execution_id`.

    The caller has claimed the execution; `handover_version` passes that claim on.
    """
    arguments = [
        execution_id,
        "--repo",
        str(repo_root),
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
    return arguments


class PendingSupervisor:
    """A supervisor process that is importing, or waiting for its execution."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            # -P: the current directory (the user's) is not searched for modules, so a
            # project with a top-level `orchestrator/` of its own cannot shadow ours.
            [sys.executable, "-P", "-m", "orchestrator.runtime.daemon", AWAIT_HANDOVER],
            stdin=subprocess.PIPE,
            # Only a failure to start writes here (an import error, say): it is what the
            # user is told. After the handover its output goes to its log.
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # no terminal: closing ours kills nothing
            close_fds=True,
        )
        self.handed_over = False

    @property
    def process(self) -> subprocess.Popen[bytes]:
        return self._process

    def hand_over(self, arguments: list[str], *, log_path: Path) -> None:
        """Give it its execution: the daemon's `arguments`; its output goes to `log_path`."""
        assert self._process.stdin is not None
        log_path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"arguments": arguments, "log": str(log_path)}) + "\n"
        try:
            self._process.stdin.write(line.encode())
            self._process.stdin.close()
        except BrokenPipeError:
            self._process.wait()
            raise EnvironmentProblem(
                f"the supervisor process could not start: {self._last_words()}"
            ) from None
        self.handed_over = True

    def abandon(self) -> None:
        """No execution for it: it reads the end of its stdin and exits."""
        if self._process.stdin is not None and not self._process.stdin.closed:
            with suppress(BrokenPipeError):
                self._process.stdin.close()
        if self._process.stdout is not None:
            self._process.stdout.close()

    def failure(self) -> str | None:
        """Why it is gone, once it exited: what it said (the end of an import error's
        traceback, say, written before it had a log), else its exit status."""
        if self._process.poll() is None:
            return None
        return self._last_words()

    def _last_words(self) -> str:
        output = self._process.stdout
        if output is None or output.closed:
            lines = []
        else:
            with output:
                lines = output.read().decode(errors="replace").strip().splitlines()
        if lines:
            return lines[-1]
        status = self._process.returncode
        if status < 0:
            return f"it was killed by signal {-status} before it said anything"
        return f"it exited with status {status} and said nothing"


@contextmanager
def pending_supervisor() -> Iterator[PendingSupervisor]:
    """A supervisor starting up for the block, which abandons it unless it hands over."""
    supervisor = PendingSupervisor()
    try:
        yield supervisor
    finally:
        if not supervisor.handed_over:
            supervisor.abandon()
        elif supervisor.process.stdout is not None:
            supervisor.process.stdout.close()


def receive_handover() -> list[str] | None:
    """In the waiting process: the daemon's arguments, with stdin, stdout and stderr
    moved off the pipes (stdout and stderr onto the log); None at the end of stdin."""
    line = sys.stdin.buffer.readline()
    if not line.strip():
        return None
    handover = json.loads(line)
    log_fd = os.open(handover["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(null_fd, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    os.close(null_fd)
    arguments: list[str] = handover["arguments"]
    return arguments
