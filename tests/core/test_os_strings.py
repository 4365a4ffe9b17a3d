"""Names of any bytes in the log (core/os_strings.py): lossless, canonical, one form each."""

from __future__ import annotations

import base64
import json
import typing
from typing import Any

import pydantic
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.core import events as ev
from orchestrator.core.os_strings import OsStr, as_bytes, from_bytes, from_json, json_safe, to_json
from orchestrator.core.plan import ResolvedSubtask
from orchestrator.core.reasons import Reason, ReasonCode
from orchestrator.store.base import NewEvent
from orchestrator.store.chain import prepare

SETTINGS = settings(max_examples=300, deadline=None)
#: Bytes a name is made of: any but NUL, with the troublesome ones often.
NAME_BYTES = st.binary(max_size=64).map(lambda b: b.replace(b"\0", b"")) | st.lists(
    st.sampled_from([b"\xff", b"\xc3", b"\x80", b"\n", b"\x1b", b"-", b"\\", b'"', b"a", b"\xe9"]),
    max_size=12,
).map(b"".join)


@SETTINGS
@given(NAME_BYTES)
def test_any_name_round_trips_through_its_json_form_byte_for_byte(raw: bytes) -> None:
    name = from_bytes(raw)  # as git/repo.py decodes git's output
    form = to_json(name)
    text = rfc8785.dumps(form)  # canonical JSON: what the chain hashes
    assert as_bytes(from_json(json.loads(text))) == raw
    assert as_bytes(name) == raw


@SETTINGS
@given(NAME_BYTES)
def test_a_name_has_one_form_and_it_is_stable(raw: bytes) -> None:
    form = to_json(from_bytes(raw))
    assert to_json(from_json(form)) == form
    assert isinstance(form, str) == _is_utf8(raw)
    if isinstance(form, dict):
        assert form == {"base64": base64.b64encode(raw).decode("ascii")}


@SETTINGS
@given(st.text())
def test_any_str_at_all_has_a_canonical_form_stable_after_one_reading(text: str) -> None:
    """Even one that stands for no bytes (a lone U+D800 from an agent's JSON escape)."""
    form = to_json(text)
    rfc8785.dumps(form)
    assert to_json(from_json(form)) == form
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        assert form == text  # a Unicode string is itself: every old log reads as it was


@pytest.mark.parametrize(
    "form",
    [
        {"base64": "YQ=="},  # "a": UTF-8, written as a string
        {"base64": "/w"},  # unpadded
        {"base64": "/x=="},  # padding bits set: not the canonical base64 of b"\xff"
        {"base64": "/w==\n"},
        {"base64": "not base64!"},
        {"base64": "/w==", "text": "x"},
        {"bytes": "/w=="},
        {},
    ],
)
def test_a_form_the_writer_would_not_write_is_refused(form: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"not|written as a string|a name is"):
        from_json(form)
    with pytest.raises(pydantic.ValidationError):
        Reason.model_validate({"code": "other", "detail": form})


def test_an_event_with_such_names_is_stored_and_read_back_as_it_was() -> None:
    names = tuple(from_bytes(raw) for raw in (b"bad\xff.txt", b"new\nline", b"-n", b"\xc3("))
    committed = ev.AttemptCommitted(
        subtask_id="a", attempt=1, head_commit="c" * 40, changed=True, paths=names
    )
    event_type, payload = ev.to_record(committed)
    stored = prepare(NewEvent(event_type, payload, ev.SCHEMA_VERSION))
    assert json.loads(stored.payload_json)["paths"] == [
        {"base64": "YmFk/y50eHQ="},
        "new\nline",
        "-n",
        {"base64": "wyg="},
    ]
    assert prepare(NewEvent(event_type, stored.payload, ev.SCHEMA_VERSION)) == stored
    assert ev.from_record(event_type, stored.payload) == committed


def test_a_document_for_json_output_holds_no_lone_surrogate() -> None:
    document = {"paths": [from_bytes(b"bad\xff"), "ok"], "n": 1, "with": ("x",), "none": None}
    safe = json_safe(document)
    assert safe == {"paths": [{"base64": "YmFk/w=="}, "ok"], "n": 1, "with": ["x"], "none": None}
    rfc8785.dumps(safe)


#: The str fields of events that hold what kairo-orch makes or the plan names, never a
#: name from git, the file system or an agent: ids, commits, the refs and branches it
#: names, hosts, and its own locations (a repository under a path that is not UTF-8 is
#: not supported). By field name; `path` is a name in most events, so by event.
NOT_NAMES = {
    "subtask_id", "subtask_ids", "subtasks", "merge_again", "culprit", "dependency", "with_",
    "commit", "start_commit", "head_commit", "merge_commit", "previous_commit",
    "restored_commit", "merged_in", "base_commit", "tree", "idempotency_key", "branch",
    "integration_branch", "recovery_ref", "pane_id", "host", "worker_id", "source",
    "constraint", "plan_path", "repo_root", "git_common_dir", "worktree_root", "run_root",
    "run_dir", "tmux_socket", "tmux_session", "record_sha256", "snapshot_commit",
}  # fmt: skip
NOT_NAMES_OF = {("WorkspaceCreated", "path")}  # the worktree's location


def _str_fields(model: type[pydantic.BaseModel], seen: set[type]) -> list[tuple[str, str, bool]]:
    """(model, field, whether it is an OsStr) for every str field reachable from `model`."""
    found = []
    for name, field in model.model_fields.items():
        for annotation, metadata in _leaves(field.annotation, tuple(field.metadata)):
            if annotation is str:
                is_os = any(getattr(m, "__name__", "") == "_OsStrSchema" for m in metadata)
                found.append((model.__name__, name, is_os))
            elif _is_model(annotation) and annotation not in (ev.ResolvedPlan, *seen):
                seen.add(annotation)
                found += _str_fields(annotation, seen)
    return found


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


def _leaves(annotation: Any, metadata: tuple[Any, ...]) -> list[tuple[Any, tuple[Any, ...]]]:
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *more = typing.get_args(annotation)
        return _leaves(inner, (*metadata, *more))
    arguments = typing.get_args(annotation)
    if not arguments:
        return [(annotation, metadata)]
    return [leaf for argument in arguments for leaf in _leaves(argument, metadata)]


def test_every_text_field_of_an_event_holds_any_bytes_unless_kairo_orch_makes_it() -> None:
    """A field that may hold a name from git, the file system or an agent must be an
    `OsStr`: a plain str field holding one has no canonical JSON, and its event would stop
    the supervisor (reproduction 35.6). A new str field must choose."""
    seen: set[type] = set()
    fields = [
        field
        for member in typing.get_args(typing.get_args(ev.ExecutionEvent)[0])
        for field in _str_fields(member, seen)
    ]
    plain = {(model, name) for model, name, is_os in fields if not is_os}
    assert {field for field in plain if field[1] not in NOT_NAMES} == NOT_NAMES_OF
    assert ("AttemptCommitted", "paths", True) in fields  # the walk sees through Optional
    assert ("Conflict", "path", True) in fields
    assert ResolvedSubtask.model_fields["files"].annotation == tuple[OsStr, ...]


def test_a_reason_naming_such_a_file_is_kept() -> None:
    detail = "git failed on " + from_bytes(b"bad\xff.txt")
    reason = Reason(code=ReasonCode.MERGE_FAILED, detail=detail)
    assert Reason.model_validate(reason.model_dump(mode="json")).detail == detail


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
