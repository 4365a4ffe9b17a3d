"""The live view's pages: a thousand subtasks do not fit a tmux pane, so the view shows
what matters first and pages through the rest. Pure: no terminal, no store.

The order: subtasks at work (preparing, running, verifying, integrating), then those
whose state changed while the view watched, the latest first, then the rest: those that
need a look (failed, conflicted, stopped, skipped) first, then in the plan's order
(pending ones, and ended ones the view saw no change of).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, get_args

from orchestrator.core.overlaps import some_sentences
from orchestrator.core.views import ACTIVE, SubtaskStateName

_NEEDS_A_LOOK = frozenset({"failed", "conflicted", "stopped", "skipped"})
# At work: holding a place, or merged and under its integration check.
_AT_WORK = ACTIVE | {"integrating"}


@dataclass(frozen=True)
class Page:
    subtasks: list[dict[str, Any]]  # the rows of `status --json` on this page, in order
    number: int  # from 1
    pages: int
    counts: str  # "1,024 subtasks: 32 running, 500 merged, ..."


@dataclass
class Pager:
    """Which page the view shows, and when each subtask last changed state under it."""

    page: int = 0
    looks: int = 0
    _states: dict[str, str] = field(default_factory=dict)
    _changed: dict[str, int] = field(default_factory=dict)  # subtask -> look of its change

    def turn(self, by: int) -> None:
        self.page += by  # kept within the pages when the next page is cut

    def cut(self, document: dict[str, Any], rows: int) -> Page:
        """The page to show of `document` (as `status --json`), `rows` subtasks to a page."""
        self.looks += 1
        items = document["subtasks"]
        for item in items:
            if self._states.get(item["id"], item["state"]) != item["state"]:
                self._changed[item["id"]] = self.looks
            self._states[item["id"]] = item["state"]
        ordered = sorted(enumerate(items), key=lambda pair: self._rank(pair[0], pair[1]))
        rows = max(1, rows)
        pages = max(1, -(-len(items) // rows))
        self.page = min(max(self.page, 0), pages - 1)
        start = self.page * rows
        shown = [item for _, item in ordered[start : start + rows]]
        return Page(shown, self.page + 1, pages, counts(items))

    def _rank(self, index: int, item: dict[str, Any]) -> tuple[int, int, int, int]:
        state = item["state"]
        if state in _AT_WORK:
            return (0, 0, 0, index)
        changed = self._changed.get(item["id"])
        if changed is not None:
            return (1, -changed, 0, index)
        return (2, 0, 0 if state in _NEEDS_A_LOOK else 1, index)


def counts(items: list[dict[str, Any]]) -> str:
    by_state = Counter(item["state"] for item in items)
    said = ", ".join(
        f"{by_state[state]:,} {state}" for state in get_args(SubtaskStateName) if by_state[state]
    )
    noun = "subtask" if len(items) == 1 else "subtasks"
    return f"{len(items):,} {noun}: {said}" if said else f"{len(items):,} {noun}"


#: Overlaps the live view names, the latest first, on its one line of them.
OVERLAPS_IN_VIEW = 3


def overlap_line(document: dict[str, Any]) -> str | None:
    """The live view's line of overlaps seen while agents work (core/overlaps.py), the
    latest first; None while there is none."""
    overlaps = document.get("overlaps", [])
    if not overlaps:
        return None
    return "overlaps: " + "; ".join(some_sentences(overlaps[::-1], OVERLAPS_IN_VIEW))
