"""An agent writes where it has no business (issue 35, item 3): into the user's checkout,
into a finished sibling's worktree while it waits for its merge, or into a sibling's link
to the git directory. Each is named, with the command that restores it, and fails the
subtask whose agent did it.

Writes into a sibling's worktree while the sibling's own agent runs cannot be told from
the sibling's own work in local mode (the sandbox prevents them); these are the writes
that can. Under the default settings (bubblewrap) none can be made: the checkout is
read-only to the agent, and no other worktree is there to write."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.attack.guarded_runs import (
    CHECKOUT,
    SHORT_ID,
    agent_said,
    breach_named,
    failed_by_the_guard,
    refused,
    restore,
    run_plan,
    subtask,
    worktree_of,
)
from tests.attack.sandboxes import Mode, outside, unchanged_outside
from tests.e2e.conftest import Kairo, git

pytestmark = [pytest.mark.slow, pytest.mark.reproduces("35.3")]


def test_a_line_written_into_the_users_checkout_is_named_and_put_back(
    kairo: Kairo, repo: Path, mode: Mode
) -> None:
    # The user is mid-work: what is put back is their edit, not the last commit.
    (repo / "README.md").write_text("project, edited but not committed\n")
    (repo / "notes.txt").write_text("untracked notes\n")
    mine = (repo / "README.md").read_text()
    before = outside(repo)

    done, status = run_plan(
        kairo,
        "checkout",
        {
            "a": f'{CHECKOUT}; echo \'import os; os.system("evil")\' >> "$top/README.md" && '
            'echo planted > "$top/planted.py" && echo x > x'
        },
        mode=mode,
    )

    if mode.sandboxed:
        refused(status, "a", "Read-only file system")
        unchanged_outside(repo, before)
        return

    assert "evil" in (repo / "README.md").read_text() and (repo / "planted.py").exists()  # real
    assert done.returncode == 1, done.stderr
    failed_by_the_guard(status, "a", f"{repo}/README.md was changed")
    restore(repo, breach_named(status, "checkout", f"{repo}/README.md"))
    restore(repo, breach_named(status, "checkout", f"{repo}/planted.py"))
    assert (repo / "README.md").read_text() == mine
    assert not (repo / "planted.py").exists()
    assert (repo / "notes.txt").read_text() == "untracked notes\n"
    assert git(repo, "status", "--porcelain") == " M README.md\n?? notes.txt\n"


def test_a_write_into_a_finished_siblings_worktree_before_its_merge_is_named(
    kairo: Kairo, repo: Path, mode: Mode
) -> None:
    # `victim` finishes first, but merges after `writer` (plan order): while it waits,
    # `writer` writes into its worktree, where a next attempt would commit it as its work.
    victim_branch = "refs/heads/kairo-subtasks/sibling-write/$s/victim"
    wait_for_the_victim = (
        f"{SHORT_ID}; base=$(git rev-parse HEAD); for i in $(seq 200); do "
        f'h=$(git rev-parse -q --verify "{victim_branch}"); '
        '[ -n "$h" ] && [ "$h" != "$base" ] && break; sleep 0.05; done; sleep 1'
    )
    done, status = run_plan(
        kairo,
        "sibling-write",
        {
            "writer": f'{wait_for_the_victim}; v=$(dirname "$KAIRO_WORKTREE")/victim; '
            'echo evil >> "$v/lib.py" && grep -q evil "$v/lib.py" && echo planted; echo w > w',
            "victim": "echo good > lib.py",
        },
        mode=mode,
    )

    if mode.sandboxed:  # no sibling's worktree to write: both merged their own work
        assert done.returncode == 0, done.stderr
        assert "Directory nonexistent" in agent_said(status, "writer")
        assert git(repo, "show", f"{status['integration_branch']}:lib.py") == "good\n"
        return
    writer_output = Path(subtask(status, "writer")["output"]).read_text()
    assert "planted" in writer_output  # the line was written, while the victim waited
    assert done.returncode == 1, done.stderr
    worktree = str(worktree_of(repo, status, "victim"))
    failed_by_the_guard(status, "writer", f"{worktree}/lib.py was changed")
    breach = breach_named(status, "worktree", f"{worktree}/lib.py")
    assert breach["restore"].startswith(f"git -C {worktree} restore --source=")
    # The victim merged its own work, without the line.
    assert subtask(status, "victim")["state"] == "merged"
    assert git(repo, "show", f"{status['integration_branch']}:lib.py") == "good\n"


def test_a_siblings_link_to_the_git_directory_rewritten_is_named_and_repaired(
    kairo: Kairo, repo: Path, mode: Mode
) -> None:
    # `writer` points the waiting victim's `.git` at a git directory of its own, whose
    # config runs a program in the user's next `git status` there.
    before = outside(repo)
    victim_branch = "refs/heads/kairo-subtasks/relink/$s/victim"
    done, status = run_plan(
        kairo,
        "relink",
        {
            "writer": f"{SHORT_ID}; base=$(git rev-parse HEAD); for i in $(seq 200); do "
            f'h=$(git rev-parse -q --verify "{victim_branch}"); '
            '[ -n "$h" ] && [ "$h" != "$base" ] && break; sleep 0.05; done; sleep 1; '
            'v=$(dirname "$KAIRO_WORKTREE")/victim; git init -q "$v.fake" && '
            'echo "gitdir: $v.fake/.git" > "$v/.git" && cat "$v/.git" && echo w > w',
            "victim": "echo good > lib.py",
        },
        mode=mode,
    )

    worktree = worktree_of(repo, status, "victim")
    if mode.sandboxed:
        refused(status, "writer", "Directory nonexistent")
        assert subtask(status, "victim")["state"] == "merged"
        unchanged_outside(repo, before)
        return
    writer_output = Path(subtask(status, "writer")["output"]).read_text()
    assert f"gitdir: {worktree}.fake/.git" in writer_output  # rewritten
    assert done.returncode == 1, done.stderr
    failed_by_the_guard(status, "writer", f"{worktree}/.git names")
    restore(repo, breach_named(status, "link", f"{worktree}/.git"))
    assert git(worktree, "rev-parse", "--git-common-dir").strip() == str(repo / ".git")
