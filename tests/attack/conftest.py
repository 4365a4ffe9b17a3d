"""The attacks run as a user runs kairo-orch (tests/e2e's fixtures): the real command, real
git, a private tmux server, agents that are shell lines doing what an injected prompt
told them to."""

from __future__ import annotations

from tests.e2e.conftest import kairo, repo

__all__ = ["kairo", "repo"]
