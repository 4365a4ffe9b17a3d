"""Reasons as data: a code and a detail, said in one sentence by one function; the
sentences of version 1 logs read back as codes by the upcasters, each of them tested."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core import events as ev
from orchestrator.core.reasons import Reason, ReasonCode, as_reason, sentence, with_detail
from orchestrator.core.upcasting import (
    OTHER,
    REASON_EVENTS,
    UPCASTERS,
    VERSION_1_WORDS,
    reason_of_sentence,
    upcast,
)

WORDS = [code.value for code in ReasonCode if code is not ReasonCode.OTHER]


def test_every_word_an_old_log_may_hold_reads_as_a_code_of_today() -> None:
    assert ReasonCode(OTHER) is ReasonCode.OTHER and OTHER not in VERSION_1_WORDS
    assert {ReasonCode(word) for word in VERSION_1_WORDS} <= set(ReasonCode)


def test_every_stable_word_of_cli_md_is_a_code() -> None:
    # docs/cli.md: the words `reason` starts with, and those this implementation adds.
    promised = {
        "timeout", "max_attempts", "token_budget", "no_changes", "no_progress",
        "verify_failed", "agent_failed", "dependency", "conflict", "stopped", "interrupted",
        "integration_verify_failed", "setup_failed", "merge_failed",
        "resolution_dropped_changes", "resolution_unfinished", "guard_breached",
    }  # fmt: skip
    assert set(WORDS) == promised


def test_a_reason_is_said_as_its_word_then_its_detail() -> None:
    verify = Reason(code=ReasonCode.VERIFY_FAILED, detail="`pytest` exited with status 1")
    assert sentence(verify) == "verify_failed: `pytest` exited with status 1"
    assert sentence(Reason(code=ReasonCode.SETUP_FAILED)) == "setup_failed"
    assert sentence(Reason(code=ReasonCode.OTHER, detail="cost: $3 spent")) == "cost: $3 spent"


def test_a_user_constraints_sentence_is_kept_whole_not_parsed() -> None:
    kept = as_reason("verify_failed: looks like a word of ours, but it is the plugin's")
    assert kept.code is ReasonCode.OTHER
    assert sentence(kept) == "verify_failed: looks like a word of ours, but it is the plugin's"
    coded = Reason(code=ReasonCode.TIMEOUT, detail="x")
    assert as_reason(coded) is coded


def test_more_detail_keeps_the_code() -> None:
    more = with_detail(Reason(code=ReasonCode.TIMEOUT, detail="a"), "; b")
    assert (more.code, more.detail) == (ReasonCode.TIMEOUT, "a; b")


@pytest.mark.parametrize(
    ("old", "code", "detail"),
    [
        ("verify_failed: `pytest` exited with status 1", "verify_failed", "`pytest` exited ..."),
        ("no_changes: attempts 1 and 2 changed nothing", "no_changes", "attempts 1 and ..."),
        ("max_attempts: 3 attempt(s) were not accepted; the last one: verify_failed: `x`",
         "max_attempts", "3 attempt(s) were not accepted; the last one: verify_failed: `x`"),
        ("setup_failed", "setup_failed", ""),
        ("setup_failed: ", "other", "setup_failed: "),
        ("cost_cap: $3 spent", "other", "cost_cap: $3 spent"),  # a word this version lacks
        ("other: a constraint's own", "other", "other: a constraint's own"),
        ("timeout:no space", "other", "timeout:no space"),
        ("", "other", ""),
    ],
)  # fmt: skip
def test_an_old_sentence_is_split_once_at_a_known_word(old: str, code: str, detail: str) -> None:
    upcast_ = reason_of_sentence(old)
    assert upcast_["code"] == code
    if detail.endswith("..."):
        assert upcast_["detail"].startswith(detail.removesuffix("..."))
    else:
        assert upcast_["detail"] == detail
    assert sentence(Reason.model_validate(upcast_)) == old


@given(st.one_of(st.text(), st.builds("{}: {}".format, st.sampled_from(WORDS), st.text())))
def test_every_old_sentence_is_said_again_exactly_as_it_was_written(old: str) -> None:
    assert sentence(Reason.model_validate(reason_of_sentence(old))) == old


# One payload of version 1 of each event type whose `reason` was a sentence.
V1_PAYLOADS: dict[str, dict[str, Any]] = {
    "attempt_judged": {
        "subtask_id": "a", "attempt": 1, "accepted": False, "feedback": "f", "final": True,
        "reason": "no_progress: attempts 1 and 2 left the same tree",
    },
    "constraint_violated": {
        "constraint": "attempt_timeout", "action": "EMERGENCY_STOP", "subtask_id": "a",
        "attempt": 1, "reason": "timeout: attempt 1 ran longer than its limit of 3 s",
    },
    "subtask_skipped": {
        "subtask_id": "b", "dependency": "a",
        "reason": "dependency: it depends on 'a', which failed",
    },
    "subtask_failed": {"subtask_id": "a", "reason": "setup_failed: the disk is full"},
    "subtask_stopped": {
        "subtask_id": "c", "reason": "stopped: the execution was stopped before this subtask started",
    },
}  # fmt: skip


def test_each_event_whose_reason_was_a_sentence_has_an_upcaster() -> None:
    assert set(V1_PAYLOADS) == set(REASON_EVENTS)
    assert {event_type for event_type, version in UPCASTERS if version == 1} == set(REASON_EVENTS)


@pytest.mark.parametrize("event_type", sorted(V1_PAYLOADS))
def test_a_version_1_reason_is_read_as_code_and_detail(event_type: str) -> None:
    old = V1_PAYLOADS[event_type]
    event = ev.from_record(event_type, dict(old), schema_version=1)
    reason = event.reason  # type: ignore[union-attr]
    assert isinstance(reason, Reason)
    word, _, detail = old["reason"].partition(": ")
    assert (reason.code.value, reason.detail) == (word, detail)
    assert sentence(reason) == old["reason"]
    # written again today, it is read back the same, with no upcaster in the way
    event_type_, payload = ev.to_record(event)
    assert payload["reason"] == {"code": word, "detail": detail}
    assert ev.from_record(event_type_, payload) == event


@pytest.mark.parametrize("event_type", sorted(V1_PAYLOADS))
def test_an_upcaster_leaves_the_rest_of_the_payload_and_its_input_alone(event_type: str) -> None:
    old = V1_PAYLOADS[event_type]
    before = dict(old)
    new = upcast(event_type, 1, old, current=2)
    assert old == before  # the stored payload is not changed under the hash chain
    assert {k: v for k, v in new.items() if k != "reason"} == {
        k: v for k, v in old.items() if k != "reason"
    }


def test_an_accepted_attempt_without_a_reason_stays_without_one() -> None:
    payload = {"subtask_id": "a", "attempt": 1, "accepted": True, "reason": None}
    judged = ev.from_record("attempt_judged", payload, schema_version=1)
    assert judged.reason is None  # type: ignore[union-attr]
    no_field = {"subtask_id": "a", "attempt": 1, "accepted": True}
    assert ev.from_record("attempt_judged", no_field, schema_version=1).reason is None  # type: ignore[union-attr]


def test_an_unknown_word_in_an_old_log_is_read_not_refused() -> None:
    payload = {"subtask_id": "a", "reason": "quota_exceeded: the plan's own words"}
    failed = ev.from_record("subtask_failed", payload, schema_version=1)
    assert failed.reason == Reason(  # type: ignore[union-attr]
        code=ReasonCode.OTHER, detail="quota_exceeded: the plan's own words"
    )
