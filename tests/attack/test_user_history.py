"""An agent destroys or rewrites the user's history and git directory (issue 35, item 2):
each change is named, with the command that restores it, its subtask fails, the run
exits 1, and nothing the user had is lost to `git gc --prune=now`.

Each test first shows the attack was real (the ref did move, the file is there): before
the guard, every one of these runs ended COMPLETED with exit 0 and nothing said. Under the
default settings (bubblewrap) the same agent can change none of it: the git directory is
read-only to it, and the user's refs, stash, config, hooks and objects stay byte for byte
as they were. What only the guard's own workings show (a change found by a resume, the
guard's record changed, `clean` keeping the guard's refs) is tested in local mode, where
an agent can make the change."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.attack.guarded_runs import (
    GIT_DIR,
    SHORT_ID,
    agent_said,
    breach_named,
    failed_by_the_guard,
    refused,
    restore,
    run_plan,
    subtask,
)
from tests.attack.sandboxes import LOCAL, Mode, outside, unchanged_outside
from tests.e2e.conftest import Kairo, git

pytestmark = [pytest.mark.slow, pytest.mark.reproduces("35.2")]


def wait_for(done: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def event_types(kairo: Kairo, execution_id: str) -> list[str]:
    listed = kairo.run("events", execution_id, "--json").stdout.splitlines()
    return [json.loads(line)["event_type"] for line in listed]


def exists(repo: Path, oid: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", oid], cwd=repo).returncode == 0


def ref(repo: Path, name: str) -> str | None:
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", name], cwd=repo, capture_output=True, text=True
    )
    return found.stdout.strip() or None


def stash_entries(repo: Path) -> list[str]:
    return git(repo, "stash", "list", "--format=%H %gs").splitlines()


def test_a_deleted_branch_and_a_cleared_stash_outlive_gc_and_are_put_back(
    kairo: Kairo, repo: Path, mode: Mode
) -> None:
    # A branch whose commit (and file) nothing else reaches, not even HEAD's reflog, and
    # two stash entries: all unreachable once the agent is done.
    (repo / "feature.txt").write_text("only on feature\n")
    git(repo, "add", "feature.txt")
    tree = git(repo, "write-tree").strip()
    git(repo, "reset", "-q")
    (repo / "feature.txt").unlink()
    feature = git(repo, "commit-tree", tree, "-p", "HEAD", "-m", "feature work").strip()
    git(repo, "branch", "feature", feature)
    for wip in ("first", "second"):
        (repo / "README.md").write_text(f"project, {wip} try\n")
        git(repo, "stash", "push", "-q", "-m", f"{wip} try")
    stashed = stash_entries(repo)
    before = outside(repo)

    done, status = run_plan(
        kairo,
        "history",
        {"a": "git branch -D feature; git stash clear; git gc -q --prune=now; echo x > x"},
        mode=mode,
    )

    if mode.sandboxed:  # each tried, none made: the agent's own work merged
        assert done.returncode == 0, done.stderr
        assert agent_said(status, "a").count("Read-only file system") >= 2
        unchanged_outside(repo, before)
        return
    assert ref(repo, "refs/heads/feature") is None and stash_entries(repo) == []  # it was real
    assert done.returncode == 1, done.stderr
    failed_by_the_guard(status, "a", "refs/heads/feature was deleted")
    assert status["status"] == "FAILED"
    # Nothing lost to the gc: the guard's refs keep every commit, and the file's blob.
    assert exists(repo, feature) and exists(repo, f"{feature}:feature.txt")
    assert all(exists(repo, line.split()[0]) for line in stashed)
    deleted = breach_named(status, "ref", "refs/heads/feature")
    assert deleted["restore"] == f"git update-ref --no-deref refs/heads/feature {feature}"
    dropped = [b for b in status["breaches"] if b["kind"] == "stash"]
    assert [b["was"] for b in dropped] == ["On main: first try", "On main: second try"]
    # Every view says each change with the command that restores it.
    said = f"refs/heads/feature was deleted (it was at {feature[:12]})"
    assert f"changed: {said}; {deleted['restore']}" in kairo.run("status").stdout
    markdown = kairo.run("report", "--markdown").stdout
    assert f"- {said}: `{deleted['restore']}`" in markdown
    page = kairo.run("report", "--html").stdout
    assert f"<li>{said}: <code>{deleted['restore']}</code></li>" in page
    for breach in [deleted, *dropped]:  # in the order given: oldest stash entry first
        restore(repo, breach)
    assert ref(repo, "refs/heads/feature") == feature
    assert stash_entries(repo) == stashed


def test_a_change_made_while_no_supervisor_ran_is_found_by_the_resume(
    kairo: Kairo, repo: Path
) -> None:
    # The supervisor is killed while the agent runs; the agent deletes a branch then. The
    # resumed supervisor reads back the record taken at the start (never takes a new one).
    git(repo, "branch", "feature")
    plan = kairo.write_plan(
        f"version: 1\nname: unwatched\n{LOCAL.plan}\nagent: {{kind: shell, run: 'true'}}\n"
        "subtasks:\n"
        "  - id: a\n    agent: {run: 'sleep 2; git branch -D feature; echo x > x'}\n"
    )
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    runs = repo / ".git" / "kairo" / "runs"
    wait_for(lambda: any(runs.glob("*/a/1/started.json")))
    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGKILL)
    wait_for(lambda: ref(repo, "refs/heads/feature") is None)  # done, unwatched

    resumed = kairo.run("resume", "--wait")

    assert resumed.returncode == 1, resumed.stderr
    status = kairo.json("status")
    failed_by_the_guard(status, "a", "refs/heads/feature was deleted")
    assert breach_named(status, "ref", "refs/heads/feature")["found"] == "resume"
    assert event_types(kairo, status["execution_id"]).count("guard_recorded") == 1


def test_a_record_changed_while_no_supervisor_ran_is_said_and_taken_anew(
    kairo: Kairo, repo: Path
) -> None:
    plan = kairo.write_plan(
        f"version: 1\nname: tampered\n{LOCAL.plan}\nagent: {{kind: shell, run: 'true'}}\n"
        "subtasks:\n"
        "  - id: a\n    agent: {run: 'sleep 2; echo x > x'}\n"
    )
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    runs = repo / ".git" / "kairo" / "runs"
    wait_for(lambda: any(runs.glob("*/a/1/started.json")))
    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGKILL)
    (record,) = runs.glob("*/guard/record.json")
    record.write_text(record.read_text().replace('"refs/heads/main"', '"refs/heads/mine"'))

    resumed = kairo.run("resume", "--wait")

    assert resumed.returncode == 1, resumed.stderr
    status = kairo.json("status")
    (breach,) = status["breaches"]
    assert breach["kind"] == "unreadable" and breach["name"] == str(record)
    assert breach["sentence"].startswith(f"the guard's record {record} was changed")
    assert event_types(kairo, status["execution_id"]).count("guard_recorded") == 2


def test_moving_the_checked_out_branch_is_named_and_put_back(
    kairo: Kairo, repo: Path, mode: Mode
) -> None:
    main = ref(repo, "refs/heads/main")
    before = outside(repo)

    done, status = run_plan(
        kairo,
        "move-main",
        {
            "a": "echo evil > evil.txt && git add evil.txt && "
            "git -c user.name=a -c user.email=a@b commit -qm evil && "
            "git update-ref refs/heads/main HEAD"
        },
        mode=mode,
    )

    if mode.sandboxed:  # its commit is its own scratch's; the branch is not its to move
        refused(status, "a", "Read-only file system")
        unchanged_outside(repo, before)
        return

    moved = ref(repo, "refs/heads/main")
    assert moved != main  # the user's checked-out branch really moved
    assert done.returncode == 1, done.stderr
    failed_by_the_guard(status, "a", "refs/heads/main moved")
    breach = breach_named(status, "ref", "refs/heads/main")
    assert (breach["was"], breach["now"]) == (main, moved)
    restore(repo, breach)
    assert ref(repo, "refs/heads/main") == main


def test_a_branch_pushed_into_the_repository_is_named_and_removed(
    kairo: Kairo, repo: Path, mode: Mode
) -> None:
    before = outside(repo)

    done, status = run_plan(
        kairo, "push-in", {"a": "git push -q . HEAD:refs/heads/x && echo x > x"}, mode=mode
    )

    if mode.sandboxed:
        refused(status, "a", "[remote rejected] HEAD -> x")
        unchanged_outside(repo, before)
        return

    assert ref(repo, "refs/heads/x") is not None  # made
    assert done.returncode == 1, done.stderr
    failed_by_the_guard(status, "a", "refs/heads/x was created")
    restore(repo, breach_named(status, "ref", "refs/heads/x"))
    assert ref(repo, "refs/heads/x") is None


def test_moving_a_siblings_branch_is_blamed_on_the_one_that_moved_it(
    kairo: Kairo, repo: Path, mode: Mode
) -> None:
    # b starts once a merged (it depends on it), and moves a's branch to its own head.
    before = outside(repo)
    done, status = run_plan(
        kairo,
        "sibling",
        {
            "a": "echo a > a.txt",
            "b": f"{SHORT_ID}; echo b > b.txt && git add b.txt && "
            "git -c user.name=b -c user.email=b@b commit -qm b && "
            'git update-ref "refs/heads/kairo-subtasks/sibling/$s/a" HEAD',
        },
        depends={"b": "a"},
        mode=mode,
    )

    a = subtask(status, "a")
    if mode.sandboxed:  # a's branch is where its merge left it; b could not move it
        assert a["state"] == "merged"
        assert ref(repo, f"refs/heads/{a['branch']}") == a["head_commit"]
        refused(status, "b", "Read-only file system")
        unchanged_outside(repo, before)
        return
    branch = f"refs/heads/{a['branch']}"
    assert ref(repo, branch) != a["head_commit"]  # moved
    assert done.returncode == 1, done.stderr
    assert a["state"] == "merged"
    failed_by_the_guard(status, "b", f"{branch} moved")
    restore(repo, breach_named(status, "branch", branch))
    assert ref(repo, branch) == a["head_commit"]


PLANTED = {
    "a hook": (
        f"{GIT_DIR}; printf '#!/bin/sh\\necho planted\\n' > $g/hooks/post-checkout && "
        "chmod +x $g/hooks/post-checkout",
        "hooks/post-checkout",
    ),
    "core.fsmonitor": (f"{GIT_DIR}; git config core.fsmonitor $g/../evil.sh", "config"),
    "a merge driver in info/attributes": (
        f"{GIT_DIR}; echo '* merge=evil' >> $g/info/attributes",
        "info/attributes",
    ),
}


@pytest.mark.parametrize("planted", list(PLANTED))
def test_what_an_agent_plants_in_the_git_directory_is_named_and_taken_out(
    kairo: Kairo, repo: Path, planted: str, mode: Mode
) -> None:
    command, path = PLANTED[planted]
    file = repo / ".git" / path
    before = file.read_bytes() if file.exists() else None
    everything = outside(repo)

    done, status = run_plan(kairo, "plant", {"a": f"{command} && echo x > x"}, mode=mode)

    if mode.sandboxed:
        refused(status, "a", "Read-only file system")
        unchanged_outside(repo, everything)
        return

    assert file.exists() and file.read_bytes() != before  # planted
    assert done.returncode == 1, done.stderr
    failed_by_the_guard(status, "a", str(file))
    restore(repo, breach_named(status, "file", str(file)))
    assert (file.read_bytes() if file.exists() else None) == before


def test_a_run_that_leaves_the_users_things_alone_completes_and_clean_drops_its_guard(
    kairo: Kairo, repo: Path, tmp_path: Path, mode: Mode
) -> None:
    # All the guard records, busy but left alone: no false alarm.
    git(repo, "tag", "-a", "-m", "release", "v1")
    git(repo, "branch", "feature")
    git(repo, "worktree", "add", "-q", str(tmp_path / "hotfix"), "-b", "hotfix")
    (repo / "README.md").write_text("project, edited\n")
    git(repo, "stash", "push", "-q", "-m", "wip")
    (repo / "notes.txt").write_text("untracked\n")
    (tmp_path / "extra.gitconfig").write_text("[alias]\n\tst = status\n")
    # Names that are not UTF-8, which git takes: recorded and compared as their bytes.
    git(repo, "branch", os.fsdecode(b"caf\xe9"))
    Path(os.fsdecode(bytes(repo) + b"/notes-\xff.txt")).write_text("untracked\n")
    git(repo, "config", "include.path", str(tmp_path / "extra.gitconfig"))

    done, status = run_plan(kairo, "calm", {"a": "echo a > a", "b": "echo b > b"}, mode=mode)

    assert done.returncode == 0, done.stderr
    assert "breaches" not in status and status["status"] == "COMPLETED"
    guard = f"refs/kairo/guard/{status['execution_id'][-6:].lower()}/"
    kept = git(repo, "for-each-ref", "--format=%(refname)", guard).split()
    tag = git(repo, "rev-parse", "refs/tags/v1").strip()
    assert f"{guard}snapshot" in kept and f"{guard}objects/{tag}" in kept
    assert "deleted the guard's refs" in kairo.run("clean").stdout
    assert git(repo, "for-each-ref", guard) == ""


def test_clean_keeps_the_guard_refs_of_a_run_it_found_changes_in(kairo: Kairo, repo: Path) -> None:
    (repo / "gone.txt").write_text("only here\n")
    git(repo, "add", "gone.txt")
    lost = git(repo, "commit-tree", git(repo, "write-tree").strip(), "-m", "lost").strip()
    git(repo, "reset", "-q", "--hard")
    git(repo, "branch", "lost", lost)

    done, status = run_plan(kairo, "keep", {"a": "git branch -D lost && echo x > x"}, mode=LOCAL)

    assert done.returncode == 1
    guard = f"refs/kairo/guard/{status['execution_id'][-6:].lower()}/"
    cleaned = kairo.run("clean")
    assert "kept the guard's refs" in cleaned.stdout, cleaned.stdout
    git(repo, "gc", "-q", "--prune=now")
    assert exists(repo, lost)  # still there to restore
    assert "deleted the guard's refs" in kairo.run("clean", "--force").stdout
    assert git(repo, "for-each-ref", guard) == ""


def test_a_branch_whose_name_is_not_utf8_is_named_and_put_back(
    kairo: Kairo, repo: Path, mode: Mode
) -> None:
    branch = os.fsdecode(b"caf\xe9")
    git(repo, "branch", branch)
    main = ref(repo, "refs/heads/main")
    before = outside(repo)

    done, status = run_plan(
        kairo,
        "latin",
        {"a": "git branch -D \"$(printf 'caf\\351')\" && echo x > x"},
        mode=mode,
    )

    if mode.sandboxed:
        refused(status, "a", "Read-only file system")
        unchanged_outside(repo, before)
        return

    assert ref(repo, f"refs/heads/{branch}") is None  # deleted
    assert done.returncode == 1, done.stderr
    assert subtask(status, "a")["state"] == "failed"
    said = kairo.run("status").stdout  # the name shown escaped, as every name is
    assert "guard_breached: while its agent or check ran, refs/heads/caf\\xe9 was deleted" in said
    restore(repo, breach_named(status, "ref", f"refs/heads/{branch}"))
    assert ref(repo, f"refs/heads/{branch}") == main
