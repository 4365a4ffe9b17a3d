"""The HTML report's "Overlaps and conflict map" and "Conflict resolutions" sections, from
plain data.

`overlaps_section` knows nothing of events or state: the page passes it the conflicts of
the subtasks that ended conflicted (`conflicts_of`: those the header counts; a conflict an
agent resolved is in `resolutions_section`), and may pass overlap warnings and a map of
which subtasks changed each path where it has them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.inert_text import html_text


@dataclass(frozen=True)
class ConflictItem:
    """One path of one conflicted subtask: git's kind, and the merged subtasks it met."""

    subtask: str
    path: str
    kind: str
    with_: tuple[str, ...] = ()
    message: str = ""


@dataclass(frozen=True)
class OverlapItem:
    """Subtasks whose work touched the same paths, warned of before any merge."""

    subtasks: tuple[str, ...]
    paths: tuple[str, ...]
    note: str = ""


def conflicts_of(subtasks: Iterable[Mapping[str, Any]]) -> list[ConflictItem]:
    """The conflicts of status --json's (or report --json's) subtask entries."""
    return [
        ConflictItem(
            subtask=entry["id"],
            path=conflict["path"],
            kind=conflict["kind"],
            with_=tuple(conflict.get("with", ())),
            message=conflict.get("message", ""),
        )
        for entry in subtasks
        for conflict in entry.get("conflicts", ())
    ]


def map_of(conflicts: Sequence[ConflictItem]) -> dict[str, list[str]]:
    """Each conflicted path, and the subtasks it involves (the conflicted one first)."""
    paths: dict[str, list[str]] = {}
    for item in conflicts:
        involved = paths.setdefault(item.path, [])
        for subtask in (item.subtask, *item.with_):
            if subtask not in involved:
                involved.append(subtask)
    return paths


def resolutions_section(resolutions: Sequence[Mapping[str, Any]]) -> str:
    """report --json's `resolutions`, as the Markdown's "Conflict resolutions": each attempt
    at resolving a conflict, what collided with whom, its outcome and why, its commit, the
    hunks it dropped (with the lines missing from the result), the agent's explanation and
    the resolution's diff. Nothing where no agent resolved a conflict."""
    if not resolutions:
        return ""
    parts = ['<section id="resolutions"><h2>Conflict resolutions</h2>']
    for item in resolutions:
        sid, outcome = html_text(item["subtask"]), html_text(item["outcome"])
        why = f": {html_text(item['reason'])}" if item["reason"] else ""
        parts.append(
            f'<div class="resolution" data-subtask="{sid}" data-attempt="{item["attempt"]}"'
            f' data-outcome="{outcome}"><h3><span class="mono">{sid}</span> attempt '
            f'{item["attempt"]}: <span class="outcome o-{outcome}">{outcome}</span>{why}</h3>'
        )
        parts.append(
            '<table class="resolved-conflicts"><thead><tr><th>path</th><th>kind</th>'
            "<th>with</th></tr></thead><tbody>"
        )
        for conflict in item["conflicts"]:
            others = ", ".join(conflict["with"]) or "merged work"
            parts.append(
                f"<tr><td><code>{html_text(conflict['path'])}</code></td>"
                f'<td>{html_text(conflict["kind"])}</td><td class="mono">{html_text(others)}'
                "</td></tr>"
            )
        parts.append("</tbody></table>")
        merged_in = html_text(item["merged_in"][:12])
        commit = (
            f", resolution commit <code>{html_text(item['commit'][:12])}</code>"
            if item["commit"]
            else ""
        )
        parts.append(f'<p class="muted">Integration head <code>{merged_in}</code>{commit}.</p>')
        if item["dropped"]:
            parts.append('<ul class="dropped">')
            for hunk in item["dropped"]:
                said = " (not explained)" if hunk["hunk"] in item["unexplained"] else ""
                lines = "".join(f"<br><code>{html_text(line)}</code>" for line in hunk["lines"])
                parts.append(
                    f'<li data-hunk="{html_text(hunk["hunk"])}">dropped <code>'
                    f"{html_text(hunk['hunk'])}</code>{said}; missing from the result:"
                    f"{lines}</li>"
                )
            parts.append("</ul>")
        if item["explanation"].strip():
            parts.append(
                "<p>The agent's explanation:</p>"
                f'<pre class="explanation">{html_text(item["explanation"].rstrip(), lines=True)}'
                "</pre>"
            )
        if item["diff"].strip():
            parts.append(
                "<details><summary>its diff against the integration head</summary>"
                f'<pre class="diff">{html_text(item["diff"].rstrip(), lines=True)}</pre>'
                "</details>"
            )
        parts.append("</div>")
    parts.append("</section>")
    return "".join(parts)


def overlaps_section(
    conflicts: Sequence[ConflictItem],
    overlaps: Sequence[OverlapItem] = (),
    conflict_map: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """`conflict_map`: path -> the subtasks that changed it; by default, from `conflicts`."""
    mapped = map_of(conflicts) if conflict_map is None else conflict_map
    parts = ['<section id="conflicts"><h2>Overlaps and conflict map</h2>']
    if not conflicts and not overlaps and not mapped:
        parts.append('<p class="muted">No conflict and no overlap.</p></section>')
        return "".join(parts)
    if conflicts:
        parts.append(
            '<h3>Conflicts</h3><table class="conflicts"><thead><tr><th>subtask</th>'
            "<th>path</th><th>kind</th><th>with</th><th>git said</th></tr></thead><tbody>"
        )
        for item in conflicts:
            others = ", ".join(item.with_) or "the base"
            parts.append(
                f'<tr data-subtask="{html_text(item.subtask)}"><td class="mono">'
                f"{html_text(item.subtask)}</td><td><code>{html_text(item.path)}</code></td>"
                f'<td>{html_text(item.kind)}</td><td class="mono">{html_text(others)}</td>'
                f'<td class="muted">{html_text(item.message)}</td></tr>'
            )
        parts.append("</tbody></table>")
    if overlaps:
        parts.append(
            '<h3>Overlap warnings</h3><table class="overlaps"><thead><tr><th>subtasks</th>'
            "<th>paths</th><th>warning</th></tr></thead><tbody>"
        )
        for overlap in overlaps:
            parts.append(
                f'<tr><td class="mono">{html_text(", ".join(overlap.subtasks))}</td>'
                f"<td><code>{html_text(', '.join(overlap.paths))}</code></td>"
                f'<td class="muted">{html_text(overlap.note)}</td></tr>'
            )
        parts.append("</tbody></table>")
    if mapped:
        parts.append(
            '<h3>Conflict map</h3><table class="map"><thead><tr><th>path</th>'
            "<th>subtasks</th></tr></thead><tbody>"
        )
        for path, subtasks in sorted(mapped.items()):
            parts.append(
                f'<tr data-path="{html_text(path)}"><td><code>{html_text(path)}</code></td>'
                f'<td class="mono">{html_text(", ".join(subtasks))}</td></tr>'
            )
        parts.append("</tbody></table>")
    parts.append("</section>")
    return "".join(parts)
