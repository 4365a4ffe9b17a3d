"""A check run inside bubblewrap: it writes its worktree and scratch directory only, and
ending it ends everything it started inside, as ending a check outside does."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest
import trio
from trio._core import _thread_cache

from orchestrator.git.invocation import trust_repository
from orchestrator.runtime import processes
from orchestrator.runtime.processes import (
    STOPPED,
    TIMED_OUT,
    CheckSandbox,
    CheckScope,
    run_shell,
)
from orchestrator.runtime.sandbox import AgentPlace, BwrapSandbox

pytestmark = pytest.mark.usefixtures("bwrap_runs")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    """A linked worktree of a repository of one commit, as a subtask's is."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    identity = ("-c", "user.name=u", "-c", "user.email=u@e")
    _git(repo, *identity, "commit", "-q", "--allow-empty", "-m", "0")
    _git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "wt"))
    trust_repository(repo, repo / ".git", repo / ".git")
    return tmp_path / "wt"


def _sandbox(worktree: Path, withheld: Mapping[str, str] | None = None) -> CheckSandbox:
    place = AgentPlace(
        worktree=worktree,
        run_dir=worktree.parent / "check",
        git_common_dir=(worktree.parent / "repo" / ".git").resolve(),
        checkout=worktree.parent / "repo",
    )
    binary = shutil.which("bwrap")
    assert binary is not None
    wrap = functools.partial(BwrapSandbox(binary=binary).wrap, place=place)
    return CheckSandbox(wrap, withheld or {})


def _running(token: str) -> list[int]:
    """The processes of this host whose command line holds `token`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if token.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def _all_end(token: str, seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while _running(token) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _running(token)


def _leaves_behind(token: str) -> str:
    """A check that starts what its process group does not hold, a `setsid` child and a
    daemon forked twice that ignores SIGTERM, each named by `token`, then hangs."""
    return (
        f"setsid sh -c 'sleep 60' {token}-setsid & "
        f"(setsid sh -c 'trap \"\" TERM; touch daemon.up; while :; do sleep 0.1; done' "
        f"{token}-daemon </dev/null >/dev/null 2>&1 &); "
        "while [ ! -e daemon.up ]; do sleep 0.02; done; echo started; sleep 60"
    )


async def test_a_sandboxed_check_writes_its_worktree_and_tmpdir_and_nothing_else(
    worktree: Path,
) -> None:
    repo = worktree.parent / "repo"
    config = (repo / ".git" / "config").read_bytes()
    script = (
        'echo ok > in-worktree.txt && echo ok > "$TMPDIR/scratch.txt" && '
        f"{{ echo evil > {repo}/evil.txt || echo refused; }} && "
        f"{{ echo evil >> {repo}/.git/config || echo refused; }}"
    )

    result = await run_shell(script, cwd=worktree, env=dict(os.environ), sandbox=_sandbox(worktree))

    assert result.exit_code == 0, result.output
    assert result.output.count("Read-only file system") == 2, result.output
    assert result.output.count("refused") == 2, result.output
    assert (worktree / "in-worktree.txt").read_text() == "ok\n"
    assert (worktree.parent / "check" / "scratch" / "tmp" / "scratch.txt").read_text() == "ok\n"
    assert not (repo / "evil.txt").exists()
    assert (repo / ".git" / "config").read_bytes() == config


async def test_a_secret_kept_from_a_sandboxed_check_is_cut_out_of_what_it_prints(
    worktree: Path,
) -> None:
    url = "postgres://u:PASSWORD1234@db/shop"
    (worktree / "found.txt").write_text(f"{url}\n")  # where the check finds it all the same

    result = await run_shell(
        'echo "env: ${DATABASE_URL:-none}"; cat found.txt',
        cwd=worktree,
        env={"PATH": os.environ["PATH"]},
        sandbox=_sandbox(worktree, withheld={"DATABASE_URL": url}),
    )

    assert result.exit_code == 0, result.output
    assert result.output == "env: none\n[redacted: DATABASE_URL]\n"


async def test_a_sandboxed_check_outlives_the_thread_that_started_it(
    worktree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bubblewrap dies with its parent, which to the kernel is the thread that forked it:
    # a worker thread of trio's, which ends once idle for a while (made short here).
    monkeypatch.setattr(_thread_cache, "IDLE_TIMEOUT", 0.2)

    result = await run_shell(
        "sleep 2; echo done", cwd=worktree, env=dict(os.environ), sandbox=_sandbox(worktree)
    )

    assert (result.exit_code, result.output) == (0, "done\n")


@pytest.mark.parametrize("scoped", ["cgroup", "marker", "group"])
async def test_a_sandboxed_check_ended_by_its_timeout_leaves_nothing_running(
    worktree: Path, monkeypatch: pytest.MonkeyPatch, scoped: str
) -> None:
    # Without a cgroup or a marker ("group": its process group only), ending bubblewrap
    # ends its process namespace, where a check outside leaves these running.
    monkeypatch.setattr(processes, "GRACE_S", 0.3)
    if scoped != "cgroup":
        monkeypatch.setenv("KAIRO_TEST_NO_CGROUP", "1")
    token = f"kairo-test-{uuid.uuid4().hex[:12]}"
    scope = CheckScope.of(f"E-{token}", "verify", "a") if scoped != "group" else None

    result = await run_shell(
        _leaves_behind(token),
        cwd=worktree,
        env=dict(os.environ),
        timeout_s=1.5,
        scope=scope,
        sandbox=_sandbox(worktree),
    )

    assert result.exit_code == TIMED_OUT and "started" in result.output, result.output
    assert _all_end(token), f"still running: {_running(token)}"


async def test_a_sandboxed_check_ended_by_stop_leaves_nothing_running(
    worktree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(processes, "GRACE_S", 0.3)
    token = f"kairo-test-{uuid.uuid4().hex[:12]}"
    stop = trio.Event()

    async def stop_once_started() -> None:
        while not (worktree / "daemon.up").exists():  # noqa: ASYNC110
            await trio.sleep(0.02)
        stop.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stop_once_started)
        result = await run_shell(
            _leaves_behind(token),
            cwd=worktree,
            env=dict(os.environ),
            stop=stop,
            scope=CheckScope.of(f"E-{token}", "verify", "a"),
            sandbox=_sandbox(worktree),
        )

    assert result.exit_code == STOPPED, result.output
    assert _all_end(token), f"still running: {_running(token)}"
