"""The whole suite's check: a test run leaves no process running (tests/leftovers.py).
A tmux server, a worker, an agent the suite started and did not end fails the run, named,
and is killed."""

from __future__ import annotations

import pytest

from tests import leftovers
from tests.sandboxing import require_sandbox

_MARK = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_MARK] = leftovers.mark_this_run()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    value = session.config.stash.get(_MARK, None)
    if value is None:
        return
    found = leftovers.leftovers(value)
    if not found:
        return
    leftovers.end(found)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "processes the tests started and left running", red=True)
        for leftover in found:
            reporter.write_line(f"{leftover} (killed)")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def bwrap_runs() -> None:
    """For a test that needs a sandbox (`pytest.mark.usefixtures("bwrap_runs")`): skipped
    where bubblewrap cannot make one, failed there in CI (tests/sandboxing.py)."""
    require_sandbox()
