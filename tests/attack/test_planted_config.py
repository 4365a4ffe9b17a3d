"""35.1: an agent plants, in the repository's config, its attributes, its hooks and the
user's global config, every program git can be told to run (fsmonitor, hooks, clean and
smudge filters, merge and diff drivers, an external diff, a pager, an editor, a signing
program, a credential helper, an ssh command), and a `.gitattributes` that names them in
the tree that gets merged. No git command of kairo-orch runs any of them: not the
supervisor's (fills, commits, looks, merges, a conflict's resolution, the conflict map),
nor `status`, `report`, `conflicts`, `clean`, `validate` or another `start` after it. The
user's own git, afterwards, does run them: the plants are real. Under the default settings
(bubblewrap) the same agent plants nothing the user's git reads: every plant is tried, and
afterwards the user's own git runs nothing either."""

from __future__ import annotations

import contextlib
import subprocess
import textwrap
from pathlib import Path

import pytest

from orchestrator.git.remote import fetch_branch, push_branch
from orchestrator.git.repo import discover_repo
from tests.attack.sandboxes import Mode, outside, unchanged_outside
from tests.e2e.conftest import Kairo, git

pytestmark = [pytest.mark.slow, pytest.mark.reproduces("35.1")]

HOOKS = " ".join(
    (
        "applypatch-msg pre-applypatch post-applypatch pre-commit pre-merge-commit",
        "prepare-commit-msg commit-msg post-commit pre-rebase post-checkout post-merge",
        "pre-push pre-receive update proc-receive post-receive post-update",
        "reference-transaction push-to-checkout pre-auto-gc post-rewrite sendemail-validate",
        "fsmonitor-watchman p4-changelist p4-prepare-changelist p4-post-changelist",
        "p4-pre-submit post-index-change",
    )
)


def marker(root: Path) -> tuple[Path, Path]:
    """A program that writes down that it ran, and who ran it, then passes its input on
    (so that a filter or a pager it stands for leaves git working)."""
    mark = root / "MARK"
    program = root / "evil.sh"
    program.write_text(
        textwrap.dedent(
            f"""\
            #!/bin/sh
            parent=$(tr '\\0' ' ' < /proc/$PPID/cmdline 2>/dev/null)
            echo "ran as $0 $* (by $parent)" >> {mark}
            cat
            """
        )
    )
    program.chmod(0o755)
    return program, mark


def plant_script(evil: Path, home: Path, *, every: bool) -> str:
    """What the injected prompt told the agent to run: as git itself would let it. Stopped
    at the first plant that fails, or, `every`, each tried whatever the others did."""
    hooks = evil.parent / "hooks"
    return ("" if every else "set -e\n") + textwrap.dedent(
        f"""\
        common=$(git rev-parse --git-common-dir)
        mkdir -p {hooks} "$common/hooks" "$common/info"
        for hook in {HOOKS}; do
            cp {evil} {hooks}/$hook; cp {evil} "$common/hooks/$hook"
        done
        for config in "$common/config" {home}/.gitconfig {evil.parent}/included; do
            git config --file "$config" core.fsmonitor {evil}
            git config --file "$config" core.hooksPath {hooks}
            git config --file "$config" core.pager {evil}
            git config --file "$config" core.editor {evil}
            git config --file "$config" core.askPass {evil}
            git config --file "$config" core.sshCommand {evil}
            git config --file "$config" core.alternateRefsCommand {evil}
            git config --file "$config" sequence.editor {evil}
            git config --file "$config" diff.external {evil}
            git config --file "$config" diff.evil.textconv {evil}
            git config --file "$config" diff.evil.command {evil}
            git config --file "$config" merge.evil.driver "{evil} %O %A %B"
            git config --file "$config" filter.evil.clean {evil}
            git config --file "$config" filter.evil.smudge {evil}
            git config --file "$config" filter.evilproc.process {evil}
            git config --file "$config" gpg.program {evil}
            git config --file "$config" commit.gpgSign true
            git config --file "$config" log.showSignature true
            git config --file "$config" credential.helper {evil}
            git config --file "$config" uploadpack.packObjectsHook {evil}
        done
        git config --file "$common/config" include.path {evil.parent}/included
        git config --file "$common/config" extensions.worktreeConfig true
        git config --worktree core.fsmonitor {evil}
        printf '* filter=evil diff=evil merge=evil\\n*.md filter=evilproc\\n' > "$common/info/attributes"
        echo planted > planted.txt
        """
    )


