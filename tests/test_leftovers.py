"""The suite's check of what it leaves running (tests/conftest.py, tests/leftovers.py)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from orchestrator.tmux.server import TmuxServer
from tests import leftovers

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # the run gives what it left a few seconds to go
def test_a_run_that_leaves_a_process_fails_naming_it_and_the_process_is_ended(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_leaks.py").write_text(
        "import subprocess\n"
        "def test_starts_and_forgets() -> None:\n"
        "    subprocess.Popen(['sleep', '3607'], start_new_session=True)\n"
    )
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest"),
            *(
                "-p",
                "no:cacheprovider",
                "--rootdir",
                str(tmp_path),
                str(tmp_path / "test_leaks.py"),
            ),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert "processes the tests started and left running" in done.stdout
    assert "sleep 3607 (killed)" in done.stdout
    assert not [p for p in _all_commands() if p == "sleep 3607"]


def test_a_tmux_server_started_in_the_run_is_seen_until_it_is_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tmux client passes the mark on to the server it starts, which runs on, detached,
    after the client is gone: the leak the check is for."""
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path))
    value = os.environ[leftovers.MARK]
    socket = f"leftovers-{os.getpid()}"
    server = TmuxServer(socket, config_file="/dev/null")

    async def start() -> None:
        await server.new_session(
            "s", window_name="w", title="t", command=["sleep", "3600"], cwd=tmp_path
        )

    trio.run(start)

    def servers() -> list[leftovers.Leftover]:
        return [p for p in leftovers.marked_processes(value) if f"-L {socket}" in p.command]

    try:
        assert servers(), leftovers.marked_processes(value)
        assert all(p.command.startswith("tmux") for p in servers())
    finally:
        trio.run(server.kill_server)
    deadline = time.monotonic() + 5
    while servers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not servers()


def test_a_process_of_another_run_or_of_none_is_not_this_runs(tmp_path: Path) -> None:
    value = os.environ[leftovers.MARK]
    other = {**os.environ, leftovers.MARK: "another-run"}
    unmarked = {k: v for k, v in os.environ.items() if k != leftovers.MARK}
    started = [
        subprocess.Popen(["sleep", "3608"], env=other),
        subprocess.Popen(["sleep", "3608"], env=unmarked),
    ]
    try:
        assert not [p for p in leftovers.marked_processes(value) if p.command == "sleep 3608"]
        mine = subprocess.Popen(["sleep", "3608"])
        started.append(mine)
        assert [p.pid for p in leftovers.marked_processes(value) if p.command == "sleep 3608"] == [
            mine.pid
        ]
    finally:
        for process in started:
            process.kill()
            process.wait()


def _all_commands() -> list[str]:
    commands = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit():
                commands.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
    return [command.strip() for command in commands]
