"""What the supervisors of an execution wrote to its log, kept outside the store: the hash
of every event, one line a seq, in its run folder (`kairo_dir.log_hashes`).

The chain proves a log consistent, not that it is the log its supervisor wrote: whoever
can write the store can rewrite a past event and hash every event after it anew with
kairo-orch's own code, and the chain verifies (reproduction 35.4). A running supervisor
knows the head it wrote last (journal.py), and the store refuses its next append when the
log no longer ends with that event. This file keeps that knowledge for afterwards:
`status` shows such an execution TAMPERED, `verify` and `resume` refuse it, naming the
first seq whose hash is not the one written. A program running as the user can rewrite
this file too: it is a second place to forge, not a proof (store.md).

Line n is the hash of seq n: 64 hex digits and a newline, so seq n is at byte 65 * n. A
line a crash cut short is not read, and is cut off before the next line is added. The
log may go on past the file (a supervisor killed between an append and its line; one on
another host, with `placement: workers`); it never falls short of it or differs in a line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from orchestrator import kairo_dir
from orchestrator.errors import LogRewritten
from orchestrator.store.base import DurableExecutionStore, StoredEvent

#: A line: the hex SHA-256 of one event, and a newline.
LINE = 65


class LogWitness:
    """The hashes of an execution's events as its supervisors wrote them, on this host."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._out: int | None = None  # open for appending once taken up
        self._lines = 0  # complete lines the file holds

    @classmethod
    def of(cls, git_common_dir: Path, execution_id: str) -> LogWitness:
        return cls(kairo_dir.log_hashes(git_common_dir, execution_id))

    def hashes(self) -> list[str]:
        """Every hash written, seq 0 first; none when there is no file (or none to read:
        whoever could make it unreadable could remove it)."""
        try:
            data = self.path.read_bytes()
        except OSError:
            return []
        return [
            data[at : at + LINE - 1].decode("ascii", "replace")
            for at in range(0, len(data) - LINE + 1, LINE)
        ]

    def last(self) -> tuple[int, str] | None:
        """The last hash written and its seq, read without reading the rest."""
        try:
            with self.path.open("rb") as file:
                lines = os.fstat(file.fileno()).st_size // LINE
                if not lines:
                    return None
                file.seek((lines - 1) * LINE)
                return lines - 1, file.read(LINE - 1).decode("ascii", "replace")
        except OSError:
            return None

    def take_up(self, store: DurableExecutionStore, execution_id: str) -> None:
        """For a supervisor about to write the log: refuse one that is not what was written
        (`LogRewritten`), then add the events the file lacks (a new execution's first one,
        those a killed supervisor appended and had no time to add). `OSError` when the file
        cannot be kept (nothing is added to it then: the run goes on without it)."""
        found = rewritten(store, execution_id, self)
        if found is not None:
            raise found
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
            self._out = os.open(self.path, flags, 0o644)
            self._lines = os.fstat(self._out).st_size // LINE
            os.ftruncate(self._out, self._lines * LINE)  # a line a crash cut short
            row = store.get_execution(execution_id)
            head_seq = row.head_seq if row is not None else self._lines - 1
            missing = store.event_hashes(execution_id, self._lines, head_seq)
            if len(missing) != head_seq + 1 - self._lines:  # given up below, as a failed write
                raise OSError(f"the log lacks events before its head at seq {head_seq}")  # noqa: TRY301
            self._write([missing[seq] for seq in range(self._lines, head_seq + 1)])
        except OSError:
            self.close()
            raise

    def add(self, events: Sequence[StoredEvent]) -> None:
        """The events just appended. `OSError` when a line cannot be written: the file then
        stops where it is, for good (a gap would misnumber every later line)."""
        if self._out is None or not events:
            return
        if events[0].seq != self._lines:
            self.close()
            raise OSError(f"{self.path} ends at seq {self._lines - 1}, not {events[0].seq - 1}")
        try:
            self._write([event.event_hash for event in events])
        except OSError:
            self.close()
            raise

    def _write(self, hashes: list[str]) -> None:
        assert self._out is not None
        data = "".join(f"{digest}\n" for digest in hashes).encode("ascii")
        while data:
            data = data[os.write(self._out, data) :]
        self._lines += len(hashes)

    def close(self) -> None:
        if self._out is not None:
            os.close(self._out)
            self._out = None


def rewritten(
    store: DurableExecutionStore, execution_id: str, witness: LogWitness
) -> LogRewritten | None:
    """Whether the log is not what its supervisors wrote here, as `LogRewritten` naming
    the first seq that differs; None when it is, or when there is no record of it here.

    Cheap when it is: the last line and the log's hash at its seq (the log's head,
    usually). A log whose chain holds and that holds that hash there holds every earlier
    one: each hash covers all the events before it. The witness is read first, so a log
    a supervisor appends to meanwhile is only ever ahead of it."""
    last = witness.last()
    if last is None:
        return None
    seq, digest = last
    row = store.get_execution(execution_id)
    if row is None:
        return None
    if row.head_seq >= seq:
        held = row.head_hash if row.head_seq == seq else None
        if held is None:
            held = store.event_hashes(execution_id, seq, seq).get(seq)
        if held == digest:
            return None
    first = first_rewritten(store, execution_id, witness, min(seq, row.head_seq))
    if first is not None:
        bad, what = first, f"the event at seq {first} is not the one it wrote"
    elif row.head_seq < seq:
        bad = row.head_seq + 1
        what = f"the log ends at seq {row.head_seq}, but its supervisor wrote up to seq {seq}"
    else:
        bad, what = seq, f"its head at seq {seq} is not the one it wrote"
    return LogRewritten(
        f"the event log of {execution_id} was changed after its supervisor wrote it: {what}"
        f" ({witness.path} holds the hash of every event it wrote; the chain alone may hold"
        " all the same, hashed anew)",
        execution_id=execution_id,
        bad_seq=bad,
        what=what,
    )


def first_rewritten(
    store: DurableExecutionStore, execution_id: str, witness: LogWitness, up_to: int
) -> int | None:
    """The first seq up to `up_to` whose hash in the log is not the one written, if the
    file says (a supervisor's message: the store names only the last it wrote)."""
    written = witness.hashes()[: up_to + 1]
    stored = store.event_hashes(execution_id, 0, up_to)
    return next((n for n, hash_ in enumerate(written) if stored.get(n) != hash_), None)
