"""What the scripted model makes Claude Code and Codex do on a slot of the project: read,
edit, break, run the suite, say it is done, each a reply a model turn.

A `Turns` is a list of replies, one a model turn; `rules` makes them rules, counted from
the prompt or, with `since`, from the message that sent an attempt back.
"""

from __future__ import annotations

from dataclasses import replace

from tests.completion.project import SUITE, Slot
from tests.model_server import (
    Reply,
    Rule,
    Usage,
    apply_patch,
    bash,
    edit,
    exec_command,
    read,
    update_patch,
)

Turns = list[Reply]

#: What kairo-orch's message to a continued session starts with (agents/base.py).
FEEDBACK = "Feedback on your previous attempt"
NEED_CONTEXT = "I need more context before I can do this."


def usage(turn: int) -> Usage:
    """What each model turn reports using: a prompt that grows a little each turn."""
    return Usage(input_tokens=1000 + 100 * turn, output_tokens=40 + turn)


def rules(
    steps: Turns, *, since: str | None = None, first_says: str | None = None
) -> tuple[Rule, ...]:
    """One rule a turn (counted from the message that held `since`, if given), each with
    its turn's usage; with `first_says`, the first applies only when the message it answers
    holds those words (the feedback must have said them)."""
    return tuple(
        Rule(
            replace(step, usage=step.usage if step.usage != Usage() else usage(turn)),
            turn=turn,
            since=since,
            last_contains=first_says if turn == 1 else None,
        )
        for turn, step in enumerate(steps, 1)
    )


def done(slot: Slot) -> Reply:
    return Reply(text=f"Renamed {slot.old} to {slot.new}; the tests pass.")


# --- Claude Code ---------------------------------------------------------------------------


def read_all(slot: Slot) -> Reply:
    return Reply(text="Let me read the code.", tools=tuple(read(p) for p in slot.owned))


def rename_in(slot: Slot, path: str) -> Reply:
    """The rename in one file, by Edit of its whole text (the file was Read first)."""
    return Reply(tools=(edit(path, slot.files(slot.old)[path], slot.files(slot.new)[path]),))


def rename_def(slot: Slot) -> Reply:
    """Only the definition: every use of the old name is left, the suite fails."""
    return Reply(tools=(edit(slot.module, f"def {slot.old}(n):", f"def {slot.new}(n):"),))


def run_suite() -> Reply:
    return Reply(tools=(bash(SUITE),))


def claude_rename(slot: Slot) -> Turns:
    """The whole task: read, edit every file of the slot in one turn, run the suite, done."""
    edits = tuple(call for path in slot.owned for call in rename_in(slot, path).tools)
    return [read_all(slot), Reply(tools=edits), run_suite(), done(slot)]


# --- Codex ---------------------------------------------------------------------------------


def codex_read(slot: Slot) -> Reply:
    return Reply(tools=(exec_command(f"cat {' '.join(slot.owned)}"),))


def codex_rename_def(slot: Slot) -> Reply:
    patch = update_patch(slot.module, f"def {slot.old}(n):", f"def {slot.new}(n):")
    return Reply(tools=(apply_patch(patch),))


def codex_rename_uses(slot: Slot) -> Reply:
    return Reply(tools=(exec_command(f"sed -i 's/{slot.old}/{slot.new}/g' {slot.test}"),))


def codex_rename(slot: Slot) -> Turns:
    return [
        codex_read(slot),
        codex_rename_def(slot),
        codex_rename_uses(slot),
        Reply(tools=(exec_command(SUITE),)),
        done(slot),
    ]
