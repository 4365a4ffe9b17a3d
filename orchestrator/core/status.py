"""`status --json` (cli.md) as a pure function of the folded state and the row's head."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.core.guard import breach_documents
from orchestrator.core.ids import attempt_output
from orchestrator.core.overlaps import overlap_documents
from orchestrator.core.reasons import sentence_or_none
from orchestrator.core.resolution import resolutions
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import AttemptView, SubtaskView


def effective_status(
    state: ExecutionState, *, supervisor_alive: bool, tampered: bool = False
) -> str:
    """RUNNING only while a supervisor lives; an unfinished log without one is PAUSED. A log
    that is not the one its supervisor wrote (`tampered`: runtime/log_witness.py) is
    TAMPERED, whatever it says, even that it ended."""
    if tampered:
        return "TAMPERED"
    if state.ended is not None:
        return state.ended
    return "RUNNING" if supervisor_alive else "PAUSED"


def status_document(
    state: ExecutionState,
    *,
    status: str,
    version: int,
    head_seq: int,
    head_hash: str,
    running: Mapping[str, Mapping[str, int | None]] | None = None,
    tampered: str | None = None,
) -> dict[str, Any]:
    """`running`: running attempts' usage so far, by subtask (agents.live_usage.read_live).
    `tampered`: how the log is not the one its supervisor wrote, a sentence."""
    created = state.created
    running = running or {}
    document: dict[str, Any] = {
        "execution_id": state.execution_id,
        "plan": state.plan.name,
        "status": status,
        "version": version,
        "base_commit": created.base_commit,
        "integration_branch": created.integration_branch,
        "integration_head": state.integration_head,
        "tmux_session": created.tmux_session,
        "tmux_socket": created.tmux_socket,
        "run_root": created.run_root,
        # Only a live one's: the pid of a supervisor that has exited may be another process's.
        "supervisor_pid": state.supervisor_pid if status == "RUNNING" else None,
        "stopping": state.stop if status == "RUNNING" else None,
        "head": {"seq": head_seq, "hash": head_hash},
        "subtasks": [
            {
                "id": view.id,
                "state": view.state,
                "branch": view.branch,
                "worktree": view.worktree,
                "head_commit": view.head_commit,
                "attempts": len(view.attempts),
                "tokens": view.tokens,
                "input_tokens": view.input_tokens,
                "output_tokens": view.output_tokens,
                "cost_usd": view.cost_usd,
                "api_retries": sum(attempt.api_retries for attempt in view.attempts),
                # the running attempt's tokens and API retries so far, not yet in `tokens`
                "running": dict(running[view.id]) if view.id in running else None,
                "session_id": view.session_id,
                "reason": sentence_or_none(view.reason),
                "conflicts": [c.document() for c in view.conflicts],
                "output": last_output(view),
                **_resolutions(view),
                **_host(state, view),
            }
            for view in (state.subtask(spec.id) for spec in state.plan.subtasks)
        ],
    }
    if tampered is not None:  # likewise: said only of a log rewritten (store.md)
        document["tampered"] = tampered
    if state.anomalies:  # only then: a log that holds none is described as it always was
        document["anomalies"] = [anomaly.sentence() for anomaly in state.anomalies]
    if state.overlaps:  # likewise: seen while agents worked (core/overlaps.py)
        document["overlaps"] = overlap_documents(state)
    if written := written_by_others(state):  # likewise
        document["written_by_others"] = written
    if state.breaches:  # likewise: changes to what the user owns (core/guard.py)
        document["breaches"] = breach_documents(state.breaches)
    return document


def written_by_others(state: ExecutionState) -> list[str]:
    """What other processes wrote of the runners' records, a sentence each, in plan order."""
    said = []
    for spec in state.plan.subtasks:
        for attempt in state.subtask(spec.id).attempts:
            log = attempt_output(attempt.run_dir)
            said += [
                f"{spec.id} attempt {attempt.number}: " + _WRITTEN_BY_OTHERS[record].format(log=log)
                for record in attempt.written_by_others
            ]
    return said


_WRITTEN_BY_OTHERS = {
    "exit_record": "an exit record was written into its run folder by another process while "
    "its agent still ran; it was not taken for the agent's exit",
    "output_log": "its output log ({log}) was changed by another process: it is not what its "
    "agent printed",
}


def _host(state: ExecutionState, view: SubtaskView) -> dict[str, Any]:
    """`host`, with `placement: workers` only: the host of the worker the subtask is
    assigned to (None before it is). One machine's are described as they always were."""
    if state.plan.placement != "workers":
        return {}
    assignment = state.assignments.get(view.id)
    return {"host": assignment.host if assignment is not None else None}


def last_output(view: SubtaskView) -> str | None:
    """The file that holds all its last attempt's agent printed (its pane may be closed)."""
    attempt = view.current_attempt
    return output_of(attempt) if attempt is not None else None


def output_of(attempt: AttemptView) -> str | None:
    """Its output log, unless another process changed it (`written_by_others` says so)."""
    return None if "output_log" in attempt.written_by_others else attempt_output(attempt.run_dir)


def _resolutions(view: SubtaskView) -> dict[str, Any]:
    """`resolutions`, only for a subtask an agent resolved a conflict of."""
    shown = resolutions(view)
    return {"resolutions": shown} if shown else {}
