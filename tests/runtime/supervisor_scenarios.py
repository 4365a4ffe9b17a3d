"""What test_supervisor_process.py runs, each in an interpreter of its own, as a command is:
the test process itself runs threads (trio's workers), and a supervisor is not forked from
a process that runs any. Plain functions that assert; they return normally or fail."""

from __future__ import annotations

import gc
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from orchestrator.errors import EnvironmentProblem
from orchestrator.runtime.supervisor_process import (
    FAREWELL,
    PendingSupervisor,
    imports_out_of_gc,
    pending_supervisor,
)

WAIT_S = 10.0


def _eventually(condition: object) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.001)


def abandoned() -> None:
    with pending_supervisor() as supervisor:
        # The command failed (a bad plan, say) before it had an execution.
        supervisor.release()
        assert supervisor.wait() == 0
        assert supervisor.failure() == "it exited with status 0 and said nothing"


def a_session_of_its_own_named_kairo_orch() -> None:
    with pending_supervisor() as supervisor:
        # It leaves our session first thing, so that a terminal's hangup or Ctrl-C never
        # reaches it, and takes a name `ps -e` and the ownership check know it by.
        _eventually(lambda: os.getsid(supervisor.pid) == supervisor.pid)
        assert os.getsid(supervisor.pid) == supervisor.pid != os.getsid(0)
        comm = Path(f"/proc/{supervisor.pid}/comm")
        _eventually(lambda: comm.read_text().strip() == "kairo-orch")
        assert comm.read_text().strip() == "kairo-orch"
        title = Path(f"/proc/{supervisor.pid}/cmdline").read_bytes().rstrip(b"\0")
        assert title == b"kairo-orch supervisor, waiting for its execution", title
        assert supervisor.failure() is None
        supervisor.release()
        assert supervisor.wait() == 0


def handed_over_to_its_log(workdir: str) -> None:
    repo = Path(workdir) / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    log = Path(workdir) / "runs" / "supervisor.log"
    log.parent.mkdir()
    log.write_text(FAREWELL + "an earlier supervisor's, before a resume\n")
    with pending_supervisor() as supervisor:
        # No such execution: the supervisor fails at once, and says so in its log, last
        # in one line, which is what the command tells the user (nothing went to the pipe
        # it reads before a handover).
        supervisor.hand_over(["01NOSUCHEXECUTION", "--repo", str(repo)], log_path=log)
        assert supervisor.wait() != 0
        said = supervisor.failure()
    # A deliberate error, said in a sentence: no traceback.
    assert "supervisor_stopped" in log.read_text() and "Traceback" not in log.read_text()
    assert said is not None and "01NOSUCHEXECUTION" in said, said
    assert log.read_text().splitlines()[-1] == FAREWELL + said


def a_farewell_comes_before_what_else_it_said(workdir: str) -> None:
    class Noisy:  # something the supervisor's imports print, before the handover
        @staticmethod
        def find_spec(name: str, *_: object) -> None:
            if name == "orchestrator.runtime.daemon":
                print("DeprecationWarning: something the imports said")

    sys.meta_path.insert(0, Noisy)  # type: ignore[arg-type]
    repo = Path(workdir)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with pending_supervisor() as supervisor:
        supervisor.hand_over(["01NOSUCHEXECUTION", "--repo", workdir], log_path=repo / "log")
        assert supervisor.wait() != 0
        said = supervisor.failure()
    assert said is not None and "01NOSUCHEXECUTION" in said, said


def a_farewell_is_only_its_own(workdir: str) -> None:
    log = Path(workdir) / "supervisor.log"
    log.write_text(FAREWELL + "an earlier supervisor's, before a resume\n")
    with pending_supervisor() as supervisor:
        supervisor.hand_over(["01X", "--repo", workdir], log_path=log)
        os.kill(supervisor.pid, signal.SIGKILL)  # before it could say anything
        assert supervisor.wait() == -signal.SIGKILL
        assert supervisor.failure() == "it was killed by signal 9 before it said anything"


def handed_over_after_it_died(workdir: str) -> None:
    with pending_supervisor() as supervisor:
        assert supervisor.failure() is None  # still importing, or waiting
        os.kill(supervisor.pid, signal.SIGKILL)
        assert supervisor.wait() == -signal.SIGKILL
        try:
            supervisor.hand_over(["01X", "--repo", workdir], log_path=Path(workdir) / "log")
        except EnvironmentProblem as problem:
            assert "could not start: it was killed by signal 9" in problem.message
        else:
            raise AssertionError("a handover to a dead supervisor went through")


def refused_while_a_store_is_open(workdir: str) -> None:
    from orchestrator.store.sqlite import SqliteStore

    with SqliteStore(Path(workdir) / "kairo.db"):
        _fork_refused("before the command opens its store")
    abandoned()  # closed again: forked as usual


def refused_while_a_postgresql_store_is_open(url: str) -> None:
    from orchestrator.store.postgres import PostgresStore

    with PostgresStore(url):
        _fork_refused("before the command opens its store")
    abandoned()


def refused_while_a_thread_runs() -> None:
    go = threading.Event()
    thread = threading.Thread(target=go.wait)
    thread.start()
    try:
        _fork_refused("runs no thread")
    finally:
        go.set()
        thread.join()
    abandoned()


def _fork_refused(why: str) -> None:
    try:
        PendingSupervisor()
    except AssertionError as refusal:
        assert why in str(refusal)
    else:
        raise AssertionError(f"forked, though it should have been refused ({why})")


def keeps_none_of_the_commands_other_descriptors() -> None:
    # A pipe the command was given (a make's jobserver, a caller's): its reader sees the
    # end of it once the command closes its end, though the supervisor lives on.
    read_end, write_end = os.pipe()
    with pending_supervisor() as supervisor:
        os.close(write_end)
        ready, _, _ = select.select([read_end], [], [], WAIT_S)
        assert ready and os.read(read_end, 1) == b""
        supervisor.release()
        assert supervisor.wait() == 0


def killed_when_too_slow() -> None:
    # What `start` does when it sees no supervisor_started in time: nothing runs on.
    with pending_supervisor() as supervisor:
        supervisor.kill()
        assert supervisor.wait() == -signal.SIGKILL
        assert supervisor.failure() == "it was killed by signal 9 before it said anything"
        supervisor.kill()  # once more: nothing to do


def imports_out_of_gc_leaves_the_collector_as_it_was() -> None:
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with imports_out_of_gc():
        assert not gc.isenabled()
        import decimal  # noqa: F401  # anything not yet imported
    # On again for the rest of a long run, with what was imported out of its sight.
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
    try:
        with imports_out_of_gc():
            import a_module_that_is_not_there  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        pass
    assert gc.isenabled()
    gc.disable()  # a caller's own choice is kept
    with imports_out_of_gc():
        pass
    assert not gc.isenabled()
