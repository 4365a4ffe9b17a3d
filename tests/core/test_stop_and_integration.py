"""Stopping an execution and checking the integration branch, through decide and fold."""

from __future__ import annotations

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.decide import decide
from orchestrator.core.plan import ResolvedPlan
from orchestrator.core.reasons import ReasonCode
from orchestrator.core.reasons import sentence_or_none as said
from orchestrator.core.report import build_report, to_markdown
from orchestrator.core.state import ExecutionState
from orchestrator.core.status import status_document
from tests.core.integration_answers import check_answer, undo_answer
from tests.core.test_decide import World, feed, finish_only, plan, run, start, subtask


class CheckedWorld(World):
    """A World whose integration check fails after the merges it names."""

    def __init__(
        self,
        broken_by: tuple[str, ...] = (),
        conflicts_with: dict[str, str] | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.broken_by = set(broken_by)
        self.conflicts_with = conflicts_with or {}  # a subtask -> one it conflicts with
        self.checked: list[str] = []

    def answer(self, state: ExecutionState, command: cmd.Command) -> list[ev.ExecutionEvent]:
        match command:
            case cmd.MergeSubtask() if self.conflicts_with:
                on_branch = {*state.merged, *state.unverified}
                events: list[ev.ExecutionEvent] = []
                for sid in command.subtask_ids:
                    other = self.conflicts_with.get(sid)
                    if other in on_branch:
                        conflict = ev.Conflict(path="a.py", kind="content", **{"with": (other,)})
                        return [
                            *events,
                            ev.SubtaskConflicted(
                                subtask_id=sid, head_commit="h", conflicts=(conflict,)
                            ),
                        ]
                    events += self._merge_all([sid])
                    on_branch.add(sid)
                return events
            case cmd.CheckIntegration():
                self.checked.append(command.subtask_id)
                return [check_answer(state, command, self.broken_by)]
            case cmd.UndoMerges():
                return [undo_answer(state)]
            case cmd.KillAttempt(subtask_id=sid, attempt=number):
                return [
                    ev.AttemptExited(
                        subtask_id=sid, attempt=number, exit_code=143, output_tail="killed"
                    )
                ]
        return super().answer(state, command)


def checked_plan(*ids: str, integration_verify: str | None = "pytest -q") -> ResolvedPlan:
    base = plan(*(subtask(i) for i in ids))
    return base.model_copy(update={"integration_verify": integration_verify})


def drive_until(state: ExecutionState, world: World, done: object) -> ExecutionState:
    """Carry out the first command at a time until `done(state)` holds."""
    for _ in range(200):
        if done(state):  # type: ignore[operator]
            return state
        decision = decide(state)
        state = feed(state, decision.events or world.answer(state, decision.commands[0]))
    raise AssertionError("the condition never held")


def running(state: ExecutionState, sid: str) -> bool:
    attempt = state.subtask(sid).current_attempt
    return attempt is not None and attempt.pane_id is not None


# The integration check -----------------------------------------------------------------


def test_merges_are_checked_once_in_a_run_before_the_next_merge_builds_on_them() -> None:
    world = CheckedWorld()
    final = run(start(checked_plan("a", "b", "c")), world)
    assert final.ended == "COMPLETED"
    assert world.checked == ["c"]  # one check of the three merges
    assert final.merged == ("a", "b", "c")


def test_a_batch_of_one_checks_every_merge_on_its_own() -> None:
    world = CheckedWorld()
    p = checked_plan("a", "b", "c").model_copy(update={"integration_batch": 1})
    final = run(start(p), world)
    assert world.checked == ["a", "b", "c"]
    assert final.merged == ("a", "b", "c")


def test_no_merge_starts_while_merges_wait_for_their_check() -> None:
    world = CheckedWorld()
    state = drive_until(start(checked_plan("a", "b")), world, lambda s: s.merged == ())
    state = drive_until(state, world, lambda s: s.subtask("a").state == "integrating")
    commands = decide(state).commands
    assert cmd.CheckIntegration(subtask_id="b", subtask_ids=("a", "b")) in commands
    assert not any(isinstance(c, cmd.MergeSubtask) for c in commands)


def test_merges_waiting_for_a_check_hold_no_place() -> None:
    world = CheckedWorld()
    p = checked_plan("a", "b", "c").model_copy(update={"max_parallel": 1})
    state = finish_only(start(p), world, "a")
    state = feed(state, world.answer(state, cmd.MergeSubtask(subtask_id="a")))
    state = finish_only(state, world, "b")
    assert state.subtask("a").state == "integrating"
    assert [e.subtask_id for e in decide(state).events] == ["c"]  # type: ignore[union-attr]


def test_between_its_merge_and_its_check_a_subtask_is_integrating() -> None:
    """Not `verifying`, which is its own `verify` running: status says so, and the check's
    outcome moves it on (merged, here)."""
    world = CheckedWorld()
    p = checked_plan("a").model_copy(
        update={"subtasks": (subtask("a").model_copy(update={"verify": "true"}),)}
    )
    state = start(p)
    seen = [state.subtask("a").state]
    while state.ended is None:
        decision = decide(state)
        state = feed(state, decision.events or world.answer(state, decision.commands[0]))
        if seen[-1] != state.subtask("a").state:
            seen.append(state.subtask("a").state)
        if state.subtask("a").state == "integrating":
            document = status_document(
                state, status="RUNNING", version=1, head_seq=1, head_hash="h"
            )
            assert [s["state"] for s in document["subtasks"]] == ["integrating"]
    assert seen == [
        "pending",
        "preparing",
        "running",
        "verifying",
        "succeeded",
        "integrating",
        "merged",
    ]


def test_a_failed_check_is_bisected_to_its_culprit_and_the_rest_merge_again() -> None:
    world = CheckedWorld(broken_by=("s5",))
    ids = [f"s{i}" for i in range(8)]
    final = run(start(checked_plan(*ids)), world)
    # All eight, then the first four (they pass), then s4-s5, then s4 alone: s5 broke it.
    # s6 and s7 are merged again without s5, and checked once more.
    assert world.checked == ["s7", "s3", "s5", "s4", "s7"]
    assert final.merged == ("s0", "s1", "s2", "s3", "s4", "s6", "s7")
    culprit = final.subtask("s5")
    assert culprit.state == "failed" and culprit.merge is None
    assert culprit.reason is not None
    assert culprit.reason.code is ReasonCode.INTEGRATION_VERIFY_FAILED
    assert said(culprit.reason) == (
        "integration_verify_failed: `pytest -q` exited with status 1 on the integration "
        "branch after s5 merged; the merge was undone, and its work stays on b/s5"
    )
    assert "ImportError" in culprit.integration_output
    assert final.ended == "FAILED"
    report = build_report(final, "FAILED")
    assert report["integration_checks"] == {"runs": 5, "batch": 16}
    assert "- `integration_verify` ran 5 time(s), on batches of up to 16 merges" in to_markdown(
        report
    )


def test_a_failed_check_undoes_the_merge_and_fails_the_subtask_keeping_its_branch() -> None:
    world = CheckedWorld(broken_by=("b",))
    final = run(start(checked_plan("a", "b", "c")), world)
    b = final.subtask("b")
    assert b.state == "failed"
    assert b.reason is not None and b.reason.code is ReasonCode.INTEGRATION_VERIFY_FAILED
    assert said(b.reason).startswith("integration_verify_failed: `pytest -q` exited with status 1")
    assert "its work stays on b/b" in said(b.reason)
    assert b.merge is None and "b" not in final.merged
    assert final.merged == ("a", "c")
    assert final.ended == "FAILED"
    # c was merged again onto the branch as it stood after the undo, not onto b's merge
    c_merge = final.subtask("c").merge
    assert c_merge is not None and c_merge.merge_commit == "merge-4-c"
    report = build_report(final, "FAILED")
    (failed,) = report["failed"]
    assert failed["id"] == "b" and "ImportError" in failed["output_tail"]


def test_a_failed_check_moves_the_integration_head_back() -> None:
    world = CheckedWorld(broken_by=("a",))
    state = drive_until(start(checked_plan("a")), world, lambda s: s.subtask("a").merge)
    assert state.integration_head == "merge-1-a"
    state = feed(state, [check_answer(state, decide(state).commands[0], world.broken_by)])  # type: ignore[arg-type]
    assert state.integration_head == "merge-1-a"  # a failed check alone moves nothing
    assert decide(state).commands == (cmd.UndoMerges(subtask_id="a"),)
    state = feed(state, [undo_answer(state)])
    assert state.integration_head == "p"  # the merge's parent, as the edge restored it
    assert state.unverified == () and state.subtask("a").state == "failed"


def test_dependents_of_a_merge_that_broke_the_branch_are_skipped() -> None:
    p = plan(subtask("a"), subtask("b", "a")).model_copy(update={"integration_verify": "make"})
    final = run(start(p), CheckedWorld(broken_by=("a",)))
    assert final.subtask("b").state == "skipped"
    assert said(final.subtask("b").reason) == "dependency: it depends on 'a', which failed"


def test_a_dependent_starts_only_once_its_dependencys_run_has_passed() -> None:
    world = CheckedWorld()
    p = plan(subtask("a"), subtask("b", "a")).model_copy(update={"integration_verify": "make"})
    state = drive_until(start(p), world, lambda s: s.subtask("a").state == "integrating")
    assert not decide(state).events  # b waits for the check, not for the merge
    state = feed(state, world.answer(state, decide(state).commands[0]))
    assert state.subtask("a").state == "merged"
    [scheduled] = decide(state).events
    assert isinstance(scheduled, ev.SubtaskScheduled) and scheduled.start_commit == "merge-1-a"


def test_without_integration_verify_a_merge_is_final_at_once() -> None:
    world = CheckedWorld()
    final = run(start(checked_plan("a", integration_verify=None)), world)
    assert final.merged == ("a",) and world.checked == []


# Stopping --------------------------------------------------------------------------------


def graceful(source: str = "kairo-orch stop") -> ev.StopRequested:
    return ev.StopRequested(mode="graceful", source=source)


def test_a_graceful_stop_lets_the_running_attempt_finish_and_starts_nothing_new() -> None:
    world = CheckedWorld()
    p = plan(subtask("a"), subtask("b"), subtask("c"), max_parallel=1)
    state = drive_until(start(p), world, lambda s: running(s, "a"))
    final = run(feed(state, [graceful()]), world)
    assert final.subtask("a").state == "merged"  # finished, judged and merged
    assert world.launched == ["a"]
    for sid in ("b", "c"):
        assert final.subtask(sid).state == "stopped"
        assert said(final.subtask(sid).reason) == (
            "stopped: the execution was stopped before this subtask started"
        )
    assert final.ended == "STOPPED"


def test_a_graceful_stop_gives_no_further_attempt_to_a_rejected_one() -> None:
    world = CheckedWorld(exit_codes={"a": 2})
    state = drive_until(start(plan(subtask("a"))), world, lambda s: running(s, "a"))
    final = run(feed(state, [graceful()]), world)
    view = final.subtask("a")
    assert len(view.attempts) == 1
    assert view.state == "stopped"
    assert said(view.reason) == (
        "stopped: the execution was stopped after attempt 1, which was not accepted "
        "(agent_failed: the agent exited with status 2)"
    )
    assert final.ended == "STOPPED"


def test_stop_now_kills_the_running_attempt_and_ends_its_subtask_stopped() -> None:
    world = CheckedWorld()
    state = drive_until(start(plan(subtask("a"))), world, lambda s: running(s, "a"))
    state = feed(state, [ev.StopRequested(mode="now", source="kairo-orch stop --now")])
    assert cmd.KillAttempt(subtask_id="a", attempt=1) in decide(state).commands
    final = run(state, world)
    view = final.subtask("a")
    assert view.state == "stopped"
    assert view.reason is not None
    assert said(view.reason).startswith(
        "stopped: kairo-orch stop --now stopped the execution while attempt 1 ran"
    )
    assert view.merge is None
    assert final.ended == "STOPPED"


def checking(state: ExecutionState) -> bool:
    return any(isinstance(c, cmd.RunVerify) for c in decide(state).commands)


def exited(state: ExecutionState) -> bool:
    attempts = state.subtask("a").attempts
    return bool(attempts) and attempts[-1].exited


def test_stop_now_while_a_check_runs_ends_the_subtask_stopped_not_failed() -> None:
    world = CheckedWorld()
    state = drive_until(start(plan(subtask("a", verify="pytest -q"))), world, checking)
    state = feed(state, [ev.StopRequested(mode="now", source="kairo-orch stop --now")])
    # Judged at once: the check's status will be the stop's, not a verdict on the work.
    [judged] = decide(state).events
    assert isinstance(judged, ev.AttemptJudged) and judged.final and not judged.accepted
    assert not judged.feedback
    state = feed(state, [judged])
    # The check, ended by the stop (processes.py), reports after: recorded, nothing more.
    cut = ev.VerifyFinished(subtask_id="a", attempt=1, exit_code=143, output_tail="[kairo] ...")
    final = run(feed(state, [cut]), world)
    view = final.subtask("a")
    assert view.state == "stopped" and len(view.attempts) == 1
    assert said(view.reason) == (
        "stopped: kairo-orch stop --now stopped the execution before attempt 1's check finished"
    )
    assert view.attempts[0].verify_exit_code == 143
    assert final.ended == "STOPPED"


def test_stop_now_before_a_check_starts_starts_no_check() -> None:
    world = CheckedWorld()
    p = plan(subtask("a", verify="pytest -q"))
    state = drive_until(start(p), world, exited)
    state = feed(state, [ev.StopRequested(mode="now", source="kairo-orch stop --now")])
    final = run(state, world)
    assert final.subtask("a").state == "stopped"
    assert final.subtask("a").attempts[0].verify_exit_code is None  # never ran
    assert final.ended == "STOPPED"


def test_stop_now_while_a_merge_is_checked_undoes_it_and_ends_the_subtask_stopped() -> None:
    world = CheckedWorld(broken_by=("a",))  # the check, cut, exits non-zero
    checked = checked_plan("a", "b")
    state = drive_until(start(checked), world, lambda s: s.subtask("a").state == "integrating")
    state = feed(state, [ev.StopRequested(mode="now", source="kairo-orch stop --now")])
    final = run(state, world)
    view = final.subtask("a")
    assert view.state == "stopped" and view.merge is None
    assert said(view.reason) == (
        "stopped: the execution was stopped before the check of a's merge finished; "
        "the merge was undone, and its work stays on b/a"
    )
    assert final.ended == "STOPPED"


def test_a_stop_after_everything_merged_still_completes() -> None:
    world = CheckedWorld()
    state = drive_until(start(plan(subtask("a"))), world, lambda s: s.merged == ("a",))
    assert run(feed(state, [graceful()]), world).ended == "COMPLETED"


def test_now_overrides_graceful_and_not_the_other_way_round() -> None:
    state = start(plan(subtask("a")))
    assert feed(state, [graceful(), ev.StopRequested(mode="now", source="x")]).stop == "now"
    assert feed(state, [ev.StopRequested(mode="now", source="x"), graceful()]).stop == "now"


def test_a_resumed_supervisor_goes_on_without_the_stop_asked_of_the_last_one() -> None:
    state = feed(start(plan(subtask("a"))), [graceful()])
    state = feed(state, [ev.SupervisorStarted(pid=2, host="h")])
    assert state.stop is None
    assert isinstance(decide(state).events[0], ev.SubtaskScheduled)


def test_status_says_a_running_execution_is_stopping() -> None:
    state = feed(start(plan(subtask("a"))), [graceful()])
    document = status_document(state, status="RUNNING", version=1, head_seq=3, head_hash="h")
    assert document["stopping"] == "graceful"
    paused = status_document(state, status="PAUSED", version=1, head_seq=3, head_hash="h")
    assert paused["stopping"] is None


# Review: push and pull request ------------------------------------------------------------


class ReviewWorld(CheckedWorld):
    def __init__(self, codes: dict[str, int] | None = None) -> None:
        super().__init__()
        self.codes = codes or {}
        self.ran: list[str] = []

    def answer(self, state: ExecutionState, command: cmd.Command) -> list[ev.ExecutionEvent]:
        if isinstance(command, cmd.RunReviewStep):
            self.ran.append(command.step)
            code = self.codes.get(command.step, 0)
            return [ev.ReviewStepFinished(step=command.step, exit_code=code, output_tail="out")]
        return super().answer(state, command)


def reviewed_plan(**review: object) -> ResolvedPlan:
    base = plan(subtask("a"))
    return base.model_copy(update={"review": base.review.model_copy(update=review)})


def test_the_result_is_pushed_then_its_pull_request_opened_once_everything_settled() -> None:
    world = ReviewWorld()
    final = run(start(reviewed_plan(push="origin", pr_command="gh pr create")), world)
    assert world.ran == ["push", "pull_request"]
    assert [(step, r and r.exit_code) for step, r in final.review.items()] == [
        ("push", 0),
        ("pull_request", 0),
    ]
    assert final.ended == "COMPLETED"


def test_no_pull_request_after_a_failed_push() -> None:
    world = ReviewWorld(codes={"push": 128})
    final = run(start(reviewed_plan(push="origin", pr_command="gh pr create")), world)
    assert world.ran == ["push"]
    pull_request = final.review["pull_request"]
    assert pull_request is not None and pull_request.output_tail == "not run: the push failed"
    assert final.ended == "COMPLETED"  # the subtasks' outcome, whatever the hand-over did


def test_a_pull_request_command_cut_short_by_a_crash_is_never_run_again() -> None:
    world = ReviewWorld()
    p = reviewed_plan(pr_command="gh pr create")
    state = drive_until(start(p), world, lambda s: "pull_request" in s.review)
    assert decide(state).commands == (cmd.RunReviewStep(step="pull_request"),)
    resumed = feed(state, [ev.SupervisorStarted(pid=9, host="h", resumed=True)])
    final = run(resumed, world)
    assert world.ran == []
    pull_request = final.review["pull_request"]
    assert pull_request is not None and pull_request.exit_code is None
    assert "check whether it opened one" in pull_request.output_tail


def test_nothing_is_handed_over_after_a_stop_or_when_nothing_merged() -> None:
    world = ReviewWorld()
    stopped = feed(start(reviewed_plan(push="origin")), [graceful()])
    assert run(stopped, world).review == {}
    failing = ReviewWorld()
    failing.exit_codes = {"a": 1}
    assert run(start(reviewed_plan(push="origin")), failing).review == {}
    assert world.ran == failing.ran == []


def test_the_report_sums_the_usage_the_agents_reported() -> None:
    state = start(plan(subtask("a"), subtask("b")))
    state = feed(
        state,
        [
            ev.SubtaskScheduled(subtask_id="a", start_commit="b" * 40),
            ev.WorkspaceCreated(subtask_id="a", path="/w/a", branch="b/a", commit="b" * 40),
            ev.AttemptStarted(
                subtask_id="a", attempt=1, idempotency_key="k", run_dir="/r", start_commit="c"
            ),
            ev.AttemptExited(
                subtask_id="a",
                attempt=1,
                exit_code=0,
                tokens=1500,
                input_tokens=1200,
                output_tokens=300,
                cost_usd=0.25,
                session_id="s-1",
            ),
        ],
    )
    report = build_report(state, "RUNNING")
    assert report["usage"]["tokens"] == 1500 and report["usage"]["cost_usd"] == 0.25
    assert report["usage"]["subtasks"]["a"] == {
        "tokens": 1500,
        "input_tokens": 1200,
        "output_tokens": 300,
        "cost_usd": 0.25,
        "attempts": 1,
        "sessions": [{"session_id": "s-1", "resumed": None}],
    }
    assert "- tokens: 1,500 ($0.25): a 1,500" in to_markdown(report)
    assert state.subtask("a").session_id == "s-1"


def test_a_conflict_is_resolved_only_onto_merges_that_passed_their_check() -> None:
    # a merges, b conflicts in the same step: b's resolution waits for a's check, and
    # merges in the branch as that check left it.
    world = CheckedWorld(conflicts=("b",))
    p = checked_plan("a", "b")
    p = p.model_copy(
        update={"subtasks": tuple(s.model_copy(update={"resolve_attempts": 1}) for s in p.subtasks)}
    )
    state = drive_until(start(p), world, lambda s: s.subtask("b").state == "conflicted")
    assert state.unverified == ("a",)
    decision = decide(state)
    assert not any(isinstance(e, ev.ResolutionStarted) for e in decision.events)
    assert decision.commands == (cmd.CheckIntegration(subtask_id="a", subtask_ids=("a",)),)
    state = feed(state, world.answer(state, decision.commands[0]))
    [started] = decide(state).events
    assert isinstance(started, ev.ResolutionStarted)
    assert started.merged_in == state.subtask("a").merge.merge_commit  # type: ignore[union-attr]


def test_a_conflict_with_a_merge_that_is_undone_is_merged_again_without_it() -> None:
    # culprit and victim change the same line: victim conflicts with culprit's unchecked
    # merge; once culprit is undone, victim merges, as one by one it would have.
    world = CheckedWorld(broken_by=("culprit",), conflicts_with={"victim": "culprit"})
    final = run(start(checked_plan("culprit", "victim")), world)
    assert final.subtask("culprit").state == "failed"
    assert final.subtask("victim").state == "merged" and final.subtask("victim").conflicts == ()
    undone = final.subtask("victim")
    assert undone.merge is not None
    one_by_one = CheckedWorld(broken_by=("culprit",), conflicts_with={"victim": "culprit"})
    p = checked_plan("culprit", "victim").model_copy(update={"integration_batch": 1})
    assert run(start(p), one_by_one).merged == final.merged == ("victim",)


def test_a_conflict_with_merges_that_passed_their_check_stands() -> None:
    world = CheckedWorld(conflicts_with={"victim": "first"})
    final = run(start(checked_plan("first", "victim")), world)
    assert final.subtask("victim").state == "conflicted"
    assert final.merged == ("first",) and final.conflicted_unchecked == ()
