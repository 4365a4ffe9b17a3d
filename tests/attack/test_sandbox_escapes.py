"""Crafted ways out of the sandbox (issue 36), each tried under the default settings, where
a plan that names no sandbox runs its agents under bubblewrap.

Each was confirmed, before the sandbox was made a boundary, by a mark written where the
sandbox cannot write. Now each attempt fails, saying how (a read-only file system, a file
that is not there, no such process), and afterwards the user's refs, stash, git
directory, objects and checkout are byte for byte as they were, no mark is written, and
the user's home is untouched. An honest sibling, running beside each attack, merges its
work: the sandbox takes nothing from an agent that stays in its worktree.

Reproductions 36.4 (checks run outside the sandbox), 36.6 (a link planted for the runner)
and 36.9 (forged usage) have modules of their own.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.attack.guarded_runs import GIT_DIR, agent_said, refused, run_plan, subtask
from tests.attack.sandboxes import Mode, outside, unchanged_outside
from tests.e2e.conftest import Kairo, git

pytestmark = pytest.mark.slow

HONEST = "sleep 1; echo honest > honest.txt"


def merged_honestly(kairo: Kairo, status: dict) -> None:
    assert subtask(status, "honest")["state"] == "merged", status
    assert git(kairo.repo, "show", f"{status['integration_branch']}:honest.txt") == "honest\n"


def marker(root: Path) -> tuple[Path, Path]:
    """A program that writes down that it ran, outside the sandbox's reach; and that mark."""
    mark = root / "MARK"
    program = root / "evil.sh"
    program.write_text(f'#!/bin/sh\necho "ran as $0 $*" >> {mark}\ncat >/dev/null\n')
    program.chmod(0o755)
    return program, mark


@pytest.mark.reproduces("36.1")
@pytest.mark.parametrize("rewritten", [".git file", "commondir"])
def test_a_fake_common_dir_is_never_read_by_the_supervisors_git(
    kairo: Kairo, repo: Path, tmp_path: Path, sandboxed: Mode, rewritten: str
) -> None:
    """The agent makes a git directory whose config names a program as core.fsmonitor, and
    points its worktree at it: its `.git` file, or its private git directory's
    `commondir`. The supervisor's `git add` of its work would run the program.

    No honest sibling runs beside it here: the guard blames a changed `.git` file on every
    agent that ran meanwhile, as it must in local mode, though under bubblewrap only the
    worktree's own agent can write it."""
    evil, mark = marker(tmp_path)
    # Made in its scratch (TMPDIR), which is on the host's disk, where the supervisor's
    # git would find it; it names the host's program.
    fake = (
        'fake="$TMPDIR/fake"; git init -q "$fake" && '
        f'git --git-dir="$fake/.git" config core.fsmonitor {evil} && '
        'git --git-dir="$fake/.git" config core.bare false && '
    )
    point = {
        ".git file": 'echo "gitdir: $fake/.git" > .git',
        "commondir": 'echo "$fake/.git" > "$(git rev-parse --git-dir)/commondir"',
    }[rewritten]
    before = outside(repo)

    _, status = run_plan(
        kairo,
        "fake-common",
        {"a": f"{fake}{point} && echo pointed && echo x > x"},
        mode=sandboxed,
    )

    assert "pointed" in agent_said(status, "a")  # it did rewrite what it could reach
    assert not mark.exists(), mark.read_text()
    unchanged_outside(repo, before)
    if rewritten == "commondir":  # the agent's copy: the supervisor reads git's own
        assert subtask(status, "a")["state"] == "merged", status
    else:  # the step refused, as in local mode
        assert "kairo-orch will not run git there" in subtask(status, "a")["reason"]


@pytest.mark.reproduces("36.2")
def test_no_agent_is_root_nor_remounts_the_filesystem(
    kairo: Kairo, repo: Path, sandboxed: Mode
) -> None:
    before = outside(repo)

    done, status = run_plan(
        kairo,
        "remount",
        {
            "honest": HONEST,
            "a": f"id -u; mount -o remount,rw / && echo evil > {repo}/remounted.txt",
        },
        mode=sandboxed,
    )

    assert done.returncode == 1, done.stderr
    refused(status, "a", "must be superuser")
    assert agent_said(status, "a").splitlines()[0] == "1000"  # not root
    assert not (repo / "remounted.txt").exists()
    merged_honestly(kairo, status)
    unchanged_outside(repo, before)


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[Path]:
    """A unix socket of the host, under /tmp, that accepts connections."""
    path = tmp_path / "service.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(8)
    try:
        yield path
    finally:
        server.close()


