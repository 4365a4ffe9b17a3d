"""The result handed over: branches pushed to a remote, a pull request command run once."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.e2e.conftest import Kairo, git

pytestmark = pytest.mark.slow

# A stand-in for `gh pr create`: records its arguments, its body file and the environment.
GH = """\
#!/bin/sh
{{ printf '%s\\n' "$@"; echo "branch=$KAIRO_INTEGRATION_BRANCH"; echo "title=$KAIRO_TITLE"; }} > {out}/gh.args
cp "$KAIRO_REPORT_FILE" {out}/gh.body
echo https://example.invalid/pull/7
"""


def stand_in_gh(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(GH.format(out=tmp_path))
    gh.chmod(gh.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_branches_are_pushed_and_the_pull_request_gets_the_report(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    kairo.env["PATH"] = f"{stand_in_gh(tmp_path)}:{kairo.env['PATH']}"
    plan = kairo.write_plan(
        "version: 1\nname: handover\n"
        "review:\n  push: origin\n  push_subtask_branches: true\n"
        '  pr_command: gh pr create --title "$KAIRO_TITLE" --body-file "$KAIRO_REPORT_FILE"\n'
        "agent: {kind: shell, run: 'echo $KAIRO_SUBTASK_ID > $KAIRO_SUBTASK_ID.txt'}\n"
        "subtasks:\n  - id: one\n  - id: two\n"
    )

    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 0, done.stderr
    status = kairo.json("status")
    branch = status["integration_branch"]
    assert git(remote, "rev-parse", branch).strip() == status["integration_head"]
    for view in status["subtasks"]:
        assert git(remote, "rev-parse", view["branch"]).strip() == view["head_commit"]
    args = (tmp_path / "gh.args").read_text().splitlines()
    assert args[:3] == ["pr", "create", "--title"]
    assert f"branch={branch}" in args and "title=kairo-orch: handover" in args
    body = (tmp_path / "gh.body").read_text()
    assert body.startswith("# kairo-orch: handover") and "**one**" in body
    report = kairo.json("report")
    assert [(r["step"], r["exit_code"]) for r in report["review"]] == [
        ("push", 0),
        ("pull_request", 0),
    ]
    assert "https://example.invalid/pull/7" in report["review"][1]["output_tail"]
    steps = [
        json.loads(line)["event_type"]
        for line in kairo.run("events", "--json").stdout.splitlines()
        if "review_step" in line
    ]
    assert steps.count("review_step_started") == 2


def test_a_push_to_a_remote_that_refuses_is_reported_and_no_pull_request_follows(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    kairo.env["PATH"] = f"{stand_in_gh(tmp_path)}:{kairo.env['PATH']}"
    git(repo, "remote", "add", "nowhere", str(tmp_path / "gone.git"))  # a remote, not there
    plan = kairo.write_plan(
        "version: 1\nname: refused\n"
        "review: {push: nowhere, pr_command: 'gh pr create'}\n"
        "agent: {kind: shell, run: 'echo x > x.txt'}\nsubtasks:\n  - id: a\n"
    )

    done = kairo.run("start", str(plan), "--wait")

    assert done.returncode == 0, done.stderr  # the subtasks merged; the report says the rest
    assert "1 of 1 subtask merged, but the push failed (exit 128);" in done.stderr
    report = kairo.json("report")
    (push, pull) = report["review"]
    assert push["step"] == "push" and push["exit_code"] not in (0, None)
    assert "gone.git" in push["output_tail"]
    assert pull == {
        "step": "pull_request",
        "exit_code": None,
        "output_tail": "not run: the push failed",
    }
    assert not (tmp_path / "gh.args").exists()
    assert "- push: failed (exit status" in kairo.run("report").stdout


def test_a_push_to_no_remote_url_or_path_is_refused_before_anything_runs(
    kairo: Kairo, repo: Path
) -> None:
    plan = kairo.write_plan(
        "version: 1\nname: typo\nreview: {push: orign}\n"
        "agent: {kind: shell, run: 'echo x > x.txt'}\nsubtasks:\n  - id: a\n"
    )

    for command in ("validate", "start"):
        done = kairo.run(command, str(plan), *(["--detach"] if command == "start" else []))
        assert done.returncode == 2, done.stderr
        assert "review.push: 'orign' is no remote of the repository" in done.stderr
    assert kairo.run("list").stdout == "no executions in this repository yet\n"
