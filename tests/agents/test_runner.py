"""The in-pane runner, run for real inside panes of a private tmux server."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from agents.containment import own_cgroup
from agents.runner import TAIL_BYTES, runner_argv
from agents.runner_records import json_dumps, json_loads
from orchestrator.tmux.server import TmuxServer
from tests.tmux.conftest import eventually, private_tmux_server, process_gone, tmux_out

SESSION = "kairo-r"
AGENT_ENV = {"PATH": os.environ["PATH"], "MINE": "from-spec"}


@pytest.fixture
async def tmux(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AsyncIterator[TmuxServer]:
    async with private_tmux_server(monkeypatch) as server:
        await server.new_session(SESSION, window_name="sup", command=["sleep", "600"], cwd=tmp_path)
        yield server


@dataclass
class Attempt:
    directory: Path
    pane_id: str
    channel: str

    def read(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.directory / name).read_text())
        return data

    @property
    def log(self) -> str:
        return (self.directory / "output.log").read_text()

    async def wait_started(self) -> dict[str, Any]:
        # The agent runs as soon as it is spawned, maybe before the runner writes this file.
        await eventually((self.directory / "started.json").exists)
        return self.read("started.json")

    async def wait_exit(self, tmux: TmuxServer, seconds: float = 10.0) -> dict[str, Any]:
        """Wait the way the supervisor does: woken by the runner, the exit file as truth."""
        with trio.fail_after(seconds):
            while not (self.directory / "exit.json").exists():
                with trio.move_on_after(0.5):
                    await tmux.wait_for(self.channel)
        return self.read("exit.json")


async def start(
    tmux: TmuxServer, tmp_path: Path, argv: list[str], name: str = "a", **extra: object
) -> Attempt:
    directory = tmp_path / name
    directory.mkdir(exist_ok=True)  # made already for a credentials file, or a planted link
    spec = {
        "argv": argv,
        "cwd": str(tmp_path),
        "env": AGENT_ENV,
        "output_log": str(directory / "output.log"),
        "started_path": str(directory / "started.json"),
        "exit_path": str(directory / "exit.json"),
        "tmux_socket": tmux.socket_name,
        "wake_channel": f"kairo-test-{name}",
        "title": f"task {name}",
        **extra,
    }
    (directory / "spec.json").write_text(json.dumps(spec))
    pane = await tmux.open_agent_pane(
        SESSION, title=name, command=runner_argv(str(directory / "spec.json")), cwd=tmp_path
    )
    return Attempt(directory, pane.pane_id, f"kairo-test-{name}")


def sh(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


async def test_a_clean_exit_is_recorded_teed_and_signalled(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    attempt = await start(tmux, tmp_path, sh("echo hello; echo oops >&2"))

    with trio.fail_after(10):
        await tmux.wait_for(attempt.channel)  # the runner's wake-up, not a poll

    exit_record = attempt.read("exit.json")  # written before the wake-up
    started = attempt.read("started.json")
    assert exit_record["exit_code"] == 0
    assert exit_record["signal"] is None and exit_record["runner_signal"] is None
    assert exit_record["output_tail"] == "hello\noops\n"
    assert attempt.log == "hello\noops\n"
    assert started["pgid"] == started["agent_pid"] != started["pid"]
    assert started["pane_id"] == attempt.pane_id
    assert started["started_at"] <= exit_record["ended_at"]

    async def footer_shown() -> bool:
        screen = await tmux.capture_pane(attempt.pane_id)
        shown = "[kairo] task a: echo hello; echo oops >&2\nhello\noops\n[kairo] task a exited 0"
        return shown in screen

    await eventually(footer_shown)


async def test_a_failing_exit_code(tmux: TmuxServer, tmp_path: Path) -> None:
    attempt = await start(tmux, tmp_path, sh("exit 3"))
    assert (await attempt.wait_exit(tmux))["exit_code"] == 3


async def test_a_death_by_signal(tmux: TmuxServer, tmp_path: Path) -> None:
    attempt = await start(tmux, tmp_path, sh("kill -USR1 $$"))
    record = await attempt.wait_exit(tmux)
    assert (record["exit_code"], record["signal"]) == (128 + signal.SIGUSR1, signal.SIGUSR1)


async def test_a_missing_program(tmux: TmuxServer, tmp_path: Path) -> None:
    attempt = await start(tmux, tmp_path, ["kairo-no-such-program", "x"])

    record = await attempt.wait_exit(tmux)

    assert record["exit_code"] == 127
    assert "kairo-no-such-program" in record["output_tail"]
    assert "No such file or directory" in record["output_tail"]
    assert attempt.read("started.json")["agent_pid"] is None


async def test_the_program_is_found_on_the_spec_environments_path(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    # The agent's PATH (the supervisor's) may hold what the tmux server's does not.
    tools = tmp_path / "agent-tools"
    tools.mkdir()
    tool = tools / "kairo-only-here"
    tool.write_text("#!/bin/sh\necho found me\n")
    tool.chmod(0o755)
    not_executable = tools / "kairo-not-executable"
    not_executable.write_text("#!/bin/sh\n")
    env = {**AGENT_ENV, "PATH": f"{tools}{os.pathsep}{AGENT_ENV['PATH']}"}

    found = await start(tmux, tmp_path, ["kairo-only-here"], name="found", env=env)
    denied = await start(tmux, tmp_path, ["kairo-not-executable"], name="denied", env=env)

    assert (await found.wait_exit(tmux))["output_tail"] == "found me\n"
    assert (await denied.wait_exit(tmux))["exit_code"] == 126


async def test_a_missing_working_directory(tmux: TmuxServer, tmp_path: Path) -> None:
    gone = tmp_path / "removed-worktree"
    attempt = await start(tmux, tmp_path, sh("true"), cwd=str(gone))

    record = await attempt.wait_exit(tmux)

    assert record["exit_code"] == 127
    assert str(gone) in record["output_tail"]
    assert attempt.read("started.json")["agent_pid"] is None


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
async def test_the_agent_does_not_inherit_pythons_ignored_signals(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec:
    # `yes | head -1` in an agent would then fail with EPIPE instead of ending quietly.
    attempt = await start(tmux, tmp_path, ["grep", "^SigIgn:", "/proc/self/status"])

    ignored = int((await attempt.wait_exit(tmux))["output_tail"].split()[1], 16)

    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        assert not ignored & (1 << (sig - 1)), sig.name


async def test_the_agent_gets_the_spec_environment_not_the_panes(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    await tmux_out(tmux, "set-environment", "-g", "KAIRO_LEAK", "from-tmux-server")
    # A control, so that the test means something: the variable does reach pane commands.
    # (It reports through a file: tmux 3.3a can drop the output of a pane command that
    # exits within a millisecond or so; the runner lives far longer than that.)
    control = tmp_path / "control.txt"
    await tmux.open_agent_pane(
        SESSION, title="control", command=sh(f'echo "$KAIRO_LEAK" > {control}'), cwd=tmp_path
    )
    attempt = await start(tmux, tmp_path, sh('echo "leak=${KAIRO_LEAK-unset} mine=$MINE"; pwd'))

    record = await attempt.wait_exit(tmux)

    assert record["output_tail"] == f"leak=unset mine=from-spec\n{tmp_path}\n"
    await eventually(lambda: control.exists() and control.read_text() == "from-tmux-server\n")


KEY = "sk-ant-api03-runner-test-0123456789"


def credentials(directory: Path, env: dict[str, str], redact: list[list[str]]) -> Path:
    """A credentials file as the supervisor writes one (runtime/attempts.py)."""
    directory.mkdir(exist_ok=True)
    path = directory / "credentials.json"
    path.write_text(json.dumps({"env": env, "redact": redact}))
    return path


async def test_the_agent_s_credentials_come_from_a_file_taken_once_and_are_cut_out_of_its_output(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    path = credentials(tmp_path / "a", {"API_KEY": KEY}, [["API_KEY", KEY]])
    # Printed in two writes, a read of the runner apart: the key is cut out all the same.
    script = (
        'printf %s "$API_KEY" | sha256sum; '
        'printf "key: %s" "${API_KEY%%-runner*}"; sleep 0.3; printf "%s\\n" "-runner${API_KEY#*-runner}"'
    )
    attempt = await start(tmux, tmp_path, sh(script), credentials_path=str(path))

    record = await attempt.wait_exit(tmux)

    assert not path.exists()
    digest = hashlib.sha256(KEY.encode()).hexdigest()  # the agent had its key
    assert record["output_tail"] == f"{digest}  -\nkey: [redacted: API_KEY]\n"
    assert attempt.log == record["output_tail"]
    assert KEY not in await tmux.capture_pane(attempt.pane_id)  # siblings can read a pane


async def test_a_runner_whose_credentials_are_gone_starts_no_agent(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    taken = str(tmp_path / "a" / "credentials.json")  # another process read it first
    marker = tmp_path / "ran"
    attempt = await start(tmux, tmp_path, sh(f"touch {marker}"), credentials_path=taken)

    record = await attempt.wait_exit(tmux)

    assert record["exit_code"] == 126
    assert "its credentials are not in" in record["output_tail"]
    assert attempt.read("started.json")["agent_pid"] is None and not marker.exists()


async def test_output_is_kept_whole_in_the_log_and_as_a_tail(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    script = "import sys\nfor i in range(2000): print(f'line {i:05d} é', flush=i % 7 == 0)"
    attempt = await start(tmux, tmp_path, [sys.executable, "-c", script])

    record = await attempt.wait_exit(tmux)

    lines = [f"line {i:05d} é" for i in range(2000)]
    assert attempt.log.splitlines() == lines
    tail = record["output_tail"]
    assert len(tail.encode()) <= TAIL_BYTES and tail.endswith("line 01999 é\n")
    assert "\ufffd" not in tail

    async def last_line_in_pane() -> bool:
        return "line 01999 é" in await tmux.capture_pane(attempt.pane_id)

    await eventually(last_line_in_pane)


AGENT_WITH_GRANDCHILD = """
import pathlib, subprocess, sys
d = pathlib.Path(sys.argv[1])
child = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & echo $! > gc.tmp; mv gc.tmp gc.pid; wait"],
                         cwd=d)