def connects(path: str) -> str:
    """A shell line connecting to the unix socket at `path`, printing `connected` if it can."""
    script = f"import socket; socket.socket(socket.AF_UNIX).connect({path!r}); print('connected')"
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}"


POSTGRES_SOCKET = "/run/postgresql/.s.PGSQL.5432"


@pytest.mark.reproduces("36.3")
def test_no_unix_socket_of_the_host_is_reachable(
    kairo: Kairo, repo: Path, tmp_path: Path, sandboxed: Mode, listening: Path
) -> None:
    """tmux's server (whose `run-shell` runs as the user, outside), by its name and by its
    path; PostgreSQL's (peer authentication); a service's under /tmp."""
    mark = tmp_path / "tmux-ran-it"
    attacks = {
        "tmux-by-name": f'tmux -L {kairo.socket} run-shell "touch {mark}-L"',
        "postgresql": connects(POSTGRES_SOCKET),
        "tmp-socket": connects(str(listening)),
    }
    # The agents' tmux server, started here as kairo-orch then finds it: its socket's path,
    # as an agent reads it from its own pane's environment in local mode.
    kairo.tmux("new-session", "-d", "-s", "probe", "sleep 60")
    path = kairo.tmux("display-message", "-p", "-t", "=probe:", "#{socket_path}").stdout.strip()
    attacks["tmux-by-path"] = f'tmux -S {path} run-shell "touch {mark}-S"'
    # Each is a real way in, from outside the sandbox.
    control = tmp_path / "control"
    subprocess.run(["tmux", "-S", path, "run-shell", f"touch {control}"], check=True)
    assert control.exists()
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(str(listening))
    if Path(POSTGRES_SOCKET).is_socket():  # where PostgreSQL serves on this machine
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(POSTGRES_SOCKET)
    before = outside(repo)

    done, status = run_plan(kairo, "sockets", {"honest": HONEST, **attacks}, mode=sandboxed)

    assert done.returncode == 1, done.stderr
    for attack in ("tmux-by-name", "tmux-by-path"):
        said = agent_said(status, attack)
        assert "no server running" in said or "error connecting" in said, (attack, said)
        refused(status, attack)
    for attack in ("tmp-socket", "postgresql"):
        refused(status, attack, "FileNotFoundError")
        assert "connected" not in agent_said(status, attack)
    assert list(tmp_path.glob("tmux-ran-it*")) == []
    merged_honestly(kairo, status)
    unchanged_outside(repo, before)


@pytest.mark.reproduces("36.5")
def test_the_repositorys_objects_are_neither_overwritten_nor_deleted(
    kairo: Kairo, repo: Path, sandboxed: Mode
) -> None:
    """The loose object of main's file overwritten under its own name with other content
    (which the user's next `git checkout -- app.py` writes), and the objects behind the
    stash and a branch deleted; a `gc --prune=now` for good measure."""
    (repo / "app.py").write_text("print('the user')\n")
    git(repo, "add", "app.py")
    git(repo, "commit", "-q", "-m", "app")
    git(
        repo,
        "branch",
        "feature",
        git(repo, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "f").strip(),
    )
    (repo / "README.md").write_text("work in progress\n")
    git(repo, "stash", "push", "-q", "-m", "wip")
    loose = 'p() { echo "$g/objects/$(echo "$1" | cut -c1-2)/$(echo "$1" | cut -c3-)"; }; '
    attack = (
        f"{GIT_DIR}; {loose}"
        'f=$(p "$(git rev-parse main:app.py)"); chmod u+w "$f"; '
        'printf \'other content\' > "$f"; echo "overwrite: $?"; '
        'rm -f "$(p "$(git rev-parse refs/stash)")"; echo "stash: $?"; '
        'rm -f "$(p "$(git rev-parse feature)")"; echo "feature: $?"; '
        "git gc -q --prune=now; git prune; echo x > x"
    )
    before = outside(repo)

    done, status = run_plan(kairo, "objects", {"honest": HONEST, "a": attack}, mode=sandboxed)

    assert done.returncode == 0, done.stderr  # its own work merged; none of that made
    said = agent_said(status, "a")
    for what in ("overwrite", "stash", "feature"):
        assert f"{what}: " in said and f"{what}: 0" not in said, said
    assert "Read-only file system" in said
    unchanged_outside(repo, before)
    assert git(repo, "show", "main:app.py") == "print('the user')\n"


