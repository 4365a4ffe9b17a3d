"""Plan fuzzing: valid plans mutated every way a user or an attacker could (types, unknown
keys, cycles, huge numbers, empty and unicode strings, shell and git metacharacters in ids
and branch names, NUL, deep nesting, alias bombs, garbage), loaded in process.

Every input must end as a plan or as a PlanError (exit 2), quickly, never as any other
exception (exit 1, "internal error"); and a plan accepted must not fail later for a reason
validation could have seen: its first event must have a canonical JSON form (the hash
chain's bytes), and every branch it names must be one git takes.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from orchestrator.core import events as ev
from orchestrator.core.branch_names import branch_name_problem
from orchestrator.core.canonical import canonical_json
from orchestrator.core.ids import default_integration_branch, subtask_branch
from orchestrator.core.plan_file import load_plan
from orchestrator.errors import PlanError

pytestmark = pytest.mark.slow  # 2,000 plans: some twenty seconds

TRACKED = ("src/a.py", "src/b.py", "src/util/c.py", "README.md", "docs/x.md")
EXECUTION = "01JD8ZZZZZZZZZZZZZZZZZZZZZ"
SEEDS: list[dict[str, Any]] = [
    {
        "version": 1,
        "name": "shop-cleanup",
        "max_parallel": 3,
        "verify": "python -m pytest -q",
        "agent": {"kind": "shell", "run": "true"},
        "subtasks": [
            {"id": "a", "prompt": "Fix {files}", "files": ["src/*.py"]},
            {"id": "b", "depends_on": ["a"], "limits": {"timeout": "10m", "max_attempts": 2}},
        ],
    },
    {
        "version": 1,
        "name": "agents",
        "integration_branch": "kairo/agents",
        "agent": {"kind": "claude-code", "model": "sonnet", "extra_args": ["--max-turns", "9"]},
        "execution_limits": {"token_budget": 100000, "timeout": "4h"},
        "worktree": {"copy_files": [".env"], "setup": "make deps"},
        "subtasks": [
            {"id": "s", "prompt": "Do {files}", "split": {"files": "src/**/*.py", "max_files": 1}},
            {"id": "t", "agent": {"kind": "codex", "permission_mode": "read-only"}},
        ],
    },
]
NASTY: list[Any] = [
    None, True, 0, -1, 2**63, 10**40, 1.5, float("1e308"), "", " ", "x" * 300, "é∂ƒ🙂",
    "a..b", "a.lock", "-x", "HEAD", "@", "a b", "a~1", "a:b", "x/", "$(rm -rf ~)", "`id`",
    "; echo", "../../etc", "/abs/path", "${HOME}", "$${X}", "\x00", "a\nb", [], {}, [1, 2],
    {"k": "v"}, ["../x"], "10 minutes", "0s", "9223372036854775807s", "1h30m",
]  # fmt: skip
KEYS = ["version", "name", "base", "max_parallel", "merge_order", "worktree_root", "verify",
        "integration_branch", "agent", "limits", "execution_limits", "subtasks", "worktree",
        "sandbox", "review", "id", "prompt", "depends_on", "files", "split", "kind", "run",
        "env", "endpoint", "timeout", "max_attempts", "token_budget", "bogus"]  # fmt: skip


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths(child, (*prefix, index))
    return found


def mutate(plan: Any, path: tuple[Any, ...], how: str, value: Any, key: str) -> Any:
    if not path:
        return value if how == "replace" else plan
    parent = plan
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if how == "replace":
        parent[last] = value
    elif how == "delete":
        del parent[last]
    elif how == "add" and isinstance(parent, dict):
        parent[key] = value
    elif how == "duplicate" and isinstance(parent, list):
        parent.append(json.loads(json.dumps(parent[last])))
    elif how == "cycle" and isinstance(plan, dict) and isinstance(plan.get("subtasks"), list):
        for item in plan["subtasks"]:
            if isinstance(item, dict):
                item["depends_on"] = [
                    str(value),
                    *[s.get("id") for s in plan["subtasks"] if isinstance(s, dict)],
                ]
    return plan


@st.composite
def plan_texts(draw: st.DrawFn) -> str:
    plan = json.loads(json.dumps(draw(st.sampled_from(SEEDS))))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths(plan)))
        how = draw(st.sampled_from(["replace", "delete", "add", "duplicate", "cycle"]))
        # a copy: a mutation may change a list or mapping it put in, which NASTY must not see
        value = copy.deepcopy(
            draw(st.one_of(st.sampled_from(NASTY), st.text(max_size=20), st.integers()))
        )
        with contextlib.suppress(KeyError, IndexError, TypeError):  # a mutation that misfits
            plan = mutate(plan, path, how, value, draw(st.sampled_from(KEYS)))
    text = json.dumps(plan, ensure_ascii=draw(st.booleans()))  # JSON is YAML too
    shape = draw(st.sampled_from(["as is", "as is", "as is", "deep", "bomb", "garbage", "cut"]))
    if shape == "deep":
        text = text.replace('"subtasks": [', '"subtasks": ' + "[" * 80, 1) + "]" * 79
    elif shape == "bomb":
        text = (
            'a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]\n'
            + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9))
            + text.strip("{}").replace('", "', '"\n"')
        )
    elif shape == "garbage":
        text = draw(st.text(max_size=200))
    elif shape == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    return text


def accepted_plan_holds(loaded: Any) -> None:
    plan = loaded.plan
    created = ev.ExecutionCreated(
        plan=plan,
        plan_path="/r/plan.yaml",
        repo_root="/r",
        git_common_dir="/r/.git",
        base_commit="b" * 40,
        integration_branch=plan.integration_branch
        or default_integration_branch(plan.name, EXECUTION),
        tmux_socket=None,
        tmux_session="kairo-s",
        worktree_root="/w",
        run_root="/runs",
    )
    canonical_json(ev.to_record(created)[1])  # the first event can be hashed
    assert branch_name_problem(created.integration_branch) is None
    for subtask in plan.subtasks:
        assert branch_name_problem(subtask_branch(plan.name, EXECUTION, subtask.id)) is None


@settings(
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(plan_texts())
@example("=")  # YAML 1.1's value tag: a tagged scalar without a position (found in CI)
@example("version: 1\nname: !!str 3\n")
def test_every_plan_is_a_plan_or_a_plan_error_quickly(text: str) -> None:
    started = time.monotonic()
    try:
        loaded = load_plan(text, "plan.yaml", tracked_files=TRACKED)
    except PlanError as error:
        assert error.message.startswith("plan.yaml"), error.message
    else:
        accepted_plan_holds(loaded)
    assert time.monotonic() - started < 2.0
