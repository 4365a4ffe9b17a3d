"""Overlap warnings while agents work, and the conflict map, with real agents' worktrees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Kairo, git, shared_with_agents
from tests.e2e.test_recovery import supervisor_logs, wait_for

pytestmark = pytest.mark.slow


def overlaps(kairo: Kairo) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = kairo.json("status").get("overlaps", [])
    return found


def states(kairo: Kairo) -> dict[str, str]:
    return {s["id"]: s["state"] for s in kairo.json("status")["subtasks"]}


def test_two_running_agents_editing_one_file_are_told_before_either_finishes(
    kairo: Kairo, tmp_path: Path
) -> None:
    (kairo.repo / "src").mkdir()
    (kairo.repo / "src" / "x.py").write_text("x = 1\n")
    git(kairo.repo, "add", ".")
    git(kairo.repo, "commit", "-q", "-m", "x")
    release = tmp_path / "release"
    release.mkdir()
    # Each agent edits, then waits until the test lets it finish (a file of its name).
    wait = f"while [ ! -e {release}/$KAIRO_SUBTASK_ID ]; do sleep 0.05; done"
    plan = kairo.write_plan(
        f"version: 1\nname: overlaps\nmax_parallel: 3\n{shared_with_agents(release)}"
        f"agent: {{kind: shell, run: 'echo $KAIRO_SUBTASK_ID >> src/x.py; {wait}'}}\n"
        "subtasks:\n  - id: fix-a\n  - id: fix-b\n"
        f"  - id: fix-c\n    agent: {{run: 'echo c > c.txt; {wait}'}}\n"
    )
    kairo.env["KAIRO_OVERLAP_EVERY"] = "0.3"
    nothing = kairo.run("conflicts")
    assert (nothing.returncode, nothing.stderr) == (
        2,
        "kairo-orch: there is no execution in this repository yet; "
        "`kairo-orch start PLAN` starts one\n",
    )
    assert kairo.run("start", str(plan), "--detach").returncode == 0

    wait_for(lambda: bool(overlaps(kairo)), seconds=30)
    (overlap,) = overlaps(kairo)
    assert (overlap["subtasks"], overlap["kind"], overlap["paths"]) == (
        ["fix-a", "fix-b"],
        "both_edit",
        ["src/x.py"],
    ), supervisor_logs(kairo.repo)
    assert overlap["sentence"] == "fix-a and fix-b both edit src/x.py"
    assert states(kairo) == {"fix-a": "running", "fix-b": "running", "fix-c": "running"}
    assert "overlap: fix-a and fix-b both edit src/x.py" in kairo.run("status").stdout
    # The map of what is under way: the two would conflict, fix-c shares nothing.
    mapped = kairo.json("conflicts")
    assert [b["subtask_id"] for b in mapped["branches"]] == ["fix-a", "fix-b", "fix-c"]
    assert all(b["worktree_included"] for b in mapped["branches"])
    assert mapped["pairs"] == [
        {
            "subtasks": ["fix-a", "fix-b"],
            "shared": ["src/x.py"],
            "conflicts": [{"path": "src/x.py", "kind": "content"}],
        }
    ]
    assert "fix-a and fix-b would conflict on src/x.py (content)" in kairo.run("conflicts").stdout
    report = kairo.run("report", "--markdown").stdout
    assert (
        "## Conflict map\n\n- **fix-a** and **fix-b** would conflict on `src/x.py` (content)"
        in (report)
    )
    # The HTML page (a snapshot of the running execution) shows both, from the same data.
    page = kairo.run("report", "--html").stdout
    conflicts = page[page.index('<section id="conflicts">') :]
    conflicts = conflicts[: conflicts.index("</section>")]
    assert "fix-a and fix-b both edit src/x.py" in conflicts
    assert (
        '<tr data-path="src/x.py"><td><code>src/x.py</code></td><td class="mono">fix-a, fix-b'
        in conflicts
    )

    # fix-a finishes and merges: fix-b's edit now conflicts with merged work.
    (release / "fix-a").touch()
    wait_for(lambda: states(kairo)["fix-a"] == "merged", seconds=30)
    wait_for(lambda: len(overlaps(kairo)) == 2, seconds=30)
    merged = overlaps(kairo)[1]
    assert (merged["subtasks"], merged["kind"], merged["paths"]) == (
        ["fix-b"],
        "conflicts_with_merged",
        ["src/x.py"],
    )
    assert merged["sentence"] == (
        "fix-b's change to src/x.py would conflict with merged work (fix-a)"
    )
    assert states(kairo)["fix-b"] == "running"

    (release / "fix-b").touch()
    (release / "fix-c").touch()
    wait_for(lambda: kairo.json("status")["status"] != "RUNNING", seconds=60)
    assert states(kairo) == {"fix-a": "merged", "fix-b": "conflicted", "fix-c": "merged"}
    report = kairo.run("report", "--markdown").stdout
    assert "## Overlaps seen while the agents worked" in report
    assert "- fix-a and fix-b both edit src/x.py" in report
    assert len(overlaps(kairo)) == 2  # each recorded once, however many looks saw it
    # The look's index files are gone with the worktrees they looked at.
    run_root = Path(kairo.json("status")["run_root"])
    assert list((run_root / "overlaps").glob("*.index")) == []
