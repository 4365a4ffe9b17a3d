"""What every test keeps to: it closes the stores it opens."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator.store import sqlite


@pytest.fixture(autouse=True)
def _every_store_closed() -> Iterator[None]:
    # A store left open for the garbage collector would be carried into the supervisor
    # that a later test forks in this process, which refuses it (supervisor_process.py).
    before = sqlite.open_stores()
    yield
    assert sqlite.open_stores() == before, "the test left a store open; close it (with ...)"
