"""The attacks run as a user runs kairo-orch (tests/e2e's fixtures): the real command, real
git, a private tmux server, agents that are shell lines doing what an injected prompt
told them to; most of them in both sandboxes (`mode`)."""

from __future__ import annotations

import pytest

from tests.attack.sandboxes import DEFAULT, LOCAL, Mode
from tests.e2e.conftest import kairo, repo
from tests.sandboxing import require_sandbox

__all__ = ["kairo", "mode", "repo", "sandboxed"]


@pytest.fixture(params=[LOCAL, DEFAULT], ids=lambda mode: mode.name)
def mode(request: pytest.FixtureRequest) -> Mode:
    """The attack run with `sandbox: {kind: local}`, and under the default settings."""
    chosen: Mode = request.param
    if chosen.sandboxed:
        require_sandbox()
    return chosen


@pytest.fixture
def sandboxed() -> Mode:
    """The default settings only: an attack on the sandbox itself."""
    require_sandbox()
    return DEFAULT
