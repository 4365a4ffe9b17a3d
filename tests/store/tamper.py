"""Write to a store's file the way an attacker (or a bug) would, behind the store's back.

The events table refuses UPDATE and DELETE through triggers. `tampering` opens a raw
connection, drops those triggers inside one transaction, lets the test edit rows, then
puts the triggers back before committing, so other connections never see them missing
and the store looks untouched except for the edit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_TRIGGERS = (
    "SELECT name, sql FROM sqlite_master"
    " WHERE type = 'trigger' AND tbl_name = 'kairo_execution_events'"
)


@contextmanager
def tampering(path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(path, isolation_level=None, timeout=10.0)
    try:
        connection.execute("BEGIN IMMEDIATE")
        triggers = connection.execute(_TRIGGERS).fetchall()
        for name, _ in triggers:
            connection.execute(f"DROP TRIGGER {name}")
        try:
            yield connection
        except BaseException:
            connection.rollback()
            raise
        for _, sql in triggers:
            connection.execute(sql)
        connection.commit()
    finally:
        connection.close()


@contextmanager
def raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain connection with the triggers in place, committed on exit."""
    connection = sqlite3.connect(path, isolation_level=None, timeout=10.0)
    try:
        yield connection
    finally:
        connection.close()