def test_no_git_command_of_kairo_orch_runs_a_planted_program(
    kairo: Kairo, repo: Path, tmp_path: Path, mode: Mode
) -> None:
    evil, mark = marker(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    kairo.env["HOME"] = str(home)
    kairo.env["KAIRO_OVERLAP_EVERY"] = "0.2"  # the looks at running worktrees run too
    (repo / "app.txt").write_text("one\ntwo\nthree\n")
    # In the tree, where the agent finds it in either sandbox (bubblewrap hides /tmp).
    (repo / "plant.sh").write_text(plant_script(evil, home, every=mode.sandboxed))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "app")
    included = evil.parent / "included"
    before = outside(repo, home, included)
    # A resolution on attempt 2 keeps both sides (deletes git's marker lines).
    resolve = "sed -i '/^<<<<<<<\\|^=======\\|^>>>>>>>/d' app.txt"
    plan = kairo.write_plan(
        textwrap.dedent(
            f"""\
            version: 1
            name: planted
            {mode.plan}
            max_parallel: 1
            resolve_conflicts: agent
            verify: "test -f app.txt"
            agent: {{kind: shell, run: "true"}}
            subtasks:
              - id: plant
                agent: {{run: "sh plant.sh && sleep 0.5"}}
              - id: attributes
                agent: {{run: "printf '* filter=evil diff=evil merge=evil\\\\n' > .gitattributes"}}
              - id: first
                agent: {{run: "sed -i 's/two/TWO/' app.txt && echo a > first.md && sleep 0.5"}}
              - id: second
                agent:
                  run: >-
                    if grep -q '^<<<<<<<' app.txt; then {resolve};
                    else sed -i 's/two/2/' app.txt && echo b > second.md; fi
            """
        )
    )

    done = kairo.run("start", str(plan), "--wait")
    status = kairo.json("status")
    states = {s["id"]: s["state"] for s in status["subtasks"]}
    # What ran: a fill, commit and merge with .gitattributes naming the drivers, a conflict
    # and its resolution (a merge in a worktree), the looks.
    assert states["attributes"] == "merged", (done.stderr, status)
    assert states["first"] == "merged", (done.stderr, status)
    second = next(s for s in status["subtasks"] if s["id"] == "second")
    assert (second["state"], second["attempts"]) == ("merged", 2), status  # its resolution
    for command in (
        ("status",),
        ("report",),
        ("report", "--markdown"),
        ("report", "--html"),
        ("conflicts",),
        ("list",),
        ("validate", str(plan)),
    ):
        kairo.run(*command)
    kairo.run("clean", "--force")
    again = kairo.write_plan(
        "version: 1\nname: again\nagent: {kind: shell, run: 'echo x > again.txt'}\n"
        "subtasks:\n  - id: again\n",
        "again.yaml",
    )
    kairo.run("start", str(again), "--wait")
    kairo.run("clean", "--force")

    assert not mark.exists(), f"kairo-orch's git ran planted programs:\n{mark.read_text()}"
    if mode.sandboxed:
        said = (Path(status["run_root"]) / "plant" / "1" / "output.log").read_text()
        assert "Read-only file system" in said, said
        unchanged_outside(repo, before, home, included)

    # The control: the user's own git, in the same repository and home, runs them.
    env = {**kairo.env, "GIT_PAGER": ""}
    subprocess.run(["git", "status"], cwd=repo, env=env, capture_output=True, check=False)
    subprocess.run(["git", "log", "-1", "-p"], cwd=repo, env=env, capture_output=True, check=False)
    if mode.sandboxed:
        assert not mark.exists(), f"the user's git ran planted programs:\n{mark.read_text()}"
        return
    assert mark.exists(), "the plants never ran at all"
    assert str(evil) in mark.read_text()


def planted_clone(tmp_path: Path, planted_in: str, evil: Path) -> tuple[Path, str]:
    """A worker's clone of a remote, with one commit on `work`, and the plants."""
    remote, clone = tmp_path / "remote.git", tmp_path / "clone"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    subprocess.run(["git", "clone", "-q", str(remote), str(clone)], check=True, capture_output=True)
    for key, value in (("user.name", "W"), ("user.email", "w@example.com")):
        git(clone, "config", key, value)
    (clone / "a.txt").write_text("a\n")
    git(clone, "add", ".")
    git(clone, "commit", "-q", "-m", "a")
    git(clone, "branch", "-M", "work")
    if planted_in == "config":
        for key in ("remote.origin.uploadpack", "remote.origin.receivepack", "core.sshCommand"):
            git(clone, "config", key, str(evil))
        git(clone, "config", "credential.helper", str(evil))
        git(clone, "config", "core.fsmonitor", str(evil))
    else:
        hook = clone / ".git" / "hooks" / "pre-push"
        hook.write_bytes(evil.read_bytes())
        hook.chmod(0o755)
    return clone, str(remote)


def users_push(clone: Path) -> None:
    # The planted receive-pack speaks no protocol: the user's push hangs on it, once run.
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(
            ["git", "push", "-q", "origin", "work:refs/heads/control"],
            cwd=clone,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=5,
            check=False,
        )


@pytest.mark.parametrize("planted_in", ["config", "hooks"])
async def test_the_workers_transports_run_nothing_a_clone_names(
    tmp_path: Path, planted_in: str
) -> None:
    """A worker's fetch and push (git/remote.py) to the shared remote, from a clone whose
    config names an upload-pack, a receive-pack, a credential helper and an ssh command
    for its remote, and whose hooks include pre-push: none runs; the user's own `git push`
    from the same clone runs them."""
    evil, mark = marker(tmp_path)
    clone, url = planted_clone(tmp_path, planted_in, evil)
    discover_repo(clone)  # the worker's clone, as `worker` names it

    await push_branch(clone, url, "work")
    # A branch checked out is never fetched into: detached (by a git that reads no index).
    git(clone, "update-ref", "--no-deref", "HEAD", git(clone, "rev-parse", "HEAD").strip())
    assert await fetch_branch(clone, url, "work") == git(clone, "rev-parse", "work").strip()
    assert not mark.exists(), mark.read_text()

    users_push(clone)
    assert mark.exists(), "the control push ran nothing"
