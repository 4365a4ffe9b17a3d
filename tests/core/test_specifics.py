"""What a sent-back attempt is told beyond its gate's verdict: the files the task names
that are still unchanged, what an attempt that failed as the last one did changed, and
failures that differ only in their timings counted as the same."""

from __future__ import annotations

from dataclasses import replace

from orchestrator.core import events as ev
from orchestrator.core.continuation import continue_after
from orchestrator.core.plan import AgentSpec, ResolvedSubtask
from orchestrator.core.reasons import sentence_or_none as said
from orchestrator.core.specifics import failure_signature, named_files, paths_in
from orchestrator.core.views import AttemptView

SPEC = ResolvedSubtask(
    id="a",
    title="a",
    prompt="Rename price to total in shop/a.py and shop/a_cart.py, e.g. as in v1.2.",
    files=("shop/a.py", "tests/test_a.py"),
    agent=AgentSpec(kind="claude-code"),
    verify="pytest -q",
)
FAILED = AttemptView(
    number=1, idempotency_key="k", run_dir="/r", start_commit="c" * 40, exit_code=0,
    head_commit="h1", changed=True, tree="t1", verify_exit_code=1,
    paths=("shop/a.py",), branch_paths=("shop/a.py",),
    verify_output_tail=(
        "F\n___ test_cart ___\ntests/test_a.py:7: in test_cart\n"
        "E   ImportError: cannot import name 'price' from 'shop.a'\n"
        "1 failed, 1 passed in 0.31s"
    ),
)  # fmt: skip
UNTOUCHED = "Of the files the task names, these are not changed: "


def test_the_paths_a_prompt_names_are_files_not_abbreviations_or_versions() -> None:
    assert paths_in(SPEC.prompt) == ["shop/a.py", "shop/a_cart.py"]
    assert paths_in("Fix calc.py, see https://example.com/x/page.html and a.b.") == ["calc.py"]
    assert named_files(SPEC) == ["shop/a.py", "tests/test_a.py", "shop/a_cart.py"]


def test_a_failed_check_names_the_files_the_task_names_that_are_still_unchanged() -> None:
    feedback = continue_after(SPEC, FAILED, None).feedback
    assert f"{UNTOUCHED}tests/test_a.py, shop/a_cart.py." in feedback
    assert "cannot import name 'price'" in feedback  # the check's own words, still


def test_a_bare_file_name_counts_as_changed_where_the_branch_changed_it_in_a_folder() -> None:
    spec = SPEC.model_copy(update={"prompt": "Fix a_cart.py", "files": ()})
    moved = replace(FAILED, branch_paths=("shop/a_cart.py",))
    assert UNTOUCHED not in continue_after(spec, moved, None).feedback
    assert f"{UNTOUCHED}a_cart.py." in continue_after(spec, FAILED, None).feedback


def test_nothing_is_said_of_files_when_the_log_does_not_say_what_changed() -> None:
    older = replace(FAILED, paths=None, branch_paths=None)  # committed by an older version
    assert UNTOUCHED not in continue_after(SPEC, older, None).feedback


def test_an_attempt_that_changed_nothing_is_told_every_file_still_to_do() -> None:
    idle = replace(FAILED, changed=False, verify_exit_code=None, paths=(), branch_paths=())
    decision = continue_after(SPEC, idle, None)
    assert said(decision.reason) == "no_changes: the attempt left the worktree as it found it"
    assert f"{UNTOUCHED}shop/a.py, tests/test_a.py, shop/a_cart.py." in decision.feedback


def test_failures_that_differ_only_in_timings_and_addresses_are_the_same() -> None:
    one = "E   assert <Cart object at 0x7f3a2c1d> == 2\n1 failed in 0.31s (0:00:01.20)"
    two = "E   assert <Cart object at 0x7f99aa00> == 2\n1 failed in 12.04s (0:00:13.02)"
    assert failure_signature(one) == failure_signature(two)
    assert failure_signature(one) != failure_signature(one.replace("== 2", "== 3"))


def test_the_same_tree_failing_the_same_way_but_slower_is_no_progress() -> None:
    again = replace(
        FAILED,
        number=2,
        changed=False,
        after_changes=True,
        verify_output_tail=FAILED.verify_output_tail.replace("0.31s", "1.07s"),
    )
    decision = continue_after(SPEC, again, FAILED)
    assert decision.kind == "escalate"
    assert (said(decision.reason) or "").startswith(
        "no_progress: attempts 1 and 2 left the same tree and failed the same way"
    )


def test_a_new_tree_that_fails_as_before_is_told_what_changed_and_what_did_not() -> None:
    second = replace(
        FAILED,
        number=2,
        tree="t2",
        paths=("shop/a_cart.py",),
        branch_paths=("shop/a.py", "shop/a_cart.py"),
        verify_output_tail=FAILED.verify_output_tail.replace("0.31s", "0.29s"),
    )
    decision = continue_after(SPEC, second, FAILED)
    assert decision.kind == "nudge"
    assert (
        "Attempt 2 changed shop/a_cart.py, yet the check fails exactly as it did after "
        "attempt 1: what changed is not what the check fails on. The files the failure "
        "names that attempt 2 did not change: tests/test_a.py." in decision.feedback
    )
    assert f"{UNTOUCHED}tests/test_a.py." in decision.feedback
    # a failure that changed says nothing of the kind
    other = replace(second, verify_output_tail="E   assert 3 == 2\n1 failed in 0.2s")
    assert "fails exactly as it did" not in continue_after(SPEC, other, FAILED).feedback


def test_an_attempt_committed_before_version_3_has_no_paths_recorded() -> None:
    payload = {
        "subtask_id": "a",
        "attempt": 1,
        "head_commit": "h",
        "changed": True,
        "files_changed": 1,
        "tree": "t",
    }
    committed = ev.from_record("attempt_committed", payload, 2)
    assert isinstance(committed, ev.AttemptCommitted)
    assert (committed.paths, committed.branch_paths) == (None, None)