@pytest.fixture
def outsider() -> Iterator[int]:
    """A process of the machine that no agent started."""
    process = subprocess.Popen(["sleep", "1000"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


@pytest.mark.reproduces("36.7")
def test_no_process_of_the_machine_is_seen_or_killed(
    kairo: Kairo, repo: Path, sandboxed: Mode, outsider: int
) -> None:
    attack = f"ls /proc | grep -qx {outsider} && echo seen; kill -9 {outsider} {os.getpid()}"

    done, status = run_plan(kairo, "killer", {"honest": HONEST, "a": attack}, mode=sandboxed)

    assert done.returncode == 1, done.stderr
    refused(status, "a", "No such process")
    assert "seen" not in agent_said(status, "a")
    os.kill(outsider, 0)  # alive
    merged_honestly(kairo, status)


@pytest.fixture
def home(kairo: Kairo, tmp_path: Path) -> Path:
    """The user's home (HOME for kairo-orch and its agents), with a key and the files of
    the coding agents they use, each already holding the user's settings."""
    home = tmp_path / "home"
    for name, content in {
        ".ssh/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY----- the user's key\n",
        ".claude/settings.json": '{"theme": "dark"}\n',
        ".claude.json": '{"numStartups": 3}\n',
        ".codex/config.toml": 'model = "o4"\n',
        ".config/gh/hosts.yml": "github.com: {oauth_token: gho_theuserstoken}\n",
    }.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(content)
    kairo.env["HOME"] = str(home)
    return home


@pytest.mark.reproduces("36.7")
def test_the_users_home_and_secrets_are_not_read(
    kairo: Kairo, repo: Path, sandboxed: Mode, home: Path
) -> None:
    """Their key, another tool's token, /root, and any secret of the supervisor's
    environment but the one credential the plan gives the agent."""
    kairo.env.update({"ANTHROPIC_API_KEY": "sk-ant-api03-given", "DEPLOY_TOKEN": "deploy-tok-7d2e"})
    reads = (
        f"cat $HOME/.ssh/id_ed25519 {home}/.ssh/id_ed25519 {home}/.config/gh/hosts.yml; "
        "ls -A /root | sed 's/^/root has /'; env | sort > env.txt"
    )
    plan = kairo.write_plan(
        textwrap.dedent(
            f"""\
            version: 1
            name: home
            agent: {{kind: shell, run: {json.dumps(reads)}}}
            subtasks:
              - id: reader
                agent:
                  env: {{ANTHROPIC_API_KEY: "${{ANTHROPIC_API_KEY}}"}}
            """
        )
    )
    before = outside(repo, home)

    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 0, done.stderr  # its own work merged: what it found
    status = kairo.json("status")
    said = agent_said(status, "reader")
    assert "No such file or directory" in said
    assert "the user's key" not in said and "gho_theuserstoken" not in said
    assert "root has " in said  # /root holds only the tools bound back (PATH's ~/.pyenv)
    assert "root has .ssh" not in said and "root has .claude" not in said
    seen = git(repo, "show", f"{status['integration_branch']}:env.txt")
    assert "ANTHROPIC_API_KEY=sk-ant-api03-given" in seen  # its own credential
    assert "deploy-tok" not in seen
    unchanged_outside(repo, before, home)


@pytest.mark.reproduces("36.8")
def test_the_users_coding_agents_settings_are_not_written(
    kairo: Kairo, repo: Path, tmp_path: Path, sandboxed: Mode, home: Path
) -> None:
    """Hooks in ~/.claude/settings.json, `notify` in ~/.codex/config.toml and an MCP server
    in ~/.claude.json, each a program the user's next session of that agent would run,
    outside any sandbox; written through HOME and through the home's own path."""
    evil, mark = marker(tmp_path)
    hook = f'{{"hooks": {{"SessionStart": [{{"hooks": [{{"type": "command", "command": "{evil}"}}]}}]}}}}'
    plants = {
        ".claude/settings.json": hook,
        ".claude.json": f'{{"mcpServers": {{"evil": {{"command": "{evil}"}}}}}}',
        ".codex/config.toml": f'notify = ["{evil}"]',
    }
    attack = "; ".join(
        f'mkdir -p "{root}/.claude" "{root}/.codex"; '
        + "; ".join(
            f'printf "%s\\n" {shlex.quote(text)} > "{root}/{name}" && echo planted'
            for name, text in plants.items()
        )
        for root in ("$HOME", str(home))
    )
    attack += "; echo x > x"
    before = outside(repo, home)

    done, status = run_plan(kairo, "settings", {"honest": HONEST, "a": attack}, mode=sandboxed)

    # Written, but into a home that is the sandbox's own, gone with it.
    assert agent_said(status, "a").count("planted") == 2 * len(plants)
    assert done.returncode == 0, (done.stderr, status)
    merged_honestly(kairo, status)
    unchanged_outside(repo, before, home)
    assert not mark.exists()
