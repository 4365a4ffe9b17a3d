"""The merge report: what merged, what conflicted and with what, what failed and why.

Built from the folded state alone, so `kairo-orch report` says the same thing whether the
execution is running, ended or long gone. `to_markdown` is fit to be a pull request body.
"""

from __future__ import annotations

from typing import Any

from orchestrator.core.conflict_map import conflict_map_lines
from orchestrator.core.continuation import api_failure, refusals_in_words
from orchestrator.core.dag import merge_order
from orchestrator.core.guard import NOTHING_RESTORED, breach_documents, breach_lines
from orchestrator.core.inert_text import markdown_block, markdown_code, markdown_text
from orchestrator.core.overlaps import overlap_documents, some_sentences
from orchestrator.core.reasons import sentence_or_none
from orchestrator.core.resolution import resolutions, resolutions_markdown
from orchestrator.core.state import ExecutionState
from orchestrator.core.status import last_output, output_of, written_by_others
from orchestrator.core.views import AttemptView, SubtaskView


def build_report(state: ExecutionState, status: str) -> dict[str, Any]:
    created = state.created
    order = merge_order(state.plan)
    views = [state.subtask(subtask_id) for subtask_id in order]

    def entry(view: SubtaskView) -> dict[str, Any]:
        spec = state.spec(view.id)
        return {"id": view.id, "title": spec.title, "branch": view.branch}

    merged = [
        {
            **entry(v),
            "merge_commit": v.merge.merge_commit,
            "head_commit": v.merge.head_commit,
            "diffstat": v.merge.diffstat,
            "insertions": v.merge.insertions,
            "deletions": v.merge.deletions,
            "changed_paths": list(v.merge.changed_paths),
        }
        for v in (state.subtask(sid) for sid in state.merged)
        if v.merge is not None
    ]
    conflicted = [
        {
            **entry(v),
            "worktree": v.worktree,
            "conflicts": [c.document() for c in v.conflicts],
            "output": last_output(v),
        }
        for v in views
        if v.state == "conflicted"
    ]
    unfinished = [
        {
            **entry(v),
            "state": v.state,
            "reason": sentence_or_none(v.reason),
            "worktree": v.worktree,
            "output_tail": _output_tail(v),
            "output": last_output(v),
        }
        for v in views
        if v.state in ("failed", "skipped", "stopped")
    ]
    report: dict[str, Any] = {
        "execution_id": state.execution_id,
        "plan": state.plan.name,
        "status": status,
        "base_commit": created.base_commit,
        "integration_branch": created.integration_branch,
        "integration_head": state.integration_head,
        "run_root": created.run_root,
        "merged": merged,
        "conflicted": conflicted,
        "failed": [u for u in unfinished if u["state"] == "failed"],
        "skipped": [u for u in unfinished if u["state"] == "skipped"],
        "stopped": [u for u in unfinished if u["state"] == "stopped"],
        "pending": [v.id for v in views if v.state not in _REPORTED],
        **_checks(state),
        "usage": {
            "tokens": sum(v.tokens for v in views),
            "cost_usd": round(sum(v.cost_usd for v in views), 6),
            "subtasks": {
                v.id: {
                    "tokens": v.tokens,
                    "input_tokens": v.input_tokens,
                    "output_tokens": v.output_tokens,
                    "cost_usd": v.cost_usd,
                    "attempts": len(v.attempts),
                    # each attempt's agent session, and the earlier one it continued
                    "sessions": [
                        {"session_id": a.session_id, "resumed": a.resumed_session}
                        for a in v.attempts
                    ],
                }
                for v in views
            },
        },
        "attempts": {v.id: [_attempt(a) for a in v.attempts] for v in views if v.attempts},
        "review": [
            {"step": r.step, "exit_code": r.exit_code, "output_tail": _last_lines(r.output_tail)}
            for r in state.review.values()
            if r is not None
        ],
    }
    if state.anomalies:  # only then, as in status.py
        report["anomalies"] = [anomaly.sentence() for anomaly in state.anomalies]
    resolved = [r for v in views for r in resolutions(v)]
    if resolved:  # only where `resolve_conflicts` had an agent resolve a conflict
        report["resolutions"] = resolved
    if state.overlaps:
        report["overlaps"] = overlap_documents(state)
    if written := written_by_others(state):
        report["written_by_others"] = written
    if state.breaches:
        report["breaches"] = breach_documents(state.breaches)
    return report


TAIL_LINES = 12


def _checks(state: ExecutionState) -> dict[str, Any]:
    """How often `integration_verify` ran, where it did: merges are checked in batches."""
    if not state.checks_run:
        return {}
    return {"integration_checks": {"runs": state.checks_run, "batch": state.plan.integration_batch}}


