"""Which stop each signal asks of a running supervisor."""

from __future__ import annotations

import signal

import pytest

from orchestrator.core import events as ev
from orchestrator.runtime.stopping import stop_for


@pytest.mark.parametrize(
    ("signum", "already", "mode"),
    [
        (signal.SIGTERM, None, "graceful"),
        (signal.SIGINT, None, "graceful"),
        (signal.SIGUSR1, None, "now"),
        (signal.SIGTERM, "graceful", "now"),  # asked twice: the user means it
        (signal.SIGINT, "graceful", "now"),
        (signal.SIGTERM, "now", "now"),
    ],
)
def test_signals_map_to_stops_and_a_second_one_escalates(
    signum: int, already: ev.StopMode | None, mode: ev.StopMode
) -> None:
    assert stop_for(signum, already).mode == mode
