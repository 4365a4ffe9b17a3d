"""A PostgreSQL database for tests: a schema of their own, dropped afterwards.

The server is `KAIRO_TEST_POSTGRES` (by default the local one, trust auth, database
`test`). Where it cannot be reached, the tests that need it are skipped with the reason;
CI sets `KAIRO_TEST_REQUIRE_POSTGRES=1`, and there they fail instead, so a stopped server
can never pass for a green run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import pytest

BASE_URL = os.environ.get("KAIRO_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REQUIRED = os.environ.get("KAIRO_TEST_REQUIRE_POSTGRES") == "1"


def _unavailable(reason: str) -> None:
    message = f"PostgreSQL at {BASE_URL} cannot be used ({reason})"
    if REQUIRED:
        pytest.fail(f"{message}, and KAIRO_TEST_REQUIRE_POSTGRES=1 requires it")
    pytest.skip(f"{message}; CI runs these tests (KAIRO_TEST_REQUIRE_POSTGRES=1)")


def admin_connection() -> Any:
    """An autocommit connection to the test database, or the test is skipped (or fails)."""
    try:
        import psycopg
    except ImportError as error:
        _unavailable(f"psycopg is not installed: {error}")
    try:
        return psycopg.connect(BASE_URL, autocommit=True, connect_timeout=5)
    except psycopg.Error as error:
        _unavailable(str(error).strip().splitlines()[0])
        raise  # not reached: _unavailable skips or fails


def connect(url: str) -> Any:
    """An autocommit psycopg connection to `url`."""
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=5)


def schema_url(schema: str) -> str:
    """BASE_URL with `schema` as the connection's search path: a store opened on it makes
    and uses its tables there."""
    options = quote(f"-csearch_path={schema}", safe="")
    return f"{BASE_URL}{'&' if '?' in BASE_URL else '?'}options={options}"


@contextmanager
def fresh_schema() -> Iterator[str]:
    """The URL of an empty schema of the test database, dropped with all it holds after."""
    schema = f"kairo_test_{uuid.uuid4().hex[:12]}"
    admin = admin_connection()
    with admin:
        admin.execute(f"CREATE SCHEMA {schema}")
        try:
            yield schema_url(schema)
        finally:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