def _attempt(attempt: AttemptView) -> dict[str, Any]:
    """What one attempt went through, as the agent program said and the gates judged."""
    return {
        "attempt": attempt.number,
        "accepted": attempt.accepted,
        "reason": sentence_or_none(attempt.reason),
        "result": attempt.result,
        "tokens": attempt.tokens,
        "api_retries": attempt.api_retries,
        "api_status": attempt.api_status,
        "api_error": api_failure(attempt),
        "refusals": refusals_in_words(attempt),
        "in_submodules": list(attempt.in_submodules),
        "resumed_session": attempt.resumed_session,
        "output": output_of(attempt),
    }


def _eventful(attempt: dict[str, Any]) -> bool:
    return bool(
        attempt["accepted"] is False
        or attempt["api_retries"]
        or attempt["refusals"]
        or attempt["in_submodules"]
    )


def _output_tail(view: SubtaskView) -> str:
    """The last lines that explain a failure: the integration check's output, else the
    verify gate's, else the agent's."""
    attempt = view.current_attempt
    if view.integration_output:
        text = view.integration_output
    elif attempt is None:
        return ""
    else:
        text = attempt.verify_output_tail if attempt.verify_exit_code else attempt.output_tail
    return _last_lines(text)


def _last_lines(text: str) -> str:
    return "\n".join(text.rstrip().splitlines()[-TAIL_LINES:])


_REPORTED = frozenset({"merged", "conflicted", "failed", "skipped", "stopped"})


#: A report is read as a pull request's description, which has a size limit (GitHub's:
#: 65,536 characters): a plan of a thousand lists its first merges and counts the rest.
#: What went wrong (conflicts, failures) is always listed whole.
MERGES_LISTED = 200
IN_A_LINE = 20  # subtasks named in one line (the largest spenders first)
OVERLAPS_LISTED = 50


def _some(items: list[str], most: int) -> str:
    shown = ", ".join(items[:most])
    return f"{shown} and {len(items) - most:,} more" if len(items) > most else shown


