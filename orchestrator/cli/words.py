"""What the use cases return and tell, in English: the CLI's sentences (cli.md)."""

from __future__ import annotations

import shlex

from orchestrator.app.notes import (
    Note,
    PlanChangedSinceStart,
    PlanWarning,
    StoreAnswersAgain,
    StoreNotAnswering,
    UncommittedChanges,
)
from orchestrator.app.results import (
    AlreadyEnded,
    Ended,
    Interrupted,
    Launched,
    SparesKept,
    StopRecorded,
    SupervisorDied,
    Verified,
)
from orchestrator.core.cleanup import (
    Cleaned,
    ExecutionLeftAlone,
    GuardRefsKept,
    IntegrationBranchKept,
    NotEnded,
    Removed,
    RunFolderKept,
    SpareKept,
    SparesRemoved,
    SubtaskKept,
)
from orchestrator.core.ids import short_id


def note(said: Note) -> str:
    match said:
        case PlanWarning(text=text):
            return f"warning: {text}"
        case UncommittedChanges(base_commit=base):
            return (
                f"note: your checkout has uncommitted changes; the agents start from "
                f"{base[:12]} without them"
            )
        case PlanChangedSinceStart(plan_path=path):
            return (
                f"note: {path} was modified after this execution started; it goes on with the "
                f"plan as it was then (`kairo-orch start --fresh {path}` starts the new one)"
            )
        case StoreNotAnswering(message=message):
            return f"kairo-orch: {message}; waiting for it to answer again"
        case StoreAnswersAgain():
            return "kairo-orch: the store answers again"
    raise AssertionError(said)


def resume_question(interrupted: Interrupted) -> str:
    return (
        f"execution {interrupted.execution_id} of plan {interrupted.plan_name} was "
        "interrupted; resume it?"
    )


def launched(done: Launched) -> str:
    verb = "resumed" if done.resumed else "started"
    return (
        f"{verb} {done.plan_name} as {done.execution_id}: {count(done.subtasks, 'subtask')}, "
        f"integration branch {done.integration_branch}"
    )


def how_to_watch(execution_id: str) -> str:
    short = short_id(execution_id)
    return f"watch it: kairo-orch attach {short}    status: kairo-orch status {short}"


def ended(end: Ended) -> str:
    failed = [
        f"{'the pull request command' if f.step == 'pull_request' else 'the push'} failed "
        f"(exit {f.exit_code})"
        for f in end.failed_review_steps
    ]
    but = f", but {' and '.join(failed)}" if failed else ""
    return (
        f"{end.execution_id} ended {end.status}: {end.merged} of "
        f"{count(end.subtasks, 'subtask')} merged{but}; "
        f"`kairo-orch report {short_id(end.execution_id)}` says what happened"
    )


def supervisor_died(died: SupervisorDied) -> str:
    return (
        f"kairo-orch: the supervisor of {died.execution_id} died before the execution "
        f"ended; it is {died.status}, and `kairo-orch resume {short_id(died.execution_id)}` "
        f"goes on. Its log: {died.supervisor_log}"
    )


def stopped_waiting(execution_id: str) -> str:
    short = short_id(execution_id)
    return (
        f"kairo-orch: stopped waiting; execution {execution_id} goes on "
        f"(`kairo-orch status {short}` shows it, `kairo-orch stop {short}` stops it)"
    )


def already_ended(end: AlreadyEnded) -> str:
    return (
        f"execution {end.execution_id} already ended {end.status}; "
        f"`kairo-orch report {short_id(end.execution_id)}` says what happened"
    )


def stop_recorded(stop: StopRecorded) -> str:
    execution_id, running = stop.execution_id, stop.running
    short = short_id(execution_id)
    kept = f"what they changed, if anything, kept on refs/kairo/stopped/{short}/"
    if stop.ended is not None and stop.mode == "now" and running:
        return (
            f"stopped {execution_id} at once: {running} running agent(s) killed, {kept}; "
            f"it ended {stop.ended}"
        )
    if stop.ended is not None:
        return f"execution {execution_id} ended {stop.ended}"
    if stop.mode == "now":
        return (
            f"stopping {execution_id} now: {running} running agent(s) are being killed, "
            f"{kept}; nothing new starts"
        )
    return (
        f"stopping {execution_id}: {running} running attempt(s) finish and are judged, "
        f"accepted work is merged, nothing new starts; `kairo-orch status {short}` follows "
        f"it, and `kairo-orch stop --now {short}` stops it at once"
    )


