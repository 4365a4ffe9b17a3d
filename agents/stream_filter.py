"""What the stream filters (`claude_stream`, `codex_stream`) share: run the agent, show its
JSON event stream readably in the pane while parsing it, and record ONE usage line.

    python -I -S agents/claude_stream.py [OPTIONS] -- PROGRAM ARGS...

The filter sits between the in-pane runner and the agent: the runner reads what the filter
prints, the filter reads the agent's stdout (JSON lines, parsed by a `Stream`) and its
stderr (copied through verbatim, its last lines kept for the closing message). When the
agent has exited, the filter appends one JSON line to the file named by KAIRO_USAGE_FILE
(always one, whatever happened, unless the filter itself is SIGKILLed; see agents.usage for
its keys) and exits with:

    the agent's status when it failed (128+N for a death by signal N, 127 when it cannot be
    started); else 1 when its stream ended in an error or with no result at all (cut short);
    else 0.

The filter runs outside the attempt's sandbox, with the runner: the sandbox wraps the
agent's own command alone (PROGRAM is then bubblewrap, ARGS end in the agent's command;
AgentAdapter.argv's `contain`), and the usage file and its live file lie in the attempt's
run directory, which is read-only inside it. So what the filter counts is what the agent's
stream showed, and nothing else: the agent can neither write those files nor reach the
filter's process. The filter writes them never through a link planted at their names
(`append_usage`, agents.live_usage.Tally).

SIGTERM, SIGINT and SIGHUP are passed on to the agent, and the filter goes on reading until
it has exited, so a stopped attempt still records what it had used. Standard library only,
like agents/runner.py: it starts once per attempt, in front of the agent.

While the agent runs, a stream that counts usage as it comes (claude's) keeps a `Tally`: the
tokens used so far, written to a live file beside the usage file (agents.usage), which the
supervisor reads to hold the execution's budget across parallel attempts; and, given
`--token-limit N` (what the attempt may still spend), the filter ends the agent itself the
moment its stream shows N tokens used, the way a timeout would, rather than a poll later.
"""

# ruff: noqa: PTH100  (os.path: pathlib would only cost startup time here)

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import stat
import subprocess
import sys
import time

from agents.live_usage import Tally, live_path

TYPE_CHECKING = False  # `typing` costs ~2 ms of startup; only mypy needs it
if TYPE_CHECKING:
    from typing import Any, Protocol

    class Stream(Protocol):
        """One agent's event format: parse each event, say how the run ended."""

        def event(self, event: dict[str, Any]) -> str | None:
            """Text to show for one JSON event (None: nothing)."""
            ...

        def finish(self, exit_code: int, stderr_tail: list[str]) -> tuple[dict[str, Any], str]:
            """The usage record (with at least `result` and `is_error`) and a closing line."""
            ...

        def wants_stop(self) -> bool:
            """Whether the agent must be stopped now (its token allowance is spent)."""
            ...


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PRIVATE = 0o600
TAIL_LINES = 5
POLL_SECONDS = 0.25
DRAIN_SECONDS = 1.0
RULE = "──"
#: The result of an attempt whose agent could not log in: no second attempt can change it
#: (continuation.py gives up at once on it).
AUTHENTICATION_FAILED = "authentication_failed"
#: The result of an attempt the filter stopped because its stream had spent its allowance.
TOKEN_BUDGET = "token_budget"
SUMMARY_CHARS = 2000  # of the agent's last message, kept for its commit's body


def tally_options(options: dict[str, str], *, limited: bool = True) -> Tally:
    """The Tally of a filter's `--token-limit N` option (where the filter can stop its
    agent: `limited`), its live file beside the usage file (KAIRO_USAGE_FILE + .live)."""
    limit = options.pop("token-limit", None) if limited else None
    if limit is not None and not limit.isdigit():
        raise ValueError(f"--token-limit must be a whole number of tokens, not {limit!r}")
    usage_file = os.environ.get("KAIRO_USAGE_FILE")
    return Tally(int(limit) if limit is not None else None, live_path(usage_file))


def filter_argv(module_file: str, options: list[str], command: list[str]) -> list[str]:
    """The command line that runs the filter in `module_file` around `command`.

    By path under `-I -S`, as the runner is: the pane's cwd is the user's worktree, which
    may hold an `agents/` package of its own, and no site-packages are needed.
    """
    return [sys.executable, "-I", "-S", os.path.abspath(module_file), *options, "--", *command]


