"""Every error kairo-orch raises on purpose, under one root.

The CLI turns each into one or two sentences on stderr and the exit code of
docs/cli.md; anything else that escapes is a bug and is reported as such.

    KairoError                      exit 1   (root; rarely raised bare)
    ├── UsageError                  exit 2   bad arguments, unknown or ambiguous execution id
    │   └── PlanError               exit 2   the plan file is wrong (file:line:col: sentence)
    ├── LogVerificationError        exit 3   the event log's hash chain or head does not hold
    │   └── LogRewritten            exit 3   it holds, but is not the log its supervisor wrote
    ├── OwnershipError              exit 4   another supervisor owns it; an interrupted run exists
    ├── EnvironmentProblem          exit 5   not a git repository; git or tmux missing; no store
    │   ├── StoreSchemaError        exit 5   the store's schema is newer than this program
    │   ├── LogFromNewerVersion     exit 5   an event of a schema version newer than this program
    │   └── StoreLost               exit 5   the store was deleted or replaced under a run
    └── StepFailed                  exit 1   a git, tmux or agent step failed inside a run
"""

from __future__ import annotations

import sys
from typing import ClassVar


class KairoError(Exception):
    """Root of all deliberate errors; fields give the context a user or a log needs."""

    exit_code: ClassVar[int] = 1

    def __init__(
        self,
        message: str,
        *,
        execution_id: str | None = None,
        subtask_id: str | None = None,
        branch: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.execution_id = execution_id
        self.subtask_id = subtask_id
        self.branch = branch

    def context(self) -> dict[str, str]:
        """The structured fields that are set, for logs."""
        fields = {
            "execution_id": self.execution_id,
            "subtask_id": self.subtask_id,
            "branch": self.branch,
        }
        return {k: v for k, v in fields.items() if v is not None}


def deliberate(error: BaseException) -> BaseException:
    """`error` out of the groups of one that trio's nurseries may have wrapped it in."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


class UsageError(KairoError):
    exit_code = 2


class PlanError(UsageError):
    """A plan that cannot run; `problems` holds every `file:line:col: sentence` found."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class LogVerificationError(KairoError):
    exit_code = 3

    def __init__(self, message: str, *, execution_id: str, bad_seq: int) -> None:
        super().__init__(message, execution_id=execution_id)
        self.bad_seq = bad_seq


class LogRewritten(LogVerificationError):
    """The log is not the one its supervisor wrote, though its chain may hold: someone
    rewrote it and recomputed the hashes (store.md, "What the supervisor wrote"). `what`
    says what changed, as a clause ("the event at seq 3 is not the one it wrote")."""

    def __init__(self, message: str, *, execution_id: str, bad_seq: int, what: str) -> None:
        super().__init__(message, execution_id=execution_id, bad_seq=bad_seq)
        self.what = what


class OwnershipError(KairoError):
    exit_code = 4


class EnvironmentProblem(KairoError):
    exit_code = 5


class StoreSchemaError(EnvironmentProblem):
    pass


class LogFromNewerVersion(EnvironmentProblem):
    """A correctly chained log holding an event this version cannot read: upgrade."""


class StoreLost(EnvironmentProblem):
    """The store a run writes to is gone (its file deleted or replaced, its tables
    dropped): no retry brings it back."""


class StepFailed(KairoError):
    exit_code = 1


def exit_status(done: SystemExit) -> int:
    """The status a `SystemExit` ends a process with, as the interpreter's would: its
    code, 0 for None, and 1 for anything else (a message, printed to stderr)."""
    if done.code is None or isinstance(done.code, int):
        return done.code or 0
    print(done.code, file=sys.stderr)
    return 1