def cleaned(step: Cleaned) -> str:
    match step:
        case Removed(kind="cgroup", name=name):
            return f"ended what still ran in cgroup {name}, and removed it"
        case Removed(kind="tmux_session", name=name):
            return f"killed tmux session {name}"
        case Removed(kind="worktree", name=name):
            return f"removed worktree {name}"
        case Removed(kind="integration_checkout", name=name):
            return f"removed the integration check's worktree {name}"
        case Removed(kind="agent_state", name=name):
            return f"removed the sandboxed agent's sessions and scratch in {name}"
        case Removed(kind="branch", name=name, unmerged_head=head):
            # Unmerged work deleted (--force) can still be had back, for a while.
            return f"deleted branch {name}" + (
                f" (its work: `git branch {name} {head[:12]}`)" if head else ""
            )
        case Removed(kind="integration_branch", name=name, held_by=holder):
            why = f"its head is on {holder}" if holder else "nothing was merged"
            return f"deleted the integration branch {name} ({why})"
        case SubtaskKept(why="unmerged", subtask_id=subtask, branch=branch, worktree=worktree):
            where, verb = (f" and its worktree {worktree}", "hold") if worktree else ("", "holds")
            return f"kept {subtask}: branch {branch}{where} {verb} unmerged work (--force removes)"
        case SubtaskKept(why="uncommitted", subtask_id=subtask, worktree=worktree):
            return f"kept {subtask}: worktree {worktree} has uncommitted changes (--force removes)"
        case SubtaskKept(subtask_id=subtask, message=message):
            return f"kept {subtask}: {message}"
        case IntegrationBranchKept(branch=branch):
            return f"kept the integration branch {branch}"
        case Removed(kind="guard_refs", name=name):
            return f"deleted the guard's refs {name}/"
        case GuardRefsKept(namespace=namespace):
            return (
                f"kept the guard's refs {namespace}/: they keep what the changes its guard "
                "found took from you (`kairo-orch status` lists them) from git's gc; "
                "--force removes them"
            )
        case RunFolderKept(folder=folder):
            return f"kept its run folder {folder} (the agents' output and logs)"
        case SparesRemoved(count=n):
            return f"removed {count(n, 'spare worktree')}"
        case SpareKept(path=path):
            return (
                f"kept the spare worktree {path}: it is locked; "
                f"`git worktree unlock {shlex.quote(path)}` lets `clean --spares` remove it"
            )
    raise AssertionError(step)


def left_alone(alone: ExecutionLeftAlone) -> str:
    if isinstance(alone, NotEnded):
        return f"{alone.execution_id}: left alone, it has not ended (it is {alone.status})"
    return f"{alone.execution_id}: left alone, {alone.message}"


def cleaned_heading(execution_id: str, ended: str | None) -> str:
    return f"{execution_id} ({ended}):"


NOTHING_TO_CLEAN = "no executions in this repository yet"


def unlogged(short: str) -> str:
    return (
        f"execution {short} left subtask branches here but is in no log of this store "
        f"(its store was deleted, or it is another store's); `kairo-orch clean {short}` "
        "removes what it left"
    )


def spares_kept(spares: SparesKept) -> str:
    return (
        f"{count(spares.count, 'spare worktree')} kept for reuse, "
        f"{spares.bytes / 1024**2:,.0f} MiB (at most {spares.at_most_bytes / 1024**3:g} GiB "
        "a root: KAIRO_SPARE_DISK); `kairo-orch clean --spares` removes them"
    )


def verified(done: Verified) -> str:
    return f"{done.execution_id}: the log verifies; head seq {done.head_seq}, hash {done.head_hash}"


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
