"""The runner's records another process wrote, as the fold keeps them and status and the
report say them; and the names of the cgroups that hold attempts and checks."""

from __future__ import annotations

from orchestrator.core import events as ev
from orchestrator.core.ids import (
    attempt_cgroup,
    cgroup_attempt,
    cgroup_of_execution,
    check_cgroup,
)
from orchestrator.core.report import build_report, to_markdown
from orchestrator.core.state import ExecutionState
from orchestrator.core.status import status_document
from tests.core.test_decide import feed
from tests.core.test_overlaps import running

EXECUTION = "01M98ABCDEFGHJKMNPQRSTVWXY"


def exited(*written: ev.RunnerRecord) -> ExecutionState:
    return feed(
        running("fix-a"),
        [ev.AttemptExited(subtask_id="fix-a", attempt=1, exit_code=0, written_by_others=written)],
    )


def test_what_another_process_wrote_is_said_by_status_and_the_report_and_only_then() -> None:
    state = exited("exit_record", "output_log")
    document = status_document(state, status="RUNNING", version=1, head_seq=9, head_hash="h")
    assert document["written_by_others"] == [
        "fix-a attempt 1: an exit record was written into its run folder by another process "
        "while its agent still ran; it was not taken for the agent's exit",
        "fix-a attempt 1: its output log (/r/fix-a/output.log) was changed by another "
        "process: it is not what its agent printed",
    ]
    # The log it changed is not named as the agent's output any more.
    assert next(s for s in document["subtasks"] if s["id"] == "fix-a")["output"] is None
    report = build_report(state, "RUNNING")
    assert report["written_by_others"] == document["written_by_others"]
    assert report["attempts"]["fix-a"][0]["output"] is None
    markdown = to_markdown(report)
    assert "## Records of the agents' runners that another process wrote" in markdown
    assert all(said in markdown for said in document["written_by_others"])

    clean = exited()
    assert "written_by_others" not in status_document(
        clean, status="RUNNING", version=1, head_seq=9, head_hash="h"
    )
    assert "written_by_others" not in build_report(clean, "RUNNING")
    assert build_report(clean, "RUNNING")["attempts"]["fix-a"][0]["output"] == (
        "/r/fix-a/output.log"
    )


def test_an_attempt_exited_of_an_older_version_said_nothing_was_written_by_others() -> None:
    payload = {"subtask_id": "a", "attempt": 1, "exit_code": 0}
    for version in (3, 4):
        assert ev.from_record("attempt_exited", payload, version).written_by_others == ()


def test_cgroup_names_say_whose_they_are() -> None:
    name = attempt_cgroup(EXECUTION, "fix.a-1", 12)
    assert name == "kairo-attempt.01m98abcdefghjkmnpqrstvwxy.fix.a-1.12"
    assert cgroup_attempt(name) == ("fix.a-1", 12)
    check = check_cgroup(EXECUTION, "verify", "fix.a-1")
    assert cgroup_attempt(check) is None
    for found in (name, check):
        assert cgroup_of_execution(found, EXECUTION)
        assert cgroup_of_execution(found, EXECUTION[-6:].lower())  # by its short id too
        assert not cgroup_of_execution(found, "01M98ABCDEFGHJKMNPQRSTVWXZ")
    assert not cgroup_of_execution(f"user.{EXECUTION}", EXECUTION)
