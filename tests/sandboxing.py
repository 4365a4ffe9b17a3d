"""Bubblewrap for tests: the sandbox every plan without a `sandbox:` gets.

Where bubblewrap cannot make a sandbox (not installed, user namespaces forbidden), the
tests that need one are skipped with the reason; CI sets `KAIRO_TEST_REQUIRE_SANDBOX=1`,
and there they fail instead, so that a machine without the sandbox can never pass for a
run that tested it.
"""

from __future__ import annotations

import os

import pytest

from orchestrator.runtime.sandbox import bwrap_unavailable

REQUIRED = os.environ.get("KAIRO_TEST_REQUIRE_SANDBOX") == "1"


def require_sandbox() -> None:
    """Returns where bubblewrap runs; skips the test (or, in CI, fails it) elsewhere."""
    reason = bwrap_unavailable()
    if reason is None:
        return
    if REQUIRED:
        pytest.fail(f"{reason}, and KAIRO_TEST_REQUIRE_SANDBOX=1 requires it")
    pytest.skip(f"{reason}; CI runs these tests (KAIRO_TEST_REQUIRE_SANDBOX=1)")
