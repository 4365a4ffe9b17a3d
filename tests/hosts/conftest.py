"""The lab: real separate hosts on one machine, for the tests of workers on several hosts.

One lab per test session (about two seconds to make): a switch, a `hub` host serving a
PostgreSQL cluster of its own and a git remote, and hosts `host-a`, `host-b`, `host-c` and
`client` (tests/hosts/lab.py). Each test takes a new database of the cluster (`lab_store`).

It needs root (network namespaces), `ip` and `unshare`, PostgreSQL's server programs and
`git daemon`. Where any is missing the tests are skipped with the reason, or fail where
KAIRO_TEST_REQUIRE_HOSTS=1 (CI), so that a machine lacking them never passes for green.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from typing import NoReturn

import pytest

from tests.hosts.lab import Lab, missing, running_lab

__all__ = ["WORKER_HOSTS", "Lab"]

REQUIRED = os.environ.get("KAIRO_TEST_REQUIRE_HOSTS") == "1"
WORKER_HOSTS = ("host-a", "host-b")
THIRD_HOST = "host-c"  # a third worker host, for the tests that spread over three


def _unavailable(reason: str) -> NoReturn:
    message = f"the lab of separate hosts cannot be made: {reason}"
    if REQUIRED:
        pytest.fail(f"{message}, and KAIRO_TEST_REQUIRE_HOSTS=1 requires it")
    pytest.skip(f"{message}; CI runs these tests (KAIRO_TEST_REQUIRE_HOSTS=1)")


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    reason = missing()
    if reason:
        _unavailable(reason)
    hosts = (*WORKER_HOSTS, THIRD_HOST, "client")
    with ExitStack() as undo:
        try:
            made = undo.enter_context(running_lab(tmp_path_factory.mktemp("hosts"), hosts))
        except subprocess.CalledProcessError as error:  # a container without CAP_SYS_ADMIN
            _unavailable(f"`ip {' '.join(error.cmd[1:])}` failed: {error.stderr.strip()}")
        yield made


@pytest.fixture
def lab_store(lab: Lab) -> str:
    """The URL of a new database of the lab's cluster, as its hosts reach it."""
    return lab.postgres.new_database()