def to_markdown(report: dict[str, Any]) -> str:
    """The report as a pull request's body. Every text that came from an agent, a
    repository or the plan's free text goes through core/inert_text.py, so that the page
    hides nothing and reads nothing of it as markup; ids need none (the plan allows them
    letters, digits, '.', '_' and '-' only)."""
    lines = [
        f"# kairo-orch: {report['plan']}",
        "",
        f"Execution `{report['execution_id']}` is **{report['status']}**. "
        f"Integration branch {markdown_code(report['integration_branch'])} "
        f"(from base `{report['base_commit'][:12]}`).",
        "",
        f"- merged: {len(report['merged'])}",
        f"- conflicted: {len(report['conflicted'])}",
        f"- failed: {len(report['failed'])}",
        f"- skipped: {len(report['skipped'])}",
    ]
    if report["stopped"]:
        lines.append(f"- stopped: {len(report['stopped'])}")
    if report["pending"]:
        lines.append(f"- not finished yet: {_some(report['pending'], IN_A_LINE)}")
    usage = report["usage"]
    if usage["tokens"] or usage["cost_usd"]:
        cost = f" (${usage['cost_usd']:.2f})" if usage["cost_usd"] else ""
        spenders = sorted(usage["subtasks"].items(), key=lambda item: -item[1]["tokens"])
        spent = [f"{sid} {u['tokens']:,}" for sid, u in spenders if u["tokens"]]
        lines.append(f"- tokens: {usage['tokens']:,}{cost}: {_some(spent, IN_A_LINE)}")
    if "integration_checks" in report:
        checks = report["integration_checks"]
        lines.append(
            f"- `integration_verify` ran {checks['runs']} time(s), on batches of up to "
            f"{checks['batch']} merges"
        )
    if report["attempts"]:
        outputs = f"{report['run_root']}/<subtask>/<attempt>/output.log"
        lines.append(f"- agent output: {markdown_code(outputs)}")
    if report.get("breaches"):  # first: it is what a reviewer must know before anything
        lines += ["", "## Changes to what you own, found by the guard", ""]
        lines += breach_lines(report["breaches"])
        lines += ["", NOTHING_RESTORED]
    if report["merged"]:
        lines += ["", "## Merged", ""]
        for item in report["merged"][:MERGES_LISTED]:
            title = f" ({markdown_text(item['title'])})" if item["title"] != item["id"] else ""
            lines.append(
                f"- **{item['id']}**{title}: {markdown_text(item['diffstat'] or 'no file changes')}"
                f" — merge `{item['merge_commit'][:12]}`"
            )
        more = len(report["merged"]) - MERGES_LISTED
        if more > 0:
            every = (
                f"git log --first-parent --oneline "
                f"{report['base_commit'][:12]}..{report['integration_branch']}"
            )
            lines.append(
                f"- and {more:,} more: {markdown_code(every)} lists every merge, "
                "`kairo-orch report --json` every subtask"
            )
    if report["conflicted"]:
        lines += ["", "## Conflicts", ""]
        for item in report["conflicted"]:
            lines.append(f"- **{item['id']}** on branch {markdown_code(item['branch'])}:")
            for conflict in item["conflicts"]:
                others = ", ".join(f"`{w}`" for w in conflict["with"]) or "the base"
                path, kind = markdown_code(conflict["path"]), markdown_text(conflict["kind"])
                lines.append(f"  - {path} ({kind}) with {others}")
            if item["worktree"]:
                lines.append(f"  - worktree kept at {markdown_code(item['worktree'])}")
            if item["output"]:
                lines.append(f"  - agent output in {markdown_code(item['output'])}")
    lines += resolutions_markdown(report.get("resolutions", []))
    for title, key in (("Failed", "failed"), ("Skipped", "skipped"), ("Stopped", "stopped")):
        if report[key]:
            lines += ["", f"## {title}", ""]
            for item in report[key]:
                where = f" (worktree {markdown_code(item['worktree'])})" if item["worktree"] else ""
                lines.append(f"- **{item['id']}**: {markdown_text(item['reason'] or '')}{where}")
                if item["output"]:
                    lines.append(f"  - agent output in {markdown_code(item['output'])}")
                if item["output_tail"]:
                    lines += ["", *markdown_block(item["output_tail"], indent="  ")]
    eventful = {
        sid: [a for a in attempts if _eventful(a)] for sid, attempts in report["attempts"].items()
    }
    if any(eventful.values()):
        lines += ["", "## What the agents went through", ""]
        for sid, attempts in eventful.items():
            for attempt in attempts:
                said = markdown_text(_went_through(attempt))
                lines.append(f"- **{sid}** attempt {attempt['attempt']}: {said}")
    if report.get("anomalies"):
        lines += ["", "## Moves the subtask lifecycle does not allow", ""]
        lines += [f"- {markdown_text(anomaly)}" for anomaly in report["anomalies"]]
        lines += [
            "",
            "The log holds them (written before kairo-orch checked its moves, or edited by "
            "hand): what this report says is what the log says, as written.",
        ]
    if report.get("written_by_others"):
        lines += ["", "## Records of the agents' runners that another process wrote", ""]
        lines += [f"- {markdown_text(said)}" for said in report["written_by_others"]]
    if report.get("overlaps"):
        lines += ["", "## Overlaps seen while the agents worked", ""]
        overlaps = some_sentences(report["overlaps"], OVERLAPS_LISTED)
        lines += [f"- {markdown_text(sentence)}" for sentence in overlaps]
    if report.get("conflict_map"):
        lines += ["", "## Conflict map", "", *conflict_map_lines(report["conflict_map"])]
    if report["review"]:
        lines += ["", "## Push and pull request", ""]
    for item in report["review"]:
        what = "push" if item["step"] == "push" else "pull request"
        lines.append(f"- {what}: {_review_outcome(item['exit_code'])}")
        if item["output_tail"]:
            lines += ["", *markdown_block(item["output_tail"], indent="  ")]
    base, branch = report["base_commit"][:12], report["integration_branch"]
    review = f"git log --oneline --graph {base}..{branch}\ngit diff {base}...{branch}"
    lines += ["", "## Review", "", *markdown_block(review, info="sh"), ""]
    return "\n".join(lines)


def _went_through(attempt: dict[str, Any]) -> str:
    said = []
    if attempt["accepted"] is False:
        said.append(f"not accepted: {attempt['reason']}" if attempt["reason"] else "not accepted")
    if attempt["api_error"]:
        if attempt["accepted"] is not False:  # a rejected one's reason says it already
            said.append(attempt["api_error"])
    elif attempt["api_retries"]:
        said.append(f"its program retried the API {attempt['api_retries']} time(s)")
    said += [r for r in attempt["refusals"] if r not in (attempt["reason"] or "")]
    said += [
        f"it wrote inside the submodule {path}, which no commit records"
        for path in attempt["in_submodules"]
        if path not in (attempt["reason"] or "")
    ]
    return "; ".join(said)


def _review_outcome(exit_code: int | None) -> str:
    if exit_code is None:
        return "not done"
    return "done" if exit_code == 0 else f"failed (exit status {exit_code})"
