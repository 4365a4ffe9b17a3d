"""decide and fold, driven through whole executions with no git, tmux or store."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.agenda import Agenda
from orchestrator.core.decide import decide
from orchestrator.core.plan import AgentSpec, ResolvedPlan, ResolvedSubtask
from orchestrator.core.reasons import sentence_or_none as said
from orchestrator.core.state import ExecutionState, apply, initial_state

BASE = "b" * 40


def plan(
    *subtasks: ResolvedSubtask, max_parallel: int = 4, merge_order: str = "plan"
) -> ResolvedPlan:
    return ResolvedPlan.model_validate(
        {
            "name": "p",
            "max_parallel": max_parallel,
            "merge_order": merge_order,
            "subtasks": subtasks,
        }
    )


def subtask(
    sid: str, *deps: str, allow_empty: bool = False, verify: str | None = None
) -> ResolvedSubtask:
    return ResolvedSubtask(
        id=sid,
        title=sid,
        prompt="",
        depends_on=deps,
        agent=AgentSpec(kind="shell", run="true"),
        allow_empty=allow_empty,
        verify=verify,
    )


def start(p: ResolvedPlan) -> ExecutionState:
    created = ev.ExecutionCreated(
        plan=p,
        plan_path="/r/plan.yaml",
        repo_root="/r",
        git_common_dir="/r/.git",
        base_commit=BASE,
        integration_branch="kairo/p/abc",
        tmux_socket=None,
        tmux_session="kairo-p-abc",
        worktree_root="/w",
        run_root="/runs",
    )
    return feed(
        initial_state("E1", created),
        [ev.IntegrationBranchCreated(branch="kairo/p/abc", commit=BASE)],
    )


def feed(state: ExecutionState, events: Sequence[ev.ExecutionEvent]) -> ExecutionState:
    """The events folded in, each a move the lifecycle allows (as the journal insists)."""
    for event in events:
        state = apply(state, event, state.seq + 1)
    assert state.anomalies == (), [a.sentence() for a in state.anomalies]
    return state


class World:
    """Answers each command the way a healthy edge would, with scripted outcomes."""

    def __init__(
        self,
        exit_codes: dict[str, int] | None = None,
        unchanged: Sequence[str] = (),
        conflicts: Sequence[str] = (),
        verify_fails: Sequence[str] = (),
        stuck: Sequence[str] = (),
        results: dict[str, tuple[str, bool]] | None = None,
    ) -> None:
        self.exit_codes = exit_codes or {}
        self.results = results or {}  # subtask -> the agent's (result, is_error)
        self.unchanged = set(unchanged)
        self.conflicts = set(conflicts)
        self.verify_fails = set(verify_fails)
        self.stuck = set(stuck)
        self.merges = 0
        self.launched: list[str] = []
        self.start_commits: dict[str, str] = {}

    def answer(self, state: ExecutionState, command: cmd.Command) -> list[ev.ExecutionEvent]:
        sid = command.subtask_id
        match command:
            case cmd.PrepareWorkspace(start_commit=commit):
                self.start_commits[sid] = commit
                return [
                    ev.WorkspaceCreated(
                        subtask_id=sid, path=f"/w/{sid}", branch=f"b/{sid}", commit=commit
                    )
                ]
            case cmd.OpenPane(attempt=number):
                self.launched.append(sid)
                return [ev.AttemptPaneOpened(subtask_id=sid, attempt=number, pane_id="%1")]
            case cmd.AwaitAttempt():
                result, is_error = self.results.get(sid, (None, False))
                return [
                    ev.AttemptExited(
                        subtask_id=sid,
                        attempt=command.attempt,
                        exit_code=self.exit_codes.get(sid, 0),
                        output_tail="same failure",
                        result=result,
                        is_error=is_error,
                    )
                ]
            case cmd.CommitAttempt():
                changed = sid not in self.unchanged
                head = f"head-{sid}" if changed else (state.subtask(sid).head_commit or BASE)
                return [
                    ev.AttemptCommitted(
                        subtask_id=sid,
                        attempt=command.attempt,
                        head_commit=head,
                        changed=changed,
                        tree="same-tree" if sid in self.stuck else f"tree-{command.attempt}",
                    )
                ]
            case cmd.RunVerify():
                code = 1 if sid in self.verify_fails else 0
                return [
                    ev.VerifyFinished(
                        subtask_id=sid, attempt=command.attempt, exit_code=code, output_tail="boom"
                    )
                ]
            case cmd.MergeSubtask():
                return self._merge_all(command.subtask_ids)
            case cmd.ReleaseWorkspace():
                return [ev.WorkspaceReleased(subtask_id=sid)]
        raise AssertionError(command)

    def _merge_all(self, subtask_ids: Sequence[str]) -> list[ev.ExecutionEvent]:
        """A merge step: each subtask in turn, up to the first that conflicts."""
        events: list[ev.ExecutionEvent] = []
        for sid in subtask_ids:
            if sid in self.conflicts:
                conflict = ev.Conflict(path="a.py", kind="content", **{"with": ("x",)})
                return [
                    *events,
                    ev.SubtaskConflicted(subtask_id=sid, head_commit="h", conflicts=(conflict,)),
                ]
            self.merges += 1
            events.append(
                ev.SubtaskMerged(
                    subtask_id=sid,
                    merge_commit=f"merge-{self.merges}-{sid}",
                    previous_commit="p",
                    head_commit="h",
                    changed_paths=("a.py",),
                    diffstat="",
                )
            )
        return events


def run(state: ExecutionState, world: World, *, limit: int = 500) -> ExecutionState:
    """Carry out one command at a time, first first, until the execution ends; the
    agenda kept as the journal keeps it."""
    agenda = Agenda.of(state)
    for _ in range(limit):
        decision = decide(state, agenda=agenda)
        if decision.events:
            events = list(decision.events)
        elif decision.commands:
            events = world.answer(state, decision.commands[0])
        else:
            return state
        state = feed(state, events)
        agenda.advance(events, state)
    raise AssertionError("the execution did not end")


def finish_only(state: ExecutionState, world: World, sid: str) -> ExecutionState:
    """Drive one subtask until it succeeded, leaving the others where decide puts them."""
    while state.subtask(sid).state != "succeeded":
        decision = decide(state)
        if decision.events:
            state = feed(state, decision.events)
            continue
        mine = [c for c in decision.commands if c.subtask_id == sid]
        assert mine, decision
        state = feed(state, world.answer(state, mine[0]))
    return state


def test_a_fresh_execution_first_creates_its_integration_branch() -> None:
    created = start(plan(subtask("a"))).created
    assert decide(initial_state("E1", created)).commands == (cmd.CreateIntegrationBranch(),)


def test_max_parallel_bounds_the_subtasks_scheduled_at_once() -> None:
    state = start(plan(*(subtask(f"s{i}") for i in range(5)), max_parallel=2))
    scheduled = decide(state).events
    assert [e.subtask_id for e in scheduled] == ["s0", "s1"]  # type: ignore[union-attr]
    state = feed(state, scheduled)
    assert decide(state).events == ()
    assert {c.subtask_id for c in decide(state).commands} == {"s0", "s1"}


def test_every_subtask_merges_and_the_execution_completes() -> None:
    final = run(start(plan(subtask("a"), subtask("b"), subtask("c"))), World())
    assert final.ended == "COMPLETED"
    assert final.merged == ("a", "b", "c")
    assert all(v.worktree is None for v in final.subtasks.values())


def test_a_dependent_starts_from_the_merge_of_its_last_dependency() -> None:
    world = World()
    final = run(start(plan(subtask("a"), subtask("b"), subtask("c", "b"))), world)
    assert world.start_commits == {"a": BASE, "b": BASE, "c": "merge-2-b"}
    assert final.merged == ("a", "b", "c")


def test_a_dependent_of_a_conflicted_subtask_is_skipped_with_the_reason() -> None:
    world = World(conflicts=["a"])
    final = run(start(plan(subtask("a"), subtask("b", "a"), subtask("c", "b"))), world)
    assert final.ended == "FAILED"
    assert final.subtask("a").state == "conflicted"
    assert final.subtask("a").worktree == "/w/a"  # kept for inspection
    assert said(final.subtask("b").reason) == "dependency: it depends on 'a', which conflicted"
    assert said(final.subtask("c").reason) == "dependency: it depends on 'b', which was skipped"
    assert "b" not in world.launched and "c" not in world.launched


@pytest.mark.parametrize(
    ("world", "reason", "attempts"),
    [
        (
            World(exit_codes={"a": 3}),
            "max_attempts: 3 attempt(s) were not accepted; the last one: agent_failed",
            3,
        ),
        (World(unchanged=["a"]), "no_changes: attempts 1 and 2 changed nothing", 2),
        (
            World(verify_fails=["a"]),
            "max_attempts: 3 attempt(s) were not accepted; the last one: verify_failed",
            3,
        ),
        (
            World(verify_fails=["a"], stuck=["a"]),
            "no_progress: attempts 1 and 2 left the same tree and failed the same way: "
            "`pytest` exited with status 1: boom",
            2,
        ),
        (
            World(exit_codes={"a": 1}, results={"a": ("authentication_failed", True)}),
            "agent_failed: the shell agent could not log in (authentication_failed): same "
            "failure; log it in and start the plan again",
            1,
        ),
        (
            World(exit_codes={"a": 127}, stuck=["a"]),
            "no_progress: attempts 1 and 2 left the same tree and failed the same way: "
            "the agent exited with status 127: same failure",
            2,
        ),
    ],
)
def test_an_attempt_that_is_not_accepted_is_retried_until_a_limit_says_why(
    world: World, reason: str, attempts: int
) -> None:
    final = run(start(plan(subtask("a", verify="pytest"), subtask("b"))), world)
    view = final.subtask("a")
    assert view.state == "failed"
    assert (said(view.reason) or "").startswith(reason)
    assert len(view.attempts) == attempts
    assert final.subtask("b").state == "merged"
    assert final.ended == "FAILED"


def test_the_next_attempt_is_told_what_failed_and_where() -> None:
    final = run(start(plan(subtask("a", verify="pytest -q"))), World(verify_fails=["a"]))
    feedback = final.subtask("a").attempts[0].feedback
    assert "`pytest -q` failed (exit status 1)" in feedback and "boom" in feedback


@pytest.mark.parametrize(
    ("world", "reason", "told"),
    [
        (
            World(exit_codes={"a": 1}, results={"a": ("error_max_turns", True)}),
            "agent_failed: the agent stopped at its turn limit before it finished "
            "(error_max_turns)",
            "Go on from where it stopped.",
        ),
        (
            World(results={"a": ("truncated", True)}),
            "agent_failed: the agent stopped before it finished: its output ended without a "
            "result (truncated)",
            "Go on from where it stopped.",
        ),
        (
            World(results={"a": ("success", True)}),
            "agent_failed: the agent reported an error (success) though it exited 0",
            "Attempt 1 reported an error (success) though it exited 0, so it is not done.",
        ),
    ],
)
def test_what_the_agent_program_says_of_its_run_outweighs_its_exit_status(
    world: World, reason: str, told: str
) -> None:
    final = run(start(plan(subtask("a"))), world)
    first = final.subtask("a").attempts[0]
    assert first.accepted is False
    assert (said(first.reason) or "").startswith(reason)
    assert told in first.feedback and "same failure" in first.feedback


def test_allow_empty_accepts_an_attempt_that_changed_nothing() -> None:
    final = run(start(plan(subtask("a", allow_empty=True))), World(unchanged=["a"]))
    assert final.subtask("a").state == "merged"


def test_plan_order_merges_wait_for_earlier_subtasks() -> None:
    state = start(plan(subtask("a"), subtask("b")))
    world = World()
    # Finish b completely before a has even started its agent.
    state = finish_only(state, world, "b")
    assert state.subtask("b").state == "succeeded"
    assert not any(isinstance(c, cmd.MergeSubtask) for c in decide(state).commands)


def test_completion_order_merges_whatever_finished_first() -> None:
    state = start(plan(subtask("a"), subtask("b"), merge_order="completion"))
    world = World()
    state = finish_only(state, world, "b")
    assert cmd.MergeSubtask(subtask_id="b") in decide(state).commands


def test_decide_is_a_pure_function_of_the_state() -> None:
    state = start(plan(subtask("a"), subtask("b", "a")))
    assert decide(state) == decide(state)


def test_events_round_trip_through_their_store_records() -> None:
    event = ev.SubtaskConflicted(
        subtask_id="a",
        head_commit="h",
        conflicts=(ev.Conflict(path="x.py", kind="add/add", **{"with": ("b", "c")}),),
    )
    event_type, payload = ev.to_record(event)
    assert payload["conflicts"][0]["with"] == ["b", "c"]
    assert ev.from_record(event_type, payload) == event


def test_a_rerun_subtask_takes_back_the_skips_it_caused() -> None:
    state = start(plan(subtask("a"), subtask("b", "a"), subtask("c", "b"), subtask("d")))
    state = feed(
        state,
        [
            ev.SubtaskScheduled(subtask_id="a", start_commit=BASE),
            ev.WorkspaceCreated(subtask_id="a", path="/w/a", branch="b/a", commit=BASE),
            ev.AttemptStarted(
                subtask_id="a", attempt=1, idempotency_key="k", run_dir="/r", start_commit=BASE
            ),
            ev.AttemptInterrupted(subtask_id="a", attempt=1, recovery_ref=None, rerun=False),
        ],
    )
    final = run(state, World())
    assert final.subtask("a").state == "stopped"
    assert said(final.subtask("c").reason) == "dependency: it depends on 'b', which was skipped"
    rerun = run(feed(final, [ev.ExecutionReopened(), ev.SubtaskRerun(subtask_id="a")]), World())
    assert rerun.ended == "COMPLETED"
    assert {v.state for v in rerun.subtasks.values()} == {"merged"}


def test_an_agent_that_cannot_log_in_is_not_started_again_for_the_other_subtasks() -> None:
    world = World(exit_codes={"a": 1}, results={"a": ("authentication_failed", True)})
    other = subtask("d").model_copy(
        update={"agent": AgentSpec(kind="shell", run="true", binary="/other/program")}
    )
    final = run(
        start(plan(subtask("a"), subtask("b"), subtask("c", "b"), other, max_parallel=1)), world
    )

    assert world.launched == ["a", "d"]  # d's program is another: it may be logged in
    assert final.subtask("a").state == "failed"
    for sid in ("b", "c"):
        assert final.subtask(sid).state == "skipped"
        assert said(final.subtask(sid).reason) == (
            "agent_failed: not started: the shell agent could not log in (subtask 'a'); "
            "log it in and start the plan again"
        )
    assert final.subtask("d").state == "merged"
