"""The walking product: a plan of shell agents, fanned out, merged, reported, cleaned."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git, live_view, shared_with_agents, snapshot_checkout

pytestmark = pytest.mark.slow

SIX_SUBTASKS = """\
version: 1
name: six
max_parallel: 3
agent:
  kind: shell
  run: "true"
subtasks:
  - id: greet-soft
    agent: {run: "sed -i 's/^GREETING = .*/GREETING = \\"hi\\"/' src/app.py"}
  - id: greet-loud
    agent: {run: "sed -i 's/^GREETING = .*/GREETING = \\"HELLO\\"/' src/app.py"}
  - id: add-docs
    agent: {run: "mkdir -p docs && echo 'how to' > docs/guide.md"}
  - id: bump-version
    agent: {run: "echo 2.0 > VERSION"}
  - id: add-module
    agent: {run: "echo 'X = 1' > src/extra.py"}
  - id: use-module
    depends_on: [add-module]
    agent: {run: "test -f src/extra.py && echo 'from extra import X' > src/use.py"}
"""


def seed_project(repo: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text(
        'GREETING = "hello"\n\n\ndef main():\n    print(GREETING)\n'
    )
    (repo / "VERSION").write_text("1.0\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "project")


def test_six_subtasks_five_merge_one_conflicts_and_the_checkout_is_untouched(
    kairo: Kairo, repo: Path
) -> None:
    seed_project(repo)
    # The user is mid-work: an uncommitted change and an untracked file must survive as is.
    (repo / "README.md").write_text("project, edited but not committed\n")
    (repo / "notes.txt").write_text("untracked notes\n")
    before = snapshot_checkout(repo)
    plan = kairo.write_plan(SIX_SUBTASKS)

    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 1, done.stderr
    status = kairo.json("status")
    states = {s["id"]: s["state"] for s in status["subtasks"]}
    assert states == {
        "greet-soft": "merged",
        "greet-loud": "conflicted",
        "add-docs": "merged",
        "bump-version": "merged",
        "add-module": "merged",
        "use-module": "merged",
    }
    loud = next(s for s in status["subtasks"] if s["id"] == "greet-loud")
    assert loud["conflicts"] == [
        {
            "path": "src/app.py",
            "kind": "content",
            "with": ["greet-soft"],
            "message": "CONFLICT (content): Merge conflict in src/app.py",
        }
    ]
    assert loud["reason"].startswith("conflict:")
    # Off a terminal, plain lines: the conflict's other side and the worktree kept to look
    # at it on its row, and no line padded with spaces for a script to strip.
    text = kairo.run("status").stdout
    row = next(line for line in text.splitlines() if line.startswith("greet-loud"))
    assert f"(with greet-soft); worktree {loud['worktree']}" in row
    assert loud["worktree"] and all(line == line.rstrip() for line in text.splitlines())
    assert kairo.run("stop", "--wait").returncode == 1  # it ended FAILED: --wait's outcome

    integration = status["integration_branch"]
    assert git(repo, "show", f"{integration}:src/app.py").startswith('GREETING = "hi"')
    assert git(repo, "show", f"{integration}:docs/guide.md") == "how to\n"
    assert git(repo, "show", f"{integration}:VERSION") == "2.0\n"
    assert git(repo, "show", f"{integration}:src/extra.py") == "X = 1\n"
    assert git(repo, "show", f"{integration}:src/use.py") == "from extra import X\n"
    merges = git(repo, "log", "--merges", "--format=%s", integration).splitlines()
    assert len(merges) == 5 and all(m.startswith("kairo: merge ") for m in merges)

    assert snapshot_checkout(repo) == before

    worktrees = [
        line.removeprefix("worktree ")
        for line in git(repo, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ]
    assert worktrees[0] == str(repo)
    # The five merged ones were released, kept as spares to reuse. The three subtasks
    # started after the first three (max_parallel) may each have taken one, if a merged
    # worktree was released before they were created: a race the test does not fix.
    merged = [s for s in status["subtasks"] if s["state"] == "merged"]
    assert [s["worktree"] for s in merged] == [None] * 5
    spares = [w for w in worktrees if "/.spares/" in w]
    assert 5 - 3 <= len(spares) <= 5
    assert [w for w in worktrees[1:] if w not in spares] == [loud["worktree"]]
    # beside the checkout, where every agent may edit: never in it, nor in a .git directory
    beside = repo.parent / "project.kairo-worktrees"
    assert Path(loud["worktree"]).parent.parent == beside
    assert all(Path(w).is_relative_to(beside) for w in worktrees[1:])

    report = kairo.json("report")
    assert [m["id"] for m in report["merged"]] == [
        "greet-soft",
        "add-docs",
        "bump-version",
        "add-module",
        "use-module",
    ]
    assert report["conflicted"][0]["conflicts"][0]["with"] == ["greet-soft"]
    markdown = kairo.run("report", "--markdown").stdout
    assert "`src/app.py` (content) with `greet-soft`" in markdown


def test_max_parallel_bounds_the_agents_running_at_once(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    log = tmp_path / "spans.log"
    log.touch()
    subtasks = "\n".join(
        f'  - id: t{i}\n    agent: {{run: "echo start >> {log}; sleep 0.4; echo t{i} > t{i}.txt; echo end >> {log}"}}'
        for i in range(5)
    )
    plan = kairo.write_plan(
        f"version: 1\nname: fan\nmax_parallel: 2\n{shared_with_agents(log)}"
        f"agent: {{kind: shell, run: 'true'}}\nsubtasks:\n{subtasks}\n"
    )

    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 0, done.stderr + kairo.run("report").stdout
    running, peak = 0, 0
    for line in log.read_text().split():
        running += 1 if line == "start" else -1
        peak = max(peak, running)
    assert peak == 2
    status = kairo.json("status")
    assert status["status"] == "COMPLETED"
    assert all(s["worktree"] is None for s in status["subtasks"])  # released after merge


def test_an_agent_gets_the_environment_of_plan_md(kairo: Kairo, repo: Path) -> None:
    plan = kairo.write_plan(
        """\
