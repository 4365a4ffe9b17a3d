"""Payloads written at an earlier schema version are read in today's shape; one written by
a newer kairo-orch is refused."""

from __future__ import annotations

import pytest

from orchestrator.core import events as ev
from orchestrator.core.upcasting import UPCASTERS, upcast
from orchestrator.errors import LogFromNewerVersion

# A history of the kind a real one would be: version 2 renamed `who` to `owner`, version 3
# added `reason` with a default.
HISTORY = {
    ("claimed", 1): lambda p: {"owner": p["who"], **{k: v for k, v in p.items() if k != "who"}},
    ("claimed", 2): lambda p: {"reason": "", **p},
}


def test_an_old_payload_goes_through_each_step_in_order() -> None:
    old = {"who": "h:1", "at": 5}
    assert upcast("claimed", 1, old, current=3, upcasters=HISTORY) == {
        "reason": "",
        "owner": "h:1",
        "at": 5,
    }
    assert upcast("claimed", 2, {"owner": "h:1"}, current=3, upcasters=HISTORY) == {
        "reason": "",
        "owner": "h:1",
    }


def test_a_payload_of_today_or_of_an_event_no_step_touched_is_as_written() -> None:
    assert upcast("claimed", 3, {"owner": "x"}, current=3, upcasters=HISTORY) == {"owner": "x"}
    assert upcast("other", 1, {"who": "x"}, current=3, upcasters=HISTORY) == {"who": "x"}


def test_a_payload_of_a_newer_version_is_refused_with_what_to_do() -> None:
    with pytest.raises(LogFromNewerVersion, match="upgrade kairo-orch") as refused:
        upcast("claimed", 4, {}, current=3, upcasters=HISTORY)
    assert refused.value.exit_code == 5


def test_every_registered_step_reads_a_version_before_today_s() -> None:
    assert all(0 < version < ev.SCHEMA_VERSION for _, version in UPCASTERS)


def test_from_record_refuses_an_event_of_a_newer_schema() -> None:
    payload = {"pid": 1, "host": "h", "resumed": False, "at": 0.0}
    assert ev.from_record("supervisor_started", payload, ev.SCHEMA_VERSION).pid == 1
    with pytest.raises(LogFromNewerVersion):
        ev.from_record("supervisor_started", payload, ev.SCHEMA_VERSION + 1)


def test_a_version_6_supervisor_start_does_not_say_when_the_one_before_was_last_alive() -> None:
    payload = {"pid": 7, "host": "h", "resumed": True, "at": 100.0}
    assert upcast("supervisor_started", 6, payload, current=7) == {
        "previous_heartbeat_at": None,
        **payload,
    }
    started = ev.from_record("supervisor_started", payload, 6)
    assert isinstance(started, ev.SupervisorStarted) and started.previous_heartbeat_at is None


@pytest.mark.parametrize(("written", "value"), [(True, "all"), (False, "none")])
def test_a_version_7_plan_s_network_is_the_same_for_every_step(written: bool, value: str) -> None:
    sandbox = {"kind": "bwrap", "network": written, "writable": [], "pass_env": []}
    payload = {"plan": {"name": "p", "sandbox": sandbox}, "base_commit": "c"}
    upcast_plan = upcast("execution_created", 7, payload, current=8)["plan"]
    network = {"agent": value, "setup": value, "checks": value}
    assert upcast_plan == {"name": "p", "sandbox": {**sandbox, "network": network}}
