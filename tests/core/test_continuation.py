"""What an attempt that ran into its agent program's limits is told, and why it ended:
API errors in the API's words, edits and commands the program refused, replies cut at the
output limit, an allowance spent."""

from __future__ import annotations

from dataclasses import replace

from orchestrator.core import events as ev
from orchestrator.core.continuation import continue_after, needs_verify
from orchestrator.core.plan import AgentSpec, ResolvedSubtask
from orchestrator.core.reasons import sentence_or_none as said
from orchestrator.core.views import AttemptView

SPEC = ResolvedSubtask(
    id="a", title="a", prompt="", agent=AgentSpec(kind="claude-code"), verify="pytest -q"
)
DONE = AttemptView(
    number=1, idempotency_key="k", run_dir="/r", start_commit="c" * 40, exit_code=0,
    head_commit="h", changed=True, tree="t", verify_exit_code=0,
)  # fmt: skip
SENSITIVE = ev.Refusal(
    tool="Edit",
    target="/repo/.git/x/calc.py",
    message="Claude requested permissions to edit /repo/.git/x/calc.py which is a sensitive file.",
)


def test_an_overload_storm_is_worded_as_the_api_s_answer_and_sent_back() -> None:
    storm = replace(DONE, exit_code=1, is_error=True, result="server_error", api_status=529)
    decision = continue_after(SPEC, replace(storm, api_retries=10), None)
    assert decision.kind == "nudge"
    assert said(decision.reason) == "agent_failed: the API answered 529 Overloaded after 10 retries"
    assert "the model's service failed, not your work" in decision.feedback


def test_an_edit_the_program_refused_is_named_not_merely_no_change() -> None:
    refused = replace(DONE, changed=False, refusals=(SENSITIVE,), verify_exit_code=None)
    decision = continue_after(SPEC, refused, None)
    assert said(decision.reason) == (
        "no_changes: the attempt left the worktree as it found it: your Edit of "
        "/repo/.git/x/calc.py was refused: Claude requested permissions to edit "
        "/repo/.git/x/calc.py which is a sensitive file."
    )
    assert "- Your Edit of /repo/.git/x/calc.py was refused" in decision.feedback
    command = ev.Refusal(
        tool="Bash", target="make deploy", message="This command requires approval"
    )
    failing = replace(DONE, verify_exit_code=1, refusals=(command,))
    feedback = continue_after(SPEC, failing, None).feedback
    assert "- Your command `make deploy` was refused: This command requires approval" in feedback


def test_replies_cut_at_the_output_limit_are_sent_back_to_smaller_edits() -> None:
    cut = replace(DONE, exit_code=1, is_error=True, result="max_output_tokens")
    decision = continue_after(SPEC, cut, None)
    assert decision.kind == "nudge"
    assert "cut off at the model's output token limit" in (said(decision.reason) or "")
    assert "Make smaller edits" in decision.feedback


def test_an_attempt_stopped_at_its_allowance_is_the_last() -> None:
    spent = replace(DONE, exit_code=143, is_error=True, result="token_budget", tokens=104_000)
    decision = continue_after(SPEC, spent, None)
    assert decision.kind == "escalate"
    assert said(decision.reason) == (
        "token_budget: attempt 1 was stopped when its stream showed 104000 tokens, all that "
        "the budget had left"
    )


def test_an_attempt_that_only_finished_earlier_work_is_judged_with_it() -> None:
    # Attempt 1 made the change and hit its turn limit; attempt 2 ran the tests, changed
    # nothing more, and said it was done: the branch holds the work, so the check decides.
    checked = replace(DONE, number=2, changed=False, after_changes=True, verify_exit_code=None)
    assert needs_verify(SPEC, checked)
    assert continue_after(SPEC, replace(checked, verify_exit_code=0), None).kind == "accept"
    alone = replace(checked, after_changes=False)
    assert said(continue_after(SPEC, alone, None).reason) == (
        "no_changes: the attempt left the worktree as it found it"
    )
