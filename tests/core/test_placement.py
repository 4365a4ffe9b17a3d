"""`placement: workers` in the pure core: the commands a worker carries out and their
records, assignments folded into the state, the choice of a worker, and `host` in status."""

from __future__ import annotations

import pytest

from orchestrator.core import checkpoints
from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.placement import (
    Losses,
    Offer,
    after_losing,
    busy_slots,
    choose_worker,
    command_from_record,
    command_record,
    placed,
)
from orchestrator.core.state import ExecutionState
from orchestrator.core.status import status_document
from tests.core.test_decide import BASE, feed, plan, start, subtask

PLACED_COMMANDS = [
    cmd.PrepareWorkspace(subtask_id="a", start_commit=BASE),
    cmd.OpenPane(subtask_id="a", attempt=2),
    cmd.AwaitAttempt(subtask_id="a", attempt=2),
    cmd.KillAttempt(subtask_id="a", attempt=2),
    cmd.CommitAttempt(subtask_id="a", attempt=2),
    cmd.RunVerify(subtask_id="a", attempt=2),
    cmd.ReleaseWorkspace(subtask_id="a"),
]


@pytest.mark.parametrize("command", PLACED_COMMANDS, ids=lambda c: type(c).__name__)
def test_a_placed_command_round_trips_through_its_record(command: cmd.Command) -> None:
    assert placed(command)
    record = command_record(command)
    assert record["type"] == type(command).__name__
    assert command_from_record(record) == command
    assert command_from_record(record).key == command.key


@pytest.mark.parametrize(
    "command",
    [
        cmd.MergeSubtask(subtask_id="a", then=("b",)),
        cmd.CheckIntegration(subtask_id="a", subtask_ids=("a",)),
        cmd.UndoMerges(),
        cmd.CreateIntegrationBranch(),
        cmd.RunReviewStep(step="push"),
    ],
    ids=lambda c: type(c).__name__,
)
def test_what_writes_the_integration_branch_stays_with_the_owner(command: cmd.Command) -> None:
    assert not placed(command)
    with pytest.raises(ValueError, match="is not carried out by a worker"):
        command_record(command)


def test_a_record_of_a_command_no_worker_carries_out_is_refused() -> None:
    with pytest.raises(ValueError, match="MergeSubtask"):
        command_from_record({"type": "MergeSubtask", "subtask_id": "a", "attempt": 0})


def _placed_plan() -> ExecutionState:
    return start(
        plan(subtask("a"), subtask("b"), subtask("c")).model_copy(update={"placement": "workers"})
    )


def _assigned(sid: str, worker: str, epoch: int) -> ev.SubtaskAssigned:
    return ev.SubtaskAssigned(subtask_id=sid, worker_id=worker, host=f"host-{worker}", epoch=epoch)


def test_assignments_fold_into_the_state_and_the_last_one_counts() -> None:
    state = _placed_plan()
    assert state.epoch == 0 and state.assignments == {}
    state = feed(state, [_assigned("a", "w1", 1), _assigned("b", "w2", 2)])
    assert state.epoch == 2
    state = feed(state, [_assigned("a", "w2", 3)])  # a lost worker's subtask, given again
    assert {sid: a.worker_id for sid, a in state.assignments.items()} == {"a": "w2", "b": "w2"}
    assert state.epoch == 3
    restored = checkpoints.restore(checkpoints.snapshot(state, state.seq, "h"))
    assert restored is not None and restored[0].assignments == state.assignments


def test_an_assignment_of_a_subtask_the_plan_has_not_is_refused() -> None:
    with pytest.raises(KeyError):
        feed(_placed_plan(), [_assigned("nope", "w1", 1)])


def test_an_assignment_round_trips_through_its_store_record() -> None:
    event = _assigned("a", "w1", 4)
    assert ev.from_record(*ev.to_record(event)) == event


