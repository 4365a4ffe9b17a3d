"""The guard's pure half: what a comparison reports, how each change is put back, whom
it is blamed on, and what a breach does to an execution (core/guard.py, guard_scope.py)."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev
from orchestrator.core.decide import decide
from orchestrator.core.guard import (
    FileFacts,
    GuardChange,
    GuardRecord,
    Ownership,
    PathChange,
    StashEntry,
    UserState,
    breach_documents,
    changes,
    is_guarded,
    is_kairo_worktree,
    news,
    reason_detail,
    reported_in,
    restore_path,
)
from orchestrator.core.guard_scope import (
    MovedBranch,
    link_problem,
    moved_branches,
    suspects,
    watched_worktrees,
)
from orchestrator.core.reasons import ReasonCode
from orchestrator.core.report import build_report, to_markdown
from orchestrator.core.state import ExecutionState
from orchestrator.core.status import status_document
from tests.core.test_decide import World, feed, plan, run, start, subtask

A, B, C = "a" * 40, "b" * 40, "c" * 40


def state(**changed: object) -> UserState:
    base: dict[str, object] = {
        "refs": {"refs/heads/main": A, "refs/heads/feature": B},
        "heads": {"/r": "ref: refs/heads/main"},
        "stash": (
            StashEntry(oid=B, message="On main: one"),
            StashEntry(oid=C, message="On main: two"),
        ),
        "files": {"/r/.git/config": FileFacts(digest="d1")},
        "checkout": "tree1",
        "index": "i1",
    }
    return UserState.model_validate({**base, **changed})


RECORD = GuardRecord(
    state=state(),
    snapshot_commit=C,
    kept={"refs/kairo/guard/abc123/snapshot": C},
    checkout_root="/r",
    index_file="/r/.git/index",
    index_copy="ic",
    copies="/runs/E/guard/copies",
)


def found(**changed: object) -> list[GuardChange]:
    return changes(RECORD, state(**changed))


def test_nothing_changed_is_nothing_reported() -> None:
    assert found() == []


def test_a_deleted_branch_is_put_back_where_it_was() -> None:
    (change,) = found(refs={"refs/heads/main": A})
    assert change.sentence() == f"refs/heads/feature was deleted (it was at {B[:12]})"
    assert change.restore == f"git update-ref --no-deref refs/heads/feature {B}"


def test_a_moved_branch_and_a_new_one() -> None:
    moved, made = found(refs={"refs/heads/main": C, "refs/heads/feature": B, "refs/heads/x": A})
    assert moved.sentence() == f"refs/heads/main moved from {A[:12]} to {C[:12]}"
    assert moved.restore == f"git update-ref --no-deref refs/heads/main {A}"
    assert made.sentence() == f"refs/heads/x was created at {A[:12]}"
    assert made.restore == "git update-ref --no-deref -d refs/heads/x"


def test_a_symbolic_ref_is_pointed_back() -> None:
    record = RECORD.model_copy(
        update={"state": state(refs={"refs/remotes/o/HEAD": "ref: refs/remotes/o/main"})}
    )
    (change,) = changes(record, state(refs={"refs/remotes/o/HEAD": A}))
    assert change.restore == "git symbolic-ref refs/remotes/o/HEAD refs/remotes/o/main"


def test_a_ref_another_execution_makes_during_the_run_is_none_of_the_users() -> None:
    refs = {**RECORD.state.refs, "refs/heads/kairo-subtasks/p/zzz999/a": A}
    refs["refs/kairo/stopped/zzz999/a/1"] = B
    assert found(refs=refs) == []


def test_the_checkouts_head_moved_off_its_branch() -> None:
    (change,) = found(heads={"/r": A})
    assert change.sentence() == f"HEAD of /r moved from refs/heads/main to {A[:12]}"
    assert change.restore == "git -C /r symbolic-ref HEAD refs/heads/main"


def test_stash_entries_dropped_are_stored_back_oldest_first() -> None:
    changed = found(stash=())
    assert [c.restore for c in changed] == [
        f"git stash store -m 'On main: one' {B}",
        f"git stash store -m 'On main: two' {C}",
    ]
    assert changed[0].sentence() == f"stash entry {B[:12]} 'On main: one' was dropped"


def test_a_stash_entry_added_is_dropped_by_its_place() -> None:
    entries = (*RECORD.state.stash, StashEntry(oid=A, message="On x: planted"))
    (change,) = found(stash=entries)
    assert change.restore == "git stash drop 'stash@{0}'"  # the newest


def test_files_of_the_git_directory_are_put_back_from_their_copies() -> None:
    hook = FileFacts(digest="d2", mode=0o755)
    changed, planted = found(
        files={"/r/.git/config": FileFacts(digest="evil"), "/r/.git/hooks/pre-commit": hook}
    )
    assert changed.sentence() == "/r/.git/config was changed"
    assert changed.restore == "install -m 0644 /runs/E/guard/copies/d1 /r/.git/config"
    assert planted.sentence() == "/r/.git/hooks/pre-commit was created"
    assert planted.restore == "rm -f /r/.git/hooks/pre-commit"
    record = RECORD.model_copy(
        update={"state": state(files={"/r/.git/hooks/x": FileFacts(digest="t", link=True)})}
    )
    (gone,) = changes(record, state(files={}))
    assert gone.restore == 'ln -sfn "$(cat /runs/E/guard/copies/t)" /r/.git/hooks/x'


def test_checkout_paths_are_restored_from_the_snapshot_or_removed() -> None:
    paths = [
        PathChange("README.md", "100644 x", "100644 y"),
        PathChange("new.py", None, "100644 z"),
    ]
    readme, new = changes(RECORD, state(checkout="tree2"), paths)
    assert readme.restore == f"git -C /r restore --source={C} -- README.md"
    assert new.sentence() == "/r/new.py was created" and new.restore == "rm -f /r/new.py"
    # A name git would read as a pattern, or with a space, is taken as it is.
    assert restore_path("/r", "a b*.txt", "x", C) == shlex.join(
        ["git", "-C", "/r", "restore", f"--source={C}", "--", ":(literal)a b*.txt"]
    )


def test_the_index_is_put_back_from_its_copy() -> None:
    (change,) = found(index="i2")
    assert change.restore == "install -m 0644 /runs/E/guard/copies/ic /r/.git/index"


def test_whose_refs_are_guarded() -> None:
    owner = Ownership("abc123", "kairo/p/abc123", frozenset({"run999"}))
    assert is_guarded("refs/heads/main", owner) and is_guarded("refs/tags/v1", owner)
    assert is_guarded("refs/notes/commits", owner)
    # Another execution's, ended: what it kept is the user's now.
    assert is_guarded("refs/heads/kairo-subtasks/p/old111/a", owner)
    assert is_guarded("refs/kairo/stopped/old111/a/1", owner)
    # This execution's, one running beside it, guard refs, and the stash (by entries).
    for ref in (
        "refs/heads/kairo-subtasks/p/abc123/a",
        "refs/heads/kairo/p/abc123",
        "refs/kairo/recovery/abc123/a/1",
        "refs/heads/kairo-subtasks/q/run999/x",
        "refs/kairo/guard/old111/snapshot",
        "refs/stash",
    ):
        assert not is_guarded(ref, owner), ref


def test_worktrees_kairo_made_are_told_from_the_users() -> None:
    assert is_kairo_worktree("/w/.spares/r-1/x", "")
    assert is_kairo_worktree("/w/abc123/.integration", A)
    assert is_kairo_worktree("/w/abc123/a", "ref: refs/heads/kairo-subtasks/p/abc123/a")
    assert not is_kairo_worktree("/home/me/hotfix", "ref: refs/heads/hotfix")


def test_a_change_is_reported_once_and_again_only_once_it_changes_again() -> None:
    deleted = found(refs={"refs/heads/main": A})
    new, reported = news(deleted, {})
    assert new == deleted
    assert news(deleted, reported)[0] == []  # still deleted: said already
    moved = found(refs={"refs/heads/main": A, "refs/heads/feature": C})
    assert news(moved, reported)[0] == moved  # now somewhere else: said again
    # Put back, then deleted again: a new change.
    _, reported = news([], reported)
    assert news(deleted, reported)[0] == deleted


def test_a_resumed_guard_knows_what_its_log_reported() -> None:
    deleted = found(refs={"refs/heads/main": A})
    breach = ev.GuardBreached(changes=tuple(deleted))
    assert news(deleted, reported_in([breach]))[0] == []


def test_a_suspects_reason_names_the_change_its_restore_and_that_it_may_be_you() -> None:
    many = found(refs={}, heads={"/r": A}, stash=())
    detail = reason_detail(ev.GuardBreached(changes=tuple(many)))
    assert detail.startswith("while its agent or check ran, refs/heads/feature was deleted")
    assert f"(`git update-ref --no-deref refs/heads/feature {B}` restores it)" in detail
    assert f"and {len(many) - 3} more (`kairo-orch status` lists them)" in detail
    assert "if this was you" in detail


def test_a_worktree_link_as_git_made_it_or_not() -> None:
    ok = ("/w/a", "/r/.git/worktrees/a", "/w/a/.git", "/r/.git", "/r/.git")
    assert link_problem(*ok) is None
    assert "no longer a file" in (link_problem("/w/a", None, None, None, "/r/.git") or "")
    fake = link_problem("/w/a", "/tmp/fake/.git", None, None, "/r/.git")
    assert fake == "/w/a/.git names /tmp/fake/.git, not a worktree of the repository"
    assert "gitdir" in (link_problem("/w/a", ok[1], "/elsewhere/.git", ok[3], ok[4]) or "")
    assert "commondir" in (link_problem("/w/a", ok[1], ok[2], "/tmp/x", ok[4]) or "")


class BreachingWorld(World):
    """The edge's guard finds a change as `culprit`'s agent exits."""

    def __init__(self, culprit: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.culprit = culprit

    def answer(self, state: ExecutionState, command: cmd.Command) -> list[ev.ExecutionEvent]:
        events = super().answer(state, command)
        if isinstance(command, cmd.AwaitAttempt) and command.subtask_id == self.culprit:
            deleted = tuple(found(refs={"refs/heads/main": A}))
            blamed = suspects(feed(state, events), {self.culprit})
            events.append(ev.GuardBreached(changes=deleted, subtask_ids=blamed))
        return events


def test_a_breach_fails_its_culprit_and_the_execution_runs_no_review_step() -> None:
    p = plan(subtask("a"), subtask("b"), max_parallel=1)
    p = p.model_copy(update={"review": p.review.model_copy(update={"push": "origin"})})
    final = run(start(p), BreachingWorld("a"))
    a = final.subtask("a")
    assert a.state == "failed" and a.reason is not None
    assert a.reason.code is ReasonCode.GUARD_BREACHED
    assert final.subtask("b").state == "merged"
    assert final.ended == "FAILED"
    (push,) = final.review.values()
    assert push is not None and push.exit_code is None and "guard" in push.output_tail


def test_a_breach_with_nothing_to_blame_still_fails_the_execution() -> None:
    state = start(plan(subtask("a")))
    state = feed(state, [ev.GuardBreached(changes=tuple(found(refs={"refs/heads/main": A})))])
    final = run(state, World())
    assert final.subtask("a").state == "merged" and final.ended == "FAILED"


def test_status_and_report_list_each_change_with_its_command() -> None:
    state = start(plan(subtask("a")))
    deleted = tuple(found(refs={"refs/heads/main": A}))
    state = feed(state, [ev.GuardBreached(changes=deleted, subtask_ids=(), moment="end")])
    (item,) = breach_documents(state.breaches)
    assert item["restore"] == deleted[0].restore and item["found"] == "end"
    document = status_document(state, status="RUNNING", version=1, head_seq=1, head_hash="h")
    assert document["breaches"] == [item]
    markdown = to_markdown(build_report(state, "FAILED"))
    assert "## Changes to what you own, found by the guard" in markdown
    assert f"`{deleted[0].restore}`" in markdown
    quiet = start(plan(subtask("a")))
    assert "breaches" not in status_document(
        quiet, status="RUNNING", version=1, head_seq=1, head_hash="h"
    )


def test_suspects_are_those_whose_agent_or_check_may_run() -> None:
    world = World()
    state = start(plan(subtask("a"), subtask("b", verify="true"), subtask("c")))
    state = run_until(state, world, lambda s: all(v.current_attempt for v in s.subtasks.values()))
    assert suspects(state) == ("a", "b", "c")  # every agent runs
    # c's agent exited: only a trigger makes it a suspect.
    exited = world.answer(state, cmd.AwaitAttempt(subtask_id="c", attempt=1))
    state = feed(state, exited)
    assert suspects(state) == ("a", "b") and suspects(state, {"c"}) == ("a", "b", "c")


def test_own_branches_are_held_to_the_log_but_while_an_attempt_may_commit_on_them() -> None:
    world = World()
    state = start(plan(subtask("a"), subtask("b")))
    state = run_until(state, world, lambda s: all(v.current_attempt for v in s.subtasks.values()))
    for sid in ("a", "b"):
        state = feed(state, world.answer(state, cmd.AwaitAttempt(subtask_id=sid, attempt=1)))
    state = feed(state, world.answer(state, cmd.CommitAttempt(subtask_id="a", attempt=1)))
    integration = "refs/heads/kairo/p/abc"
    where = {integration: state.integration_head, "refs/heads/b/a": "head-a"}
    assert moved_branches(state, where) == []
    # b's agent has exited but its commit step has not run: its branch is its own yet.
    assert moved_branches(state, {**where, "refs/heads/b/b": C}) == []
    assert moved_branches(state, {integration: state.integration_head}) == [
        MovedBranch("a", "refs/heads/b/a", "head-a", None)
    ]
    assert [w[0] for w in watched_worktrees(state)] == ["a"]


def run_until(
    state: ExecutionState, world: World, done: Callable[[ExecutionState], bool]
) -> ExecutionState:
    """Carry out the commands decided, the agents' ends aside, until `done(state)`."""
    for _ in range(100):
        if done(state):
            return state
        decision = decide(state)
        if decision.events:
            state = feed(state, decision.events)
            continue
        for command in decision.commands:
            if isinstance(command, cmd.AwaitAttempt):
                continue  # the agents run on
            state = feed(state, world.answer(state, command))
    raise AssertionError("never got there")
