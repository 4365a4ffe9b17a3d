"""Conflict resolution by an agent, bounded and honest (`resolve_conflicts` in plan.md).

Pure: which conflicted subtasks get an attempt at resolving, what their agent is told, and
the mechanical check of what it made. The check never trusts the agent's word that both
sides survived: for each conflicted path, every hunk each side made relative to the merge
base is looked for in the resolved file, and one whose added lines are not all there was
dropped; the lines it lacks, and only those, are shown as the evidence. A dropped hunk is
refused unless the agent named it, and said why, in a file of its own (EXPLANATION_FILE):
a resolution is never silently lossy.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core import events as ev
from orchestrator.core.inert_text import markdown_block, markdown_code, markdown_text
from orchestrator.core.reasons import Reason, ReasonCode, sentence_or_none
from orchestrator.core.state import ExecutionState
from orchestrator.core.views import TERMINAL, SubtaskView

#: Where, at the root of its worktree, the agent names each hunk it dropped, and why: read
#: and removed by the commit step, never committed.
EXPLANATION_FILE = "KAIRO-DROPPED-HUNKS.md"
#: Bounds of what the prompt and the log hold of the diffs (lines of a side's diff for one
#: path; characters of a resolution's whole diff; lines of a hunk shown as evidence).
SIDE_DIFF_LINES = 40
RESOLUTION_DIFF_CHARS = 8000
EVIDENCE_LINES = 3
_MARKERS = ("<<<<<<< ", ">>>>>>> ", "<<<<<<<\n", ">>>>>>>\n")


@dataclass(frozen=True)
class Hunk:
    """What one side changed of the base: base lines [base_start, base_end) became its
    lines [start, end) (0-based, end excluded)."""

    base_start: int
    base_end: int
    start: int
    end: int


def hunks(base: Sequence[str], side: Sequence[str]) -> list[Hunk]:
    matcher = difflib.SequenceMatcher(a=base, b=side, autojunk=False)
    return [Hunk(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _missing(lines: Sequence[str], resolved: Counter[str]) -> list[str]:
    """The lines (blank ones aside) that `resolved` (the result's lines, counted) lacks,
    trailing whitespace aside: one there is not dropped, wherever it stands."""
    left = Counter(resolved)
    missing = []
    for line in lines:
        key = line.rstrip()
        if not key.strip():
            continue
        if left[key]:
            left[key] -= 1
        else:
            missing.append(line)
    return missing


def dropped_hunks(
    path: str, base: str, ours: str, theirs: str, resolved: str
) -> tuple[ev.DroppedHunk, ...]:
    """The hunks of either side some of whose added lines the resolution lacks, each with
    those lines as its evidence (never one the result holds). A hunk that only deleted
    lines adds none, and is never counted dropped (its deletion undone is a change a
    reviewer sees in the resolution's diff, which the report shows); nor is one whose lines
    the resolution moved (the diff shows that too)."""
    base_lines = base.splitlines()
    resolved_lines = Counter(line.rstrip() for line in resolved.splitlines())
    dropped = []
    for side, text in (("ours", ours), ("theirs", theirs)):
        lines = text.splitlines()
        for hunk in hunks(base_lines, lines):
            missing = _missing(lines[hunk.start : hunk.end], resolved_lines)
            if not missing:
                continue
            dropped.append(
                ev.DroppedHunk(
                    path=path,
                    side=side,  # type: ignore[arg-type]
                    start=hunk.start + 1,
                    end=hunk.end,
                    lines=tuple(missing[:EVIDENCE_LINES]),
                )
            )
    return tuple(dropped)


def has_markers(text: str) -> bool:
    return any(line.startswith(_MARKERS) for line in text.splitlines(keepends=True))


def unexplained(dropped: Sequence[ev.DroppedHunk], explanation: str) -> tuple[str, ...]:
    """Labels of the dropped hunks the explanation does not name on a line that also says
    something more (why)."""
    lines = explanation.splitlines()
    missing = []
    for hunk in dropped:
        said = [line for line in lines if hunk.label in line]
        if not any(len(line.replace(hunk.label, "").strip(" -*:`")) >= 3 for line in said):
            missing.append(hunk.label)
    return tuple(missing)


def refusal(check: ev.ResolutionCheck) -> Reason | None:
    """Why the resolution cannot be accepted as it is, if it cannot."""
    if check.merge_missing:
        return Reason(
            code=ReasonCode.RESOLUTION_UNFINISHED,
            detail=f"the merge of {check.merged_in[:12]} was not completed (aborted, or undone)",
        )
    if check.unfinished:
        return Reason(
            code=ReasonCode.RESOLUTION_UNFINISHED,
            detail="conflict markers or unmerged entries are left in "
            + ", ".join(check.unfinished),
        )
    if check.unexplained:
        return Reason(
            code=ReasonCode.RESOLUTION_DROPPED_CHANGES,
            detail="the resolution drops changed lines it does not explain in "
            f"{EXPLANATION_FILE}: " + "; ".join(check.unexplained),
        )
    return None


# What decide asks.


def awaiting_resolution(state: ExecutionState, view: SubtaskView) -> bool:
    """Conflicted, opted in, with resolution attempts left, and not declined one."""
    return (
        view.state == "conflicted"
        and not view.resolution_declined
        and view.worktree is not None
        and view.resolution_attempts < state.spec(view.id).resolve_attempts
    )


def ended_unmerged(state: ExecutionState, view: SubtaskView) -> bool:
    """Ended without merging, for good: its dependents are skipped (one conflicted with a
    resolution to come may merge yet, as may one that conflicted with merges still to be
    checked, which may be undone)."""
    return (
        view.state in TERMINAL
        and view.state != "merged"
        and not awaiting_resolution(state, view)
        and view.id not in state.conflicted_unchecked
    )


def last_resolution(view: SubtaskView) -> ev.ResolutionStarted | None:
    return next((a.resolution for a in reversed(view.attempts) if a.resolution), None)


# What the agent is told.


def conflict_section(
    started: ev.ResolutionStarted,
    merged_sides: Mapping[str, str],
    labels: Mapping[str, Sequence[str]],
) -> str:
    """The prompt's account of the conflict: each path, the subtasks it collides with,
    what they changed there (`merged_sides`: the integration side's diff of the path,
    bounded), every hunk by the label it must be named by if dropped, and the rules."""
    parts = [
        "## Merge conflicts to resolve",
        "",
        f"Your work conflicts with the integration branch ({started.merged_in[:12]}), which "
        "holds other subtasks' merged work. It is merged into your worktree now, with the "
        "conflict markers left in these files. Resolve every conflict so that both your "
        "changes and theirs are kept, remove every marker, and leave the merge for the "
        "supervisor to commit (do not commit, do not abort the merge).",
    ]
    size, left_out, unlisted = 0, False, 0
    for conflict in started.conflicts:
        who = ", ".join(conflict.with_) or "work merged earlier"
        header = ["", f"### {conflict.path} ({conflict.kind}), collides with: {who}", ""]
        if size + _chars(header) > SECTION_CHARS + PATHS_CHARS:
            unlisted += 1
            continue
        side = merged_sides.get(conflict.path, "").rstrip("\n")
        listed = labels.get(conflict.path, ())
        detail = []
        if side:
            detail += ["What the integration branch changed there:", "```diff", side, "```"]
        if listed:
            detail += ["The hunks of both sides, as they must be named if one is dropped:"]
            detail += [f"- `{label}`" for label in listed]
        # The prompt travels in the agent's environment too, where exec refuses more than
        # 128 KiB: past the bound, the paths alone, and where to look.
        if size + _chars(header) + _chars(detail) > SECTION_CHARS:
            left_out, detail = True, []
        parts += header + detail
        size += _chars(header) + _chars(detail)
    if left_out:
        parts += [
            "",
            "The paths listed without their diff were left out of this prompt, which is long "
            "enough: `git diff HEAD...MERGE_HEAD -- PATH` shows what the integration branch "
            "changed in PATH.",
        ]
    if unlisted:
        parts += [
            "",
            f"And {unlisted} more conflicted path(s): `git diff --name-only --diff-filter=U` "
            "lists every one.",
        ]
    parts += [
        "",
        "Every line either side added must survive your resolution; it is checked. If one "
        f"cannot, write the file {EXPLANATION_FILE} at the root of the worktree (it is not "
        "committed) with one line for each hunk you dropped: its name as listed above and "
        "why. A resolution that drops a hunk it does not name there is refused.",
    ]
    return "\n".join(parts) + "\n"


def hunk_labels(path: str, base: str, ours: str, theirs: str) -> list[str]:
    """Every hunk of both sides of `path`, by the label a dropped one is named by."""
    labels = []
    for side, text in (("ours", ours), ("theirs", theirs)):
        for hunk in hunks(base.splitlines(), text.splitlines()):
            if hunk.end > hunk.start:
                labels.append(f"{side} {path}:{hunk.start + 1}-{hunk.end}")
    return labels


#: What the conflicts' diffs and hunks take of the prompt at most, and then their paths.
SECTION_CHARS = 32 * 1024
PATHS_CHARS = 16 * 1024


def _chars(lines: Sequence[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def bounded(diff: str, limit: int = SIDE_DIFF_LINES) -> str:
    lines = diff.splitlines()
    if len(lines) <= limit:
        return diff
    return "\n".join([*lines[:limit], f"... ({len(lines) - limit} more lines)"])


# What status and report show.


def resolutions(view: SubtaskView) -> list[dict[str, Any]]:
    """Every attempt at resolving a conflict of the subtask: what collided, with whom, its
    outcome and why, what it dropped and the agent's word on it, and its diff."""
    shown = []
    for attempt in view.attempts:
        started, check = attempt.resolution, attempt.resolution_check
        if started is None:
            continue
        if attempt.interrupted:
            outcome = "interrupted"
        elif attempt.accepted is None:
            outcome = "running"
        else:
            outcome = "accepted" if attempt.accepted else "refused"
        shown.append(
            {
                "subtask": view.id,
                "attempt": attempt.number,
                "merged_in": started.merged_in,
                "conflicts": [c.document() for c in started.conflicts],
                "outcome": outcome,
                "reason": sentence_or_none(attempt.reason),
                "commit": attempt.head_commit if check is not None else None,
                "unfinished": list(check.unfinished) if check else [],
                "dropped": [
                    {"hunk": hunk.label, "lines": list(hunk.lines)} for hunk in check.dropped
                ]
                if check
                else [],
                "unexplained": list(check.unexplained) if check else [],
                "explanation": check.explanation if check else "",
                "diff": check.diff if check else "",
            }
        )
    return shown


def resolutions_markdown(shown: Sequence[dict[str, Any]]) -> list[str]:
    """The report's section: every resolution, its diff whole (bounded when recorded)."""
    if not shown:
        return []
    lines = ["", "## Conflict resolutions", ""]
    for item in shown:
        paths = ", ".join(
            f"{markdown_code(c['path'])} with {', '.join(c['with']) or 'merged work'}"
            for c in item["conflicts"]
        )
        why = f": {markdown_text(item['reason'])}" if item["reason"] else ""
        lines.append(
            f"- **{item['subtask']}** attempt {item['attempt']}, {paths}: {item['outcome']}{why}"
        )
        if item["commit"]:
            lines.append(f"  - resolution commit `{item['commit'][:12]}`")
        for hunk in item["dropped"]:
            said = " (not explained)" if hunk["hunk"] in item["unexplained"] else ""
            lines.append(f"  - dropped {markdown_code(hunk['hunk'])}{said}")
        if item["explanation"].strip():
            lines += [
                "  - the agent's explanation:",
                "",
                *markdown_block(item["explanation"].rstrip()),
            ]
        if item["diff"].strip():
            lines += ["", *markdown_block(item["diff"].rstrip(), info="diff"), ""]
    return lines
