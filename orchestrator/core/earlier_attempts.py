"""What a new attempt is told about the ones before it, when it cannot remember them.

An agent that resumes its own session (claude-code, codex) has the conversation; any other
agent, or one re-run after a crash, starts cold. Its prompt then says what the earlier
attempts left on the subtask's branch (commits and diffstat, read by the edge) and what
became of each (not accepted and why, or accepted and its merge conflicted, and with
whom), so that it builds on that work instead of redoing or undoing it.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.core import events as ev
from orchestrator.core.reasons import sentence
from orchestrator.core.views import AttemptView, SubtaskView

MAX_COMMITS = 20
PATHS_NAMED = 5  # of a conflict, in the sentence on the attempt whose merge it stopped


def _outcome(attempt: AttemptView, after: AttemptView) -> str:
    """What became of `attempt`; `after`: the attempt that followed it."""
    if attempt.interrupted:
        saved = (
            f"; what it had not committed was set aside on {attempt.recovery_ref}"
            if attempt.recovery_ref
            else ""
        )
        return f"was interrupted (the supervisor stopped while it ran){saved}"
    if attempt.accepted:
        if after.resolution is None:
            return "was accepted"
        return (
            f"was accepted; its merge into the integration branch {_conflicted(after.resolution)}"
        )
    if attempt.reason is not None:
        return f"was not accepted: {sentence(attempt.reason)}"
    return "was not accepted"


def _conflicted(started: ev.ResolutionStarted) -> str:
    """Whose merged work, and where: "conflicted with fix-a, fix-b (src/x.py, src/y.py)"."""
    who = list(dict.fromkeys(name for c in started.conflicts for name in c.with_))
    paths = [c.path for c in started.conflicts]
    where = ", ".join(paths[:PATHS_NAMED])
    if len(paths) > PATHS_NAMED:
        where += f" and {len(paths) - PATHS_NAMED} more"
    return f"conflicted with {', '.join(who) or 'work merged earlier'} ({where})"


def _attempt_line(attempt: AttemptView, after: AttemptView) -> str:
    what = " (resolving its merge's conflict)" if attempt.resolution is not None else ""
    return f"- Attempt {attempt.number}{what} {_outcome(attempt, after)}."


def earlier_attempts_section(view: SubtaskView, commits: Sequence[str], diffstat: str) -> str:
    """The prompt's section on the attempts before the current one ("" on the first).

    `commits` are one-line summaries of the branch's commits since the subtask started,
    oldest first; `diffstat` is git's summary of the change they make together.
    """
    earlier = view.attempts[:-1]
    if not earlier:
        return ""
    lines = [_attempt_line(a, after) for a, after in zip(earlier, view.attempts[1:], strict=True)]
    if commits:
        shown = list(commits[-MAX_COMMITS:])
        more = len(commits) - len(shown)
        lines += ["", "Its branch already holds this work, oldest first:", ""]
        lines += ([f"  ({more} earlier commits)"] if more else []) + [f"  {c}" for c in shown]
        if diffstat:
            lines += ["", f"  {diffstat}"]
        lines += ["", "Build on it: it is in your worktree now."]
    else:
        lines += ["", "None of their work is on the branch: you start from the subtask's base."]
    return "\n".join(lines)
