"""Golden logs: event logs of real executions, kept as they were written, with what they
folded to then. Every later kairo-orch must verify them and fold them to the same status
and report: an event renamed or a field changed without an upcaster (core/upcasting.py)
fails their test, where it would otherwise make every paused execution unresumable.

A golden log is a folder: `log.jsonl` (the rows of `kairo_execution_events`, as stored:
the payload as its text, never re-serialized, since the hashes cover it), `row.json` (its
`kairo_executions` row), `status.json` and `report.md` (what `status --json` and `report`
said of it, as the pure functions give them with no supervisor alive).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from orchestrator.core.report import build_report, to_markdown
from orchestrator.core.state import ExecutionState
from orchestrator.core.status import effective_status, status_document
from orchestrator.store.base import ExecutionRow

HERE = Path(__file__).resolve().parent
EVENT_COLUMNS = (
    "execution_id", "seq", "event_id", "event_type", "schema_version", "payload_json",
    "event_hash", "created_at",
)  # fmt: skip
ROW_COLUMNS = (
    "execution_id", "plan_name", "status", "version", "owner", "lease_expires_at", "head_seq",
    "head_hash", "checkpoint_json", "created_at", "updated_at", "repository",
)  # fmt: skip


def golden_names() -> list[str]:
    return sorted(p.parent.name for p in HERE.glob("*/log.jsonl"))


def dump(database: Path, execution_id: str, folder: Path) -> None:
    """Write the execution's rows, as stored in `database`, to `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(database) as db:
        rows = db.execute(
            f"SELECT {', '.join(EVENT_COLUMNS)} FROM kairo_execution_events"
            " WHERE execution_id = ? ORDER BY seq",
            (execution_id,),
        ).fetchall()
        row = db.execute(
            f"SELECT {', '.join(ROW_COLUMNS)} FROM kairo_executions WHERE execution_id = ?",
            (execution_id,),
        ).fetchone()
    with (folder / "log.jsonl").open("w", encoding="utf-8") as out:
        for values in rows:
            out.write(json.dumps(dict(zip(EVENT_COLUMNS, values, strict=True))) + "\n")
    document = dict(zip(ROW_COLUMNS, row, strict=True))
    document["checkpoint_json"] = None  # a cache, made anew from the log
    (folder / "row.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def load(folder: Path, database: Path) -> ExecutionRow:
    """Put a golden log into the store at `database` (one the current code made), as it was
    written: rows inserted behind the store's back, which the append-only triggers allow."""
    document = json.loads((folder / "row.json").read_text(encoding="utf-8"))
    with sqlite3.connect(database) as db:
        db.execute(
            f"INSERT INTO kairo_executions ({', '.join(ROW_COLUMNS)})"
            f" VALUES ({', '.join('?' * len(ROW_COLUMNS))})",
            [document[c] for c in ROW_COLUMNS],
        )
        for line in (folder / "log.jsonl").read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            db.execute(
                f"INSERT INTO kairo_execution_events ({', '.join(EVENT_COLUMNS)})"
                f" VALUES ({', '.join('?' * len(EVENT_COLUMNS))})",
                [event[c] for c in EVENT_COLUMNS],
            )
    return ExecutionRow(**document)


def folded(state: ExecutionState, row: ExecutionRow) -> tuple[dict[str, Any], str]:
    """What `status --json` and `report` say of a log with no supervisor alive."""
    status = effective_status(state, supervisor_alive=False)
    document = status_document(
        state, status=status, version=row.version, head_seq=row.head_seq, head_hash=row.head_hash
    )
    return document, to_markdown(build_report(state, status))
