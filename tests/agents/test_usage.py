"""Usage lines written and read back: which session the next attempt continues."""

from __future__ import annotations

import json
from pathlib import Path

from agents.live_usage import Tally, live_path, read_live
from agents.stream_filter import append_usage
from agents.usage import ResumePoint, resume_point, resumed, usage_records
from tests.agents.test_adapters import CONTEXT


def write(path: Path, *records: object, junk: str = "") -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + junk)
    return str(path)


def test_records_skip_what_is_not_a_json_object(tmp_path: Path) -> None:
    path = write(tmp_path / "u", {"input_tokens": 1}, [1], junk='{"half": ')
    assert usage_records(path) == [{"input_tokens": 1}]
    assert usage_records(tmp_path / "missing") == []


def test_the_newest_attempt_with_a_record_decides(tmp_path: Path) -> None:
    first = write(tmp_path / "1", {"session_id": "old"})
    second = write(tmp_path / "2", {"session_id": "s2", "session_totals": {"input_tokens": 5}})
    killed = str(tmp_path / "3")  # its filter was SIGKILLed: no record
    assert resume_point([first, second, killed]) == ResumePoint("s2", {"input_tokens": 5})


def test_a_record_without_a_session_means_start_cold(tmp_path: Path) -> None:
    first = write(tmp_path / "1", {"session_id": "old"})
    failed_resume = write(tmp_path / "2", {"session_id": None, "result": "truncated"})
    assert resume_point([first, failed_resume]) is None
    assert resume_point([]) is None


def test_resumed_sets_both_fields_or_nothing() -> None:
    assert resumed(CONTEXT, None) is CONTEXT
    context = resumed(CONTEXT, ResumePoint("s", {"input_tokens": 3}))
    assert (context.resume_session, context.resume_totals) == ("s", {"input_tokens": 3})
    assert context.environment() == CONTEXT.environment()


def test_the_filter_writes_usage_never_through_a_link_planted_at_its_files(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "notes.txt"
    mine.write_text("the user's\n")
    usage = tmp_path / "usage.jsonl"
    usage.symlink_to(mine)
    (tmp_path / "usage.jsonl.live.tmp").symlink_to(mine)  # where the live count is staged

    append_usage(str(usage), {"input_tokens": 5})
    Tally(path=live_path(str(usage))).count(7)

    assert mine.read_text() == "the user's\n"
    assert read_live(str(usage)) == {"tokens": 7, "api_retries": 0, "api_status": None}
    usage.unlink()
    usage.hardlink_to(mine)  # a name that shares the user's file's data
    append_usage(str(usage), {"input_tokens": 5})
    assert mine.read_text() == "the user's\n"
