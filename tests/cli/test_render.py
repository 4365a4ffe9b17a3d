"""`status` and the live view as a terminal gets them: an agent's text is shown, never
acted on, neither as an escape sequence nor as rich's markup (whose `[link=...]` writes
a hyperlink's OSC 8)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from orchestrator.cli import render

PLANTED = "[link=http://evil.example]click[/link] [red]x[/] \x1b]52;c;cHduZWQK\x07 \u202eevil"


def drawn(*renderables: Any) -> str:
    out = io.StringIO()
    # As render.console() makes it, on a terminal.
    console = Console(file=out, force_terminal=True, highlight=False, width=400)
    for renderable in renderables:
        console.print(renderable)
    return out.getvalue()


def test_an_agents_text_reaches_the_terminal_as_text() -> None:
    subtask = {
        "id": "a",
        "state": "failed",
        "attempts": 1,
        "tokens": 0,
        "reason": f"agent_failed: {PLANTED}",
        "conflicts": [],
        "worktree": f"/w/{PLANTED}",
    }
    document = {
        "plan": "p",
        "execution_id": "01JD8XXXXXXXXXXXXXXXXXXXXX",
        "status": "FAILED",
        "integration_branch": f"kairo/{PLANTED}",
        "base_commit": "b" * 40,
        "tmux_session": "kairo-p-xxxxxx",
    }
    terminal = drawn(render.status_header(document), render.status_table([subtask]))
    assert "\x1b]" not in terminal and "\x07" not in terminal and "\u202e" not in terminal
    shown = r"[link=http://evil.example]click[/link] [red]x[/] \x1b]52;c;cHduZWQK\x07 \u202eevil"
    assert terminal.count(shown) == 3  # the branch, the reason and the worktree, as written
