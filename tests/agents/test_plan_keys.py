"""The agent keys of kinds claude-code, codex and aider in plan.yaml: accepted, merged, and
every mistake reported at its line and column."""

from __future__ import annotations

import pytest

from orchestrator.core.plan import AgentSpec
from orchestrator.core.plan_file import load_plan
from orchestrator.errors import PlanError


def agents_of(text: str) -> dict[str, AgentSpec]:
    return {s.id: s.agent for s in load_plan(text, "plan.yaml", None).plan.subtasks}


def problems(text: str) -> list[str]:
    with pytest.raises(PlanError) as caught:
        load_plan(text, "plan.yaml", None)
    return caught.value.problems


def test_every_key_is_accepted_and_merged_key_by_key() -> None:
    text = (
        "version: 1\n"
        "name: demo\n"
        "agent:\n"
        "  kind: claude-code\n"
        "  binary: /opt/claude\n"
        "  model: sonnet\n"
        "  permission_mode: acceptEdits\n"
        "  extra_args: [--max-turns, '30']\n"
        "subtasks:\n"
        "  - id: inherits\n"
        "  - id: overrides\n"
        "    agent: {model: opus, extra_args: []}\n"
        "  - id: clears\n"
        "    agent: {permission_mode: null, binary: null}\n"
        "  - id: other-kind\n"  # a new kind: the plan's keys were written for claude
        "    agent: {kind: codex, permission_mode: read-only}\n"
        "  - id: aider\n"
        "    agent: {kind: aider, model: gpt-4o, binary: ~/.local/bin/aider}\n"
    )
    claude = AgentSpec(
        kind="claude-code",
        binary="/opt/claude",
        model="sonnet",
        permission_mode="acceptEdits",
        extra_args=("--max-turns", "30"),
    )
    assert agents_of(text) == {
        "inherits": claude,
        "overrides": claude.model_copy(update={"model": "opus", "extra_args": ()}),
        "clears": claude.model_copy(update={"permission_mode": None, "binary": None}),
        "other-kind": AgentSpec(kind="codex", permission_mode="read-only"),
        "aider": AgentSpec(kind="aider", model="gpt-4o", binary="~/.local/bin/aider"),
    }


def test_the_shape_of_each_key_is_checked() -> None:
    text = (
        "version: 1\n"
        "name: demo\n"
        "subtasks:\n"
        "  - id: a\n"
        "    agent: {kind: claude-code, extra_args: --max-turns 30}\n"  # 5
        "  - id: b\n"
        "    agent: {kind: claude-code, extra_args: [--max-turns, 30]}\n"  # 7
        "  - id: c\n"
        "    agent: {kind: codex, model: 5, binary: ''}\n"  # 9
        "  - id: d\n"
        "    agent: {kind: codex, modle: o3}\n"  # 11
    )
    assert problems(text) == [
        "plan.yaml:5:44: subtask 'a': agent.extra_args must be a list of arguments, one item "
        "each, e.g. [--max-turns, '30'] (got '--max-turns 30')",
        "plan.yaml:7:44: subtask 'b': agent.extra_args must be a list of strings; put numbers "
        "and true/false in quotes, e.g. [--max-turns, '30'] (got a list)",
        "plan.yaml:9:33: subtask 'c': agent.model must be a string (got 5; put it in quotes to "
        "make it a string)",
        "plan.yaml:9:44: subtask 'c': agent.binary must not be empty (got '')",
        "plan.yaml:11:26: subtask 'd': unknown key 'modle' in agent (did you mean 'model'?)",
    ]


def test_what_a_kind_does_not_take_is_reported_where_written() -> None:
    text = (
        "version: 1\n"
        "name: demo\n"
        "agent: {kind: claude-code, permission_mode: yolo}\n"  # 3
        "subtasks:\n"
        "  - id: a\n"
        "    agent: {kind: shell, run: x, model: m, extra_args: [a]}\n"  # 6
        "  - id: b\n"
        "    agent: {kind: aider, permission_mode: acceptEdits}\n"  # 8
        "  - id: c\n"
        "    agent: {kind: codex, permission_mode: acceptEdits}\n"  # 10
        "  - id: d\n"
        "    agent: {kind: command, command: [x], binary: y}\n"  # 12
        "  - id: e\n"  # inherits the plan's agent: its problem is reported once, there
    )
    assert problems(text) == [
        "plan.yaml:3:28: agent kind 'claude-code': permission_mode must be one of acceptEdits, "
        "auto, bypassPermissions, default, dontAsk, plan (got 'yolo')",
        "plan.yaml:6:34: subtask 'a': agent kind 'shell' takes no model: only kinds "
        "claude-code, codex, aider do",
        "plan.yaml:6:44: subtask 'a': agent kind 'shell' takes no extra_args: only kinds "
        "claude-code, codex, aider do",
        "plan.yaml:8:26: subtask 'b': agent kind 'aider' takes no permission_mode",
        "plan.yaml:10:26: subtask 'c': agent kind 'codex': permission_mode must be one of "
        "read-only, workspace-write, danger-full-access (got 'acceptEdits')",
        "plan.yaml:12:42: subtask 'd': agent kind 'command' takes no binary: only kinds "
        "claude-code, codex, aider do",
    ]


def test_null_or_empty_adapter_keys_are_no_problem_for_other_kinds() -> None:
    text = (
        "version: 1\nname: demo\nagent: {run: go, model: null, extra_args: []}\n"
        "subtasks:\n  - id: a\n"
    )
    assert agents_of(text) == {"a": AgentSpec(kind="shell", run="go")}