def split_args(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """`--name value ... -- command...` -> ({name: value}, command)."""
    if "--" not in argv:
        raise ValueError("usage: ... [--option value ...] -- PROGRAM ARGS...")
    cut = argv.index("--")
    options, command = argv[:cut], argv[cut + 1 :]
    if len(options) % 2 or not all(name.startswith("--") for name in options[::2]):
        raise ValueError(f"options come in pairs, --name value: {options}")
    if not command:
        raise ValueError("no program given after --")
    pairs = zip(options[::2], options[1::2], strict=True)
    return {name[2:]: value for name, value in pairs}, command


def one_line(text: str, limit: int = 160) -> str:
    """`text` on one line, cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class _Output:
    """The pane (our stdout). A closed pane must stop the copy, never the attempt."""

    def __init__(self) -> None:
        self.open = True

    def write(self, text: str) -> None:
        if not self.open:
            return
        data = (text if text.endswith("\n") else text + "\n").encode("utf-8", "replace")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(1, view) :]
        except OSError:
            self.open = False


def append_usage(path: str | None, record: dict[str, Any]) -> None:
    """Append `record` as one line, in one write (O_APPEND keeps it whole), to the usage
    file itself: never through a link planted in its place (O_NOFOLLOW), nor into a file
    it shares its data with (a hard link) or a FIFO that would hold the filter."""
    if not path:
        return
    line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags | os.O_CLOEXEC, PRIVATE)
    except OSError as exc:
        print(f"kairo: cannot record usage in {path}: {exc}", file=sys.stderr)
        return
    try:
        facts = os.fstat(fd)
        if not stat.S_ISREG(facts.st_mode) or facts.st_nlink != 1:
            print(f"kairo: {path} is not the attempt's own usage file", file=sys.stderr)
            return
        os.write(fd, line)
    finally:
        os.close(fd)


def _status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def run(stream: Stream, command: list[str], label: str) -> int:
    """Run `command`, render and parse its output through `stream`; return our exit status."""
    out = _Output()
    usage_file = os.environ.get("KAIRO_USAGE_FILE")
    stderr_tail: list[str] = []
    # Installed first: a stop that arrives while the agent starts is passed on once it has.
    stops: list[int] = []
    proc: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: object) -> None:
        stops.append(signum)
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signum)

    for stop in STOP_SIGNALS:
        signal.signal(stop, forward)
    try:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except OSError as exc:
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        reason = f"cannot start {command[0]}: {exc.strerror or exc}"
        record, _ = stream.finish(code, [reason])
        append_usage(usage_file, {**record, "exit_code": code})
        out.write(f"{RULE} {label} did not start: {reason}")
        return code
    if stops:
        proc.send_signal(stops[0])
    _pump(proc, stream, out, stderr_tail)
    code = _status(proc.wait())
    record, closing = stream.finish(code, stderr_tail)
    append_usage(usage_file, {**record, "exit_code": code})
    out.write(closing)
    if code != 0:
        return code
    return 1 if record.get("is_error") else 0


def _pump(proc: subprocess.Popen[bytes], stream: Stream, out: _Output, tail: list[str]) -> None:
    """Read both pipes until both are closed: stdout as events, stderr as plain text.

    Once the agent has exited, a process it left behind may hold a pipe open for ever (a
    tool server, say): what is buffered is read for DRAIN_SECONDS more, then no longer.
    """
    assert proc.stdout is not None and proc.stderr is not None
    selector = selectors.DefaultSelector()
    pending = {proc.stdout.fileno(): b"", proc.stderr.fileno(): b""}
    is_events = {proc.stdout.fileno(): True, proc.stderr.fileno(): False}
    for fd in pending:
        selector.register(fd, selectors.EVENT_READ)
    exited_at: float | None = None
    stopped = False
    while pending:
        for key, _ in selector.select(timeout=POLL_SECONDS):
            fd = key.fd
            chunk = os.read(fd, 65536)
            lines = (pending[fd] + chunk).split(b"\n")
            if chunk:
                pending[fd] = lines.pop()  # an incomplete last line waits for the rest
            else:  # EOF: whatever is left is a last line without its newline
                selector.unregister(fd)
                del pending[fd]
            for raw in lines:
                _on_line(raw, is_events[fd], stream, out, tail)
        if not stopped and stream.wants_stop():
            stopped = True  # as a timeout would: the agent ends, and says what it used
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        if exited_at is None and proc.poll() is not None:
            exited_at = time.monotonic()
        if exited_at is not None and time.monotonic() > exited_at + DRAIN_SECONDS:
            for fd, rest in pending.items():
                _on_line(rest, is_events[fd], stream, out, tail)
            break
    selector.close()


def _on_line(raw: bytes, is_events: bool, stream: Stream, out: _Output, tail: list[str]) -> None:
    text = raw.decode("utf-8", "replace").rstrip("\r")
    if not text.strip():
        return
    if is_events:
        _on_stdout(text, stream, out, tail)
    else:
        out.write(text)
        _keep(tail, text)


def _on_stdout(text: str, stream: Stream, out: _Output, tail: list[str]) -> None:
    try:
        event = json.loads(text)
    except ValueError:
        event = None
    if not isinstance(event, dict):
        out.write(text)  # not an event: the agent's own words, shown as they are
        _keep(tail, text)
        return
    shown = stream.event(event)
    if shown:
        out.write(shown)


def _keep(tail: list[str], text: str) -> None:
    tail.append(text)
    del tail[:-TAIL_LINES]


def main(make_stream: Any, label: str, argv: list[str] | None = None) -> int:
    """Entry point of a filter script: `make_stream(options)` builds its Stream."""
    try:
        options, command = split_args(sys.argv[1:] if argv is None else argv)
        stream = make_stream(options)
    except (ValueError, TypeError) as exc:
        print(f"kairo {label} filter: {exc}", file=sys.stderr)
        return 2
    return run(stream, command, label)
