"""docs/architecture.md names every event and every command the code has: a new one is
documented where the next maintainer looks."""

from __future__ import annotations

import typing
from pathlib import Path

from orchestrator.core import commands as cmd
from orchestrator.core import events as ev

DOC = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text(
    encoding="utf-8"
)


def test_every_event_type_is_in_the_event_table() -> None:
    types = [
        typing.get_args(model.model_fields["type"].annotation)[0]
        for model in typing.get_args(typing.get_args(ev.ExecutionEvent)[0])
    ]
    assert len(types) > 20
    assert [t for t in types if f"| `{t}` |" not in DOC] == []


def test_every_command_is_in_the_command_table() -> None:
    commands = [c.__name__ for c in cmd.Command.__subclasses__()]
    assert len(commands) > 10
    assert [c for c in commands if f"| `{c}` |" not in DOC] == []