(d / "child.tmp").write_text(str(child.pid))
(d / "child.tmp").rename(d / "child.pid")  # whole, or not there yet
child.wait()
"""


async def _pids_of_a_family(attempt: Attempt) -> list[int]:
    gc = attempt.directory / "gc.pid"
    await eventually(gc.exists)
    await eventually((attempt.directory / "child.pid").exists)  # the child may write first
    started = await attempt.wait_started()
    child = int((attempt.directory / "child.pid").read_text())
    return [started["agent_pid"], child, int(gc.read_text())]


async def test_sigterm_to_the_runner_ends_the_whole_process_group(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    argv = [sys.executable, "-c", AGENT_WITH_GRANDCHILD, str(tmp_path / "a")]
    attempt = await start(tmux, tmp_path, argv)
    pids = await _pids_of_a_family(attempt)

    os.kill((await attempt.wait_started())["pid"], signal.SIGTERM)
    record = await attempt.wait_exit(tmux)

    assert record["exit_code"] == 128 + signal.SIGTERM
    assert record["runner_signal"] == signal.SIGTERM and not record["killed"]
    for pid in pids:
        await eventually(lambda pid=pid: process_gone(pid))


async def test_an_agent_that_ignores_sigterm_is_killed_after_the_grace(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    argv = sh("trap '' TERM; sleep 60 & echo $! > gc.tmp; mv gc.tmp gc.pid; wait; wait")
    attempt = await start(tmux, tmp_path, argv, grace_seconds=0.2)
    await eventually((tmp_path / "gc.pid").exists)
    grandchild = int((tmp_path / "gc.pid").read_text())

    os.kill((await attempt.wait_started())["pid"], signal.SIGHUP)  # as when the pane is closed
    record = await attempt.wait_exit(tmux)

    assert (record["exit_code"], record["killed"]) == (128 + signal.SIGKILL, True)
    assert record["runner_signal"] == signal.SIGHUP
    await eventually(lambda: process_gone(grandchild))


async def test_nothing_of_the_group_outlives_the_agent(tmux: TmuxServer, tmp_path: Path) -> None:
    # The agent exits 0 but leaves a background process holding its stdout.
    argv = sh("sleep 60 & echo $! > gc.tmp; mv gc.tmp gc.pid; exit 0")
    attempt = await start(tmux, tmp_path, argv)

    start_time = trio.current_time()
    record = await attempt.wait_exit(tmux)

    assert record["exit_code"] == 0 and not record["killed"]
    assert trio.current_time() - start_time < 3  # SIGTERM was enough: no grace spent
    assert process_gone(int((tmp_path / "gc.pid").read_text()))


# Leaves what no process group holds: a `setsid` child, and a daemon forked twice that
# ignores SIGTERM and closed the output pipe (so nothing waits for it), each pid written.
LEAVES_BEHIND = sh(
    "setsid sleep 60 & echo $! > setsid.tmp; mv setsid.tmp setsid.pid; "
    '(setsid sh -c \'trap "" TERM; echo $$ > daemon.tmp; mv daemon.tmp daemon.pid; '
    "while :; do sleep 0.1; done' </dev/null >/dev/null 2>&1 &); "
    "while [ ! -e daemon.pid ]; do sleep 0.02; done; echo left"
)


def cgroups_here() -> bool:
    """Whether this user may make a cgroup below its own, as the runner does."""
    own = own_cgroup()
    return own is not None and os.access(own, os.W_OK) and os.access(f"{own}/cgroup.procs", os.W_OK)


@pytest.mark.parametrize("held_by", ["cgroup", "subreaper", "subreaper-no-cgroup-to-make"])
async def test_nothing_the_agent_started_outlives_it(
    tmux: TmuxServer, tmp_path: Path, held_by: str
) -> None:
    if held_by == "cgroup" and not cgroups_here():
        pytest.skip("no cgroup v2 this user may write here: the subreaper ones cover it")
    name = {
        "cgroup": f"kairo-attempt.test{os.getpid()}.a.1",
        "subreaper": None,
        # A name no cgroup can have: the runner falls back, as where cgroups are not ours.
        "subreaper-no-cgroup-to-make": "no/such/cgroup",
    }[held_by]
    extra = {"cgroup": name} if name else {}
    attempt = await start(tmux, tmp_path, LEAVES_BEHIND, grace_seconds=0.3, **extra)

    record = await attempt.wait_exit(tmux)

    assert record["exit_code"] == 0 and record["output_tail"] == "left\n"
    for left in ("setsid.pid", "daemon.pid"):
        # Gone when the record is written: no wait for it.
        assert process_gone(int((tmp_path / left).read_text())), left
    cgroup = attempt.read("started.json")["cgroup"]
    if held_by == "cgroup":
        assert cgroup == f"{own_cgroup()}/{name}"
        assert not await trio.Path(cgroup).exists()  # removed, once empty
    else:
        assert cgroup is None


async def test_the_exit_record_says_what_the_runner_wrote_to_the_log(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    attempt = await start(tmux, tmp_path, sh("for i in 1 2 3; do echo line $i é; done"))

    record = await attempt.wait_exit(tmux)

    log = (attempt.directory / "output.log").read_bytes()
    assert record["output_bytes"] == len(log) > 0
    assert record["output_sha256"] == hashlib.sha256(log).hexdigest()


async def test_records_and_log_are_not_written_through_links_planted_for_them(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    mine = tmp_path / "notes.txt"
    mine.write_text("the user's\n")
    directory = tmp_path / "a"
    directory.mkdir()
    (directory / "output.log").symlink_to(mine)
    (directory / "exit.json").write_text('{"exit_code": 0, "output_tail": "planted"}')
    release = tmp_path / "release"
    attempt = await start(
        tmux, tmp_path, sh(f"echo words; while [ ! -e {release} ]; do sleep 0.02; done")
    )
    pid = (await attempt.wait_started())["pid"]
    assert not (directory / "exit.json").exists()  # a record planted before it is no record
    # Where it will write its record next: the planted link is unlinked, not followed.
    (directory / f".exit.json.{pid}.tmp").symlink_to(mine)

    release.touch()
    record = await attempt.wait_exit(tmux)

    assert mine.read_text() == "the user's\n"
    assert record["output_tail"] == "words\n"
    assert attempt.log == "words\n" and not (directory / "output.log").is_symlink()
    assert not (directory / f".exit.json.{pid}.tmp").exists()


async def test_runner_argv_ignores_an_agents_package_in_the_worktree(
    tmux: TmuxServer, tmp_path: Path
) -> None:
    # `python -m agents.runner` in this cwd would run the repository's own agents/runner.py.
    decoy = tmp_path / "agents"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("")
    (decoy / "runner.py").write_text("raise SystemExit('the worktree decoy ran')\n")

    attempt = await start(tmux, tmp_path, sh("echo real"))

    assert (await attempt.wait_exit(tmux))["output_tail"] == "real\n"


def _run_directly(tmp_path: Path, spec: object) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    argv = runner_argv(str(path))
    return subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        ({"argv": ["true"], "cwd": "/"}, "spec key 'env' is missing or not a dict"),
        (
            {
                "argv": [],
                "cwd": "/",
                "env": {},
                "output_log": "l",
                "started_path": "s",
                "exit_path": "e",
                "title": "t",
            },
            "'argv' must be a non-empty list of strings",
        ),
        ([1], "the spec is not a JSON object"),
    ],
)
def test_a_bad_spec_is_refused_with_a_sentence(
    tmp_path: Path, spec: object, complaint: str
) -> None:
    done = _run_directly(tmp_path, spec)
    assert done.returncode == 2
    assert done.stderr.startswith("kairo runner: cannot read the spec ")
    assert complaint in done.stderr


# What a spec holds (argv, env, paths, a float) and what a record holds (output tails of
# any text): the runner reads and writes them with json's C half, not `json` itself.
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_DOCUMENTS = st.recursive(
    _SCALARS, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20
)


@given(_DOCUMENTS)
def test_the_runner_reads_json_as_the_json_module_does(document: object) -> None:
    assert json_loads(json.dumps(document)) == document
    assert json_loads(json.dumps(document, indent=2) + "\n") == document


@given(st.dictionaries(st.text(), st.none() | st.booleans() | st.integers() | st.text()))
def test_the_runner_writes_records_the_json_module_reads_back(record: dict[str, object]) -> None:
    assert json.loads(json_dumps(record)) == record


@pytest.mark.parametrize("text", ["", "{", '{"a": 1} x', "[1,]", '"\\x"'])
def test_the_runner_refuses_what_is_not_one_json_document(text: str) -> None:
    with pytest.raises(ValueError):
        json_loads(text)


def test_the_runner_imports_only_the_standard_library() -> None:
    root = Path(__file__).resolve().parents[2]
    code = (
        f"import sys; sys.path.insert(0, {str(root)!r}); import agents.runner; "
        "print(' '.join(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True
    )
    loaded = {name.split(".")[0] for name in done.stdout.split()}
    assert loaded - set(sys.stdlib_module_names) - {"agents", "__main__"} == set()