def test_a_worker_holds_a_slot_while_its_subtask_is_under_way() -> None:
    state = feed(
        _placed_plan(),
        [ev.SubtaskScheduled(subtask_id="a", start_commit=BASE), _assigned("a", "w1", 1)],
    )
    assert busy_slots(state) == {"w1": 1}
    state = feed(state, [_assigned("b", "w1", 2)])  # assigned, not yet scheduled: no slot
    assert busy_slots(state) == {"w1": 1}


def test_the_worker_with_most_free_slots_is_chosen_and_none_when_all_are_full() -> None:
    offers = [Offer("w1", "a", 2), Offer("w2", "b", 3)]
    assert choose_worker(offers, {}) == offers[1]
    assert choose_worker(offers, {"w2": 2}) == offers[0]
    assert choose_worker(offers, {"w1": 1, "w2": 2}) == offers[0]  # a tie: the first
    assert choose_worker(offers, {"w1": 2, "w2": 3}) is None
    assert choose_worker([], {}) is None


def test_status_names_each_subtasks_host_only_for_placed_plans() -> None:
    def hosts(state: ExecutionState) -> list[object]:
        document = status_document(state, status="RUNNING", version=1, head_seq=1, head_hash="h")
        return [s.get("host", "absent") for s in document["subtasks"]]

    assert hosts(start(plan(subtask("a")))) == ["absent"]  # one machine: as it always was
    state = feed(_placed_plan(), [_assigned("b", "w1", 1)])
    assert hosts(state) == [None, "host-w1", None]


def _under_way(state: ExecutionState, sid: str, worker: str, epoch: int) -> ExecutionState:
    return feed(
        state,
        [
            ev.SubtaskScheduled(subtask_id=sid, start_commit=BASE),
            _assigned(sid, worker, epoch),
            ev.WorkspaceCreated(subtask_id=sid, path=f"/w/{sid}", branch=sid, commit=BASE),
            ev.AttemptStarted(
                subtask_id=sid, attempt=1, idempotency_key=sid, run_dir=f"/r/{sid}",
                start_commit=BASE,
            ),
        ],
    )  # fmt: skip


def test_a_lost_workers_running_attempts_are_interrupted_and_idempotent_ones_given_again() -> None:
    p = plan(subtask("a"), subtask("b"), subtask("c"), max_parallel=8)
    c = p.subtasks[2].model_copy(
        update={"agent": p.subtasks[2].agent.model_copy(update={"idempotent": True})}
    )
    p = p.model_copy(update={"placement": "workers", "subtasks": (*p.subtasks[:2], c)})
    state = start(p)
    state = _under_way(state, "a", "w1", 1)  # not idempotent: stopped, as a resume would
    state = _under_way(state, "b", "w2", 2)  # on a worker still alive: untouched
    state = _under_way(state, "c", "w1", 3)  # idempotent: run again elsewhere
    losses = after_losing(state, alive={"w2"})
    assert [(e.subtask_id, e.rerun, e.cause, e.recovery_ref) for e in losses.interrupted] == [
        ("a", False, "worker", None),
        ("c", True, "worker", None),
    ]
    assert losses.reassign == ("c",) and losses.waiting == ()
    state = feed(state, losses.interrupted)
    assert state.subtask("a").state == "stopped"
    assert "the worker it ran on was lost" in str(state.subtask("a").reason)
    assert after_losing(state, alive={"w2"}).interrupted == ()  # once


def test_a_lost_workers_exited_uncommitted_attempt_waits_and_a_committed_one_moves() -> None:
    state = _under_way(_placed_plan(), "a", "w1", 1)
    exited = ev.AttemptExited(subtask_id="a", attempt=1, exit_code=0)
    state = feed(state, [exited])
    assert after_losing(state, alive=set()) == Losses(waiting=("a",))
    committed = ev.AttemptCommitted(subtask_id="a", attempt=1, head_commit="c1", changed=True)
    state = feed(state, [committed])
    assert after_losing(state, alive=set()) == Losses(reassign=("a",))
    preparing = feed(
        _placed_plan(),
        [ev.SubtaskScheduled(subtask_id="b", start_commit=BASE), _assigned("b", "w1", 1)],
    )
    assert after_losing(preparing, alive=set()) == Losses(reassign=("b",))