version: 1
name: env
agent:
  kind: shell
  run: 'env | grep ^KAIRO_ | sort > kairo-env.txt; pwd > where.txt; cat "$KAIRO_PROMPT_FILE" > prompt-file.txt'
subtasks:
  - id: look
    prompt: "Look around: {files}"
    files: ["README.md"]
"""
    )
    assert kairo.run("start", str(plan), "--wait").returncode == 0
    status = kairo.json("status")
    branch = status["integration_branch"]
    seen = dict(
        line.split("=", 1)
        for line in git(repo, "show", f"{branch}:kairo-env.txt").splitlines()
        if "=" in line
    )
    assert seen["KAIRO_EXECUTION_ID"] == status["execution_id"]
    assert seen["KAIRO_SUBTASK_ID"] == "look"
    assert seen["KAIRO_ATTEMPT"] == "1"
    assert seen["KAIRO_PROMPT"] == "Look around: README.md"
    assert seen["KAIRO_FILES"] == "README.md"
    assert seen["KAIRO_FEEDBACK"] == ""
    assert len(seen["KAIRO_IDEMPOTENCY_KEY"]) == 32
    assert "KAIRO_TMUX_SOCKET" in seen  # the supervisor's environment reaches agents
    assert git(repo, "show", f"{branch}:where.txt").strip() == seen["KAIRO_WORKTREE"]
    assert git(repo, "show", f"{branch}:prompt-file.txt") == "Look around: README.md"
    trailers = git(repo, "log", "-1", "--format=%(trailers)", f"{branch}^2")
    assert f"Kairo-Execution: {status['execution_id']}" in trailers
    assert "Kairo-Subtask: look" in trailers and "Kairo-Attempt: 1" in trailers


def test_an_attempt_that_changes_nothing_fails_and_keeps_its_worktree(
    kairo: Kairo, repo: Path
) -> None:
    plan = kairo.write_plan(
        "version: 1\nname: idle\nagent: {kind: shell, run: 'true'}\n"
        "subtasks:\n  - id: idle\n  - id: fine\n    allow_empty: true\n  - id: broken\n    agent: {run: 'exit 7'}\n"
    )
    assert kairo.run("start", str(plan), "--wait").returncode == 1
    subtasks = {s["id"]: s for s in kairo.json("status")["subtasks"]}
    assert subtasks["idle"]["state"] == "failed"
    assert subtasks["idle"]["reason"].startswith("no_changes")
    assert Path(subtasks["idle"]["worktree"]).is_dir()
    assert subtasks["fine"]["state"] == "merged"
    # Failing the same way twice on the same tree is not converging: no third attempt.
    assert subtasks["broken"]["reason"].startswith("no_progress: attempts 1 and 2")
    assert subtasks["broken"]["attempts"] == 2


def test_clean_keeps_unmerged_work_unless_forced(kairo: Kairo, repo: Path) -> None:
    seed_project(repo)
    kairo.run("start", str(kairo.write_plan(SIX_SUBTASKS)), "--wait")
    status = kairo.json("status")
    loud = next(s for s in status["subtasks"] if s["id"] == "greet-loud")
    assert kairo.tmux_sessions() == [status["tmux_session"]]

    done = kairo.run("clean")

    assert done.returncode == 0, done.stderr
    assert "kept greet-loud" in done.stdout
    assert Path(loud["worktree"]).is_dir()
    branches = git(repo, "branch", "--format=%(refname:short)").split()
    assert loud["branch"] in branches
    assert status["integration_branch"] in branches
    assert not any(b.startswith("kairo-subtasks/") and b != loud["branch"] for b in branches)
    assert kairo.tmux_sessions() == []

    forced = kairo.run("clean", "--force")

    assert forced.returncode == 0, forced.stderr
    assert not Path(loud["worktree"]).exists()
    assert loud["branch"] not in git(repo, "branch", "--format=%(refname:short)").split()
    # The released worktrees stay as spares for the next execution, until asked to go.
    listed = git(repo, "worktree", "list", "--porcelain")
    spares = [line[9:] for line in listed.splitlines() if "/.spares/" in line]
    assert spares
    shown = kairo.run("list").stdout  # what they hold on the disk, and how to have it back
    assert f"{len(spares)} spare worktrees kept for reuse, " in shown
    assert "`kairo-orch clean --spares` removes them" in shown
    git(repo, "worktree", "lock", spares[0])  # the user's: left, and said so
    emptied = kairo.run("clean", "--spares")
    assert emptied.returncode == 0, emptied.stderr
    assert f"removed {len(spares) - 1} spare worktree" in emptied.stdout
    assert f"kept the spare worktree {spares[0]}: it is locked" in emptied.stdout
    git(repo, "worktree", "unlock", spares[0])
    assert "removed 1 spare worktree\n" in kairo.run("clean", "--spares").stdout
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not (repo.parent / "project.kairo-worktrees").exists()  # nothing left beside it


def test_clean_all_cleans_every_ended_execution(kairo: Kairo, repo: Path) -> None:
    for name in ("first", "second"):
        plan = kairo.write_plan(
            f"version: 1\nname: {name}\nagent: {{kind: shell, run: 'echo x > x.txt'}}\n"
            "subtasks:\n  - id: x\n",
            name=f"{name}.yaml",
        )
        assert kairo.run("start", str(plan), "--wait").returncode == 0
    executions = [item["execution_id"] for item in kairo.json("list")]
    assert len(kairo.tmux_sessions()) == 2

    done = kairo.run("clean", "--all")

    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines() if not line.startswith(" ")] == [
        *reversed(executions)
    ]
    assert kairo.tmux_sessions() == []
    branches = git(repo, "branch", "--format=%(refname:short)").split()
    assert not any(b.startswith("kairo-subtasks/") for b in branches)
    both = kairo.run("clean", "--all", executions[0])
    assert both.returncode == 2 and "not both" in both.stderr


def test_clean_deletes_an_integration_branch_nothing_was_merged_into(
    kairo: Kairo, repo: Path
) -> None:
    plan = kairo.write_plan(
        "version: 1\nname: nothing\nagent: {kind: shell, run: 'exit 3'}\n"
        "limits: {max_attempts: 1}\nsubtasks:\n  - id: x\n"
    )
    assert kairo.run("start", str(plan), "--wait").returncode == 1
    integration = kairo.json("status")["integration_branch"]

    done = kairo.run("clean", "--force")

    assert done.returncode == 0, done.stderr
    assert f"deleted the integration branch {integration} (nothing was merged)" in done.stdout
    assert integration not in git(repo, "branch", "--format=%(refname:short)").split()


def test_status_json_has_the_fields_of_cli_md(kairo: Kairo, repo: Path) -> None:
    plan = kairo.write_plan(
        "version: 1\nname: tiny\nagent: {kind: shell, run: 'echo x > x.txt'}\nsubtasks:\n  - id: x\n"
    )
    assert kairo.run("start", str(plan), "--wait").returncode == 0
    status = kairo.json("status")
    for key in (
        "execution_id",
        "plan",
        "status",
        "version",
        "base_commit",
        "integration_branch",
        "tmux_session",
        "supervisor_pid",
        "head",
        "subtasks",
    ):
        assert key in status
    assert status["head"]["seq"] >= 10 and len(status["head"]["hash"]) == 64
    assert set(status["subtasks"][0]) >= {
        "id",
        "state",
        "branch",
        "worktree",
        "head_commit",
        "attempts",
        "tokens",
        "reason",
        "conflicts",
    }
    listed = kairo.json("list")
    assert [item["execution_id"] for item in listed] == [status["execution_id"]]
    assert {"execution_id", "plan", "status", "created_at"} <= set(listed[0])
    verified = kairo.run("verify", status["execution_id"][:8])
    assert verified.returncode == 0 and str(status["head"]["seq"]) in verified.stdout
    lines = kairo.run("events", status["execution_id"], "--json").stdout.splitlines()
    assert [json.loads(line)["seq"] for line in lines] == list(range(len(lines)))


def test_the_tmux_session_has_a_live_view_and_titled_agent_panes(kairo: Kairo, repo: Path) -> None:
    seed_project(repo)
    assert kairo.run("start", str(kairo.write_plan(SIX_SUBTASKS)), "--wait").returncode == 1
    session = kairo.json("status")["tmux_session"]
    windows = kairo.tmux("list-windows", "-t", session, "-F", "#{window_name}").stdout.split()
    assert windows == ["supervisor", "agents-1", "agents-2"]
    panes = kairo.tmux(
        "list-panes", "-s", "-t", session, "-F", "#{window_name} #{@kairo_title}"
    ).stdout
    titles = sorted(
        line.split(" ", 1)[1] for line in panes.splitlines() if line.startswith("agents-")
    )
    assert "supervisor live view: every subtask's state" in panes.splitlines()
    assert titles == sorted(
        [
            "greet-soft · merged",
            "greet-loud · conflicted",
            "add-docs · merged",
            "bump-version · merged",
            "add-module · merged",
            "use-module · merged",
        ]
    )
    # The view redraws every half second in its own process; on a loaded machine its last
    # frame may still be the one from before the end.
    deadline = time.monotonic() + 10
    while True:
        view = kairo.tmux("capture-pane", "-p", "-t", f"{session}:supervisor").stdout
        if "FAILED" in view or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert "greet-loud" in view and "conflicted" in view and "FAILED" in view
    # Its last frame drawn, the view has given way to a shell that sleeps: a finished
    # execution's window costs no interpreter, and keeps the frame.
    while time.monotonic() < deadline:
        command = kairo.tmux(
            "display-message", "-p", "-t", f"{session}:supervisor", "#{pane_current_command}"
        ).stdout.strip()
        if command in ("sh", "sleep"):
            break
        time.sleep(0.2)
    assert command in ("sh", "sleep")
    assert "FAILED" in kairo.tmux("capture-pane", "-p", "-t", f"{session}:supervisor").stdout


SLEEPER = "version: 1\nname: long\nagent: {kind: shell, run: 'sleep 600'}\nsubtasks:\n  - id: x\n"


def test_the_live_view_reads_its_executions_store_whatever_the_tmux_server_was_given(
    kairo: Kairo, tmp_path: Path
) -> None:
    # The tmux server was started by a command with another store in its environment,
    # which every new pane gets.
    elsewhere = f"sqlite:///{tmp_path / 'elsewhere' / 'kairo.db'}"
    subprocess.run(
        ["tmux", "-L", kairo.socket, "new-session", "-d", "-s", "first", "sleep 600"],
        env=dict(kairo.env, KAIRO_STORE=elsewhere),
        check=True,
    )
    assert kairo.run("start", str(kairo.write_plan(SLEEPER)), "--detach").returncode == 0

    # It shows the execution, from the repository's own store.
    live_view(kairo, kairo.json("status")["tmux_session"], "agents run in the other")

    assert kairo.run("stop", "--now", "--wait").returncode == 0


def test_the_supervisor_outlives_the_command_that_started_it(kairo: Kairo, repo: Path) -> None:
    plan = kairo.write_plan(
        "version: 1\nname: slow\nagent: {kind: shell, run: 'sleep 1.5; echo x > x.txt'}\nsubtasks:\n  - id: x\n"
    )
    done = kairo.run("start", str(plan), "--detach")
    assert done.returncode == 0, done.stderr
    status = kairo.json("status")
    assert done.stdout == status["execution_id"] + "\n"  # for `id=$(kairo-orch start ...)`
    assert status["status"] == "RUNNING"
    pid = status["supervisor_pid"]
    # A session leader of its own: the terminal that started it can close.
    assert os.getsid(pid) == pid
    deadline = time.monotonic() + 30
    while kairo.json("status")["status"] == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert kairo.json("status")["status"] == "COMPLETED"
    assert kairo.json("status")["supervisor_pid"] is None


def test_a_moved_repository_keeps_its_executions_in_its_own_store(kairo: Kairo, repo: Path) -> None:
    plan = kairo.write_plan(
        "version: 1\nname: moved\nagent: {kind: shell, run: 'echo x > x.txt'}\nsubtasks:\n  - id: x\n"
    )
    assert kairo.run("start", str(plan), "--wait").returncode == 0
    execution_id = kairo.json("status")["execution_id"]
    moved = repo.with_name("moved-project")
    repo.rename(moved)  # its rows say the old path; the store inside .git is its own anyway

    try:
        there = Kairo(repo=moved, env=kairo.env, socket=kairo.socket)
        assert [row["execution_id"] for row in there.json("list")] == [execution_id]
        assert there.json("status")["execution_id"] == execution_id
    finally:
        moved.rename(repo)  # for the fixture's own clean-up


def test_an_agent_that_writes_only_inside_a_submodule_is_told_so(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    lib = tmp_path / "lib"
    git(tmp_path, "init", "-q", str(lib))
    git(
        lib, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "l"
    )
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(repo, "commit", "-q", "-m", "a submodule")
    plan = kairo.write_plan(
        "version: 1\nname: sub\nagent: {kind: shell, run: 'echo x > lib/new.txt'}\n"
        "subtasks:\n  - id: a\n"
    )

    assert kairo.run("start", str(plan), "--wait").returncode == 1

    view = kairo.json("status")["subtasks"][0]
    assert view["reason"] == (
        "no_changes: attempts 1 and 2 changed nothing: what it wrote inside the submodule lib "
        "is no change of this repository's (kairo-orch commits no submodule)"
    )
    report = kairo.run("report", "--markdown").stdout
    assert "what it wrote inside the submodule lib" in report
