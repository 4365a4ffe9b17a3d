"""plan.yaml -> ResolvedPlan: every problem class with its exact position, merges, splits."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from orchestrator.core import plan_file, plan_resolve
from orchestrator.core.durations import format_duration, parse_duration
from orchestrator.core.plan import AgentSpec, Limits
from orchestrator.core.plan_file import LoadedPlan, load_plan
from orchestrator.errors import PlanError

HEAD = "version: 1\nname: demo\nagent: {run: go}\n"  # three lines: subtasks start on line 4


def plan(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def load(text: str, tracked: list[str] | None = None) -> LoadedPlan:
    return load_plan(plan(text), "plan.yaml", tracked)


def problems(text: str, tracked: list[str] | None = None) -> list[str]:
    with pytest.raises(PlanError) as caught:
        load(text, tracked)
    assert str(caught.value) == "\n".join(caught.value.problems)
    return caught.value.problems


def only_problem(text: str, tracked: list[str] | None = None) -> str:
    found = problems(text, tracked)
    assert len(found) == 1, found
    return found[0]


# --- the plan of plan.md -------------------------------------------------------------

SPEC_EXAMPLE = """
version: 1
name: split-user-service
base: main
integration_branch: kairo/split-user-service
max_parallel: 4
merge_order: plan
worktree_root: ../.kairo-worktrees

agent:
  kind: shell
  run: "python tools/codemod.py"
  idempotent: false

verify: "python -m pytest -q"
integration_verify: "python -m pytest -q"

limits:
  timeout: 30m
  max_attempts: 3
  token_budget: 200000
execution_limits:
  timeout: 4h
  token_budget: 2000000

subtasks:
  - id: create-interfaces
    prompt: Add the interfaces.
  - id: extract-auth
    title: Extract AuthService
    prompt: |
      Move login() and logout() from UserService into a new AuthService.
    depends_on: [create-interfaces]
    files: ["src/auth/**"]
    allow_empty: false
    agent: {run: "./move.sh"}
    verify: "python -m pytest tests/auth -q"
    limits: {timeout: 10m}

  - id: fstrings
    prompt: "Convert %-formatting to f-strings in these files: {files}"
    depends_on: extract-auth
    split:
      files: "src/**/*.py"
      max_files: 2
      by: directory
"""
TRACKED = [
    "README.md",
    "src/users/service.py",
    "src/users/models.py",
    "src/users/views.py",
    "src/auth/__init__.py",
    "src/app.py",
]


def test_the_example_of_plan_md_resolves() -> None:
    loaded = load(SPEC_EXAMPLE, TRACKED)
    resolved = loaded.plan
    assert resolved.name == "split-user-service"
    assert resolved.base == "main"
    assert resolved.integration_branch == "kairo/split-user-service"
    assert (resolved.max_parallel, resolved.merge_order) == (4, "plan")
    assert resolved.worktree_root == "../.kairo-worktrees"
    assert resolved.integration_verify == "python -m pytest -q"
    assert resolved.execution_limits.timeout_s == 4 * 3600
    assert resolved.execution_limits.token_budget == 2_000_000
    assert [s.id for s in resolved.subtasks] == [
        "create-interfaces",
        "extract-auth",
        "fstrings-1",
        "fstrings-2",
        "fstrings-3",
        "fstrings-4",
    ]
    first = resolved.subtask("create-interfaces")
    assert first.title == "create-interfaces"
    assert first.agent == AgentSpec(kind="shell", run="python tools/codemod.py")
    assert first.verify == "python -m pytest -q"
    assert first.limits == Limits(timeout_s=1800, max_attempts=3, token_budget=200_000)
    auth = resolved.subtask("extract-auth")
    assert auth.title == "Extract AuthService"
    assert auth.prompt.startswith("Move login()")
    assert auth.depends_on == ("create-interfaces",)
    assert auth.files == ("src/auth/__init__.py",)
    assert auth.agent.run == "./move.sh"
    assert auth.verify == "python -m pytest tests/auth -q"
    assert auth.limits == Limits(timeout_s=600, max_attempts=3, token_budget=200_000)
    parts = [s for s in resolved.subtasks if s.split_of == "fstrings"]
    # by directory: src (app.py), src/auth, src/users (3 files, chunked by 2)
    assert [p.files for p in parts] == [
        ("src/app.py",),
        ("src/auth/__init__.py",),
        ("src/users/models.py", "src/users/service.py"),
        ("src/users/views.py",),
    ]
    assert all(p.prompt.endswith("these files: {files}") for p in parts)
    assert all(p.depends_on == ("extract-auth",) for p in parts)
    assert loaded.warnings == (
        "plan.yaml:42:5: subtasks 'extract-auth' and 'fstrings-2' both own src/auth/__init__.py",
    )


def test_the_plan_of_the_readme_is_a_plan() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    example = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    tracked = ["shop/cart.py", "shop/util.py", "shop/orders/order.py"]
    loaded = load_plan(example, "plan.yaml", tracked)
    assert [s.id for s in loaded.plan.subtasks] == [
        "fstrings-1",
        "fstrings-2",
        "rename-helper",
        "receipt",
    ]
    assert loaded.warnings == ()


def test_defaults_of_a_minimal_plan() -> None:
    resolved = load(HEAD + "subtasks:\n  - id: a\n").plan
    assert (resolved.base, resolved.integration_branch, resolved.max_parallel) == ("HEAD", None, 4)
    assert (resolved.merge_order, resolved.worktree_root) == ("plan", None)
    (only,) = resolved.subtasks
    assert (only.title, only.prompt, only.files, only.allow_empty) == ("a", "", (), False)
    assert only.limits == Limits(timeout_s=None, max_attempts=3, token_budget=None)
    assert only.verify is None


# --- YAML and the top level ----------------------------------------------------------


def test_yaml_syntax_error_names_its_line() -> None:
    assert only_problem("version: 1\nname: [demo\nsubtasks: []\n").startswith(
        "plan.yaml:3:9: not valid YAML: expected ',' or ']'"
    )


def test_a_key_written_twice_is_an_error() -> None:
    assert only_problem("version: 1\nname: a\nname: b\n") == (
        "plan.yaml:3:1: key 'name' is written twice in the same mapping"
    )


@pytest.mark.parametrize(
    ("text", "found"), [("", "empty"), ("- a\n", "a list"), ("3\n", "3"), ("=", "'='")]
)
def test_the_top_level_must_be_a_mapping(text: str, found: str) -> None:
    assert only_problem(text) == (
        f"plan.yaml:1:1: the plan must be a mapping of version, name, subtasks...; it is {found}"
    )


def test_a_tagged_value_is_the_text_written() -> None:
    resolved = load(HEAD + "subtasks:\n  - id: !!str 7\n    title: !mine =\n").plan
    assert (resolved.subtasks[0].id, resolved.subtasks[0].title) == ("7", "=")


def test_missing_required_keys_are_all_named() -> None:
    assert problems("max_parallel: 2\n") == [
        "plan.yaml:1:1: the plan is missing required key 'name'",
        "plan.yaml:1:1: the plan is missing required key 'subtasks'",
        "plan.yaml:1:1: the plan is missing required key 'version' (write version: 1)",
    ]


@pytest.mark.parametrize("version", ["2", "'1'", "true"])
def test_version_must_be_1(version: str) -> None:
    message = only_problem(HEAD.replace("1", version, 1) + "subtasks:\n  - id: a\n")
    assert message.startswith("plan.yaml:1:10: version must be 1 (the only plan version) (got")


def test_unknown_key_is_an_error_with_a_suggestion() -> None:
    text = HEAD + "max_paralel: 3\nsubtasks:\n  - id: a\n"
    assert only_problem(text) == (
        "plan.yaml:4:1: unknown key 'max_paralel' (did you mean 'max_parallel'?)"
    )


def test_unknown_keys_in_sections_and_subtasks() -> None:
    text = HEAD + "limits: {timout: 3m}\nsubtasks:\n  - id: a\n    dependson: [b]\n"
    assert problems(text) == [
        "plan.yaml:4:10: unknown key 'timout' in limits (did you mean 'timeout'?)",
        "plan.yaml:7:5: subtask 'a': unknown key 'dependson' (did you mean 'depends_on'?)",
    ]


@pytest.mark.parametrize("name", ["Demo", "-demo", "a" * 64, "with space"])
def test_name_must_be_an_id(name: str) -> None:
    message = only_problem(
        f"version: 1\nname: '{name}'\nagent: {{run: go}}\nsubtasks:\n  - id: a\n"
    )
    assert message.startswith("plan.yaml:2:7: name must be 1 to 63 characters of a-z, 0-9")
    assert f"(got '{name[:10]}" in message


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("max_parallel: 0", "plan.yaml:4:15: max_parallel must be a whole number >= 1 (got 0)"),
        ("max_parallel: '4'", "plan.yaml:4:15: max_parallel must be a whole number >= 1 (got '4')"),
        ("max_parallel: 1.5", "plan.yaml:4:15: max_parallel must be a whole number >= 1 (got 1.5)"),
        (
            "integration_batch: 0",
            "plan.yaml:4:20: integration_batch must be a whole number >= 1 (got 0)",
        ),
        (
            "merge_order: first",
            "plan.yaml:4:14: merge_order must be 'plan' or 'completion' (got 'first')",
        ),
        (
            "base: 2024",
            "plan.yaml:4:7: base must be a string (got 2024; put it in quotes to make it a string)",
        ),
        ("verify: ''", "plan.yaml:4:9: verify must not be empty (got '')"),
        (
            "limits: {max_attempts: 0}",
            "plan.yaml:4:24: limits.max_attempts must be a whole number >= 1 (got 0)",
        ),
        (
            "limits: {token_budget: 0}",
            "plan.yaml:4:24: limits.token_budget must be a whole number >= 1 (got 0)",
        ),
        (
            "limits: []",
            "plan.yaml:4:9: limits must be a mapping such as {timeout: 30m, max_attempts: 3} "
            "(got an empty list)",
        ),
        (
            "execution_limits: {timeout: soon}",
            "plan.yaml:4:29: execution_limits.timeout must be a duration such as 30m, 90s, 4h "
            "or 1h30m, or a number of seconds (got 'soon')",
        ),
    ],
)
def test_top_level_values_are_checked_where_written(line: str, message: str) -> None:
    assert only_problem(HEAD + line + "\nsubtasks:\n  - id: a\n") == message


@pytest.mark.parametrize("root", ["wt", "./wt", ".", "a/../wt", "..wt"])
def test_worktree_root_inside_the_working_tree_is_refused(root: str) -> None:
    message = only_problem(HEAD + f"worktree_root: '{root}'\nsubtasks:\n  - id: a\n")
    assert message.startswith("plan.yaml:4:16: worktree_root must lie outside the working tree")


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        (
            "{kind: shell, run: 'true', env: {KAIRO_USAGE_FILE: /dev/null}}",
            "plan.yaml:6:45: subtask 'a': agent.env.KAIRO_USAGE_FILE must not be a KAIRO_ "
            "variable: kairo-orch sets those itself",
        ),
        (
            "{kind: claude-code, endpoint: {url: 'https://me:secret@gw.example'}}",
            "plan.yaml:6:48: subtask 'a': agent.endpoint.url must hold no user, password, "
            "query or ${variable}: the plan and the event log are read by others; name the "
            "key's variable in key_env",  # and the password is not echoed
        ),
        (
            "{kind: codex, endpoint: {url: 'http://127.0.0.1:99999'}}",
            "plan.yaml:6:42: subtask 'a': agent.endpoint.url must be an http:// or https:// "
            "URL, e.g. http://127.0.0.1:4000, with a port from 1 to 65535",
        ),
        (
            "{kind: shell, run: 'true', env: {A: '${UNSET'}}",
            "plan.yaml:6:48: subtask 'a': agent.env.A has a ${ left open: write ${NAME}, or "
            "$${ for a literal (got '${UNSET')",
        ),
        (
            "{kind: claude-code, endpoint: {url: 'http://127.0.0.1:4000'}}",
            "plan.yaml:6:32: subtask 'a': agent kind 'claude-code' needs a key for its "
            "endpoint (Claude Code does not start without one, and gets none of yours there): "
            "name the variable that holds it in endpoint.key_env",
        ),
        (
            "{kind: shell, run: 'true', env: {'A-B': x}}",
            "plan.yaml:6:45: subtask 'a': agent.env.A-B must be an environment variable's "
            "name, e.g. GATEWAY_KEY",
        ),
    ],
)
def test_an_agent_s_variables_and_endpoint_hold_no_secret_and_touch_nothing_of_kairo_s(
    agent: str, message: str
) -> None:
    assert only_problem(HEAD + f"subtasks:\n  - id: a\n    agent: {agent}\n") == message


@pytest.mark.parametrize("root", ["../.git/wt", "/srv/repo/.git/kairo", "../x/.git"])
def test_worktree_root_inside_a_git_directory_is_refused(root: str) -> None:
    message = only_problem(HEAD + f"worktree_root: '{root}'\nsubtasks:\n  - id: a\n")
    assert message == (
        "plan.yaml:4:16: worktree_root must not lie inside a .git directory: Claude Code "
        f"refuses to edit any file there (got '{root}')"
    )


@pytest.mark.parametrize("root", ["../wt", "../../x/wt", "a/../../wt", "/var/tmp/wt", "../.gitx"])
def test_worktree_root_outside_is_kept_as_written(root: str) -> None:
    resolved = load(HEAD + f"worktree_root: '{root}'\nsubtasks:\n  - id: a\n").plan
    assert resolved.worktree_root == root


def test_empty_subtasks_list() -> None:
    assert only_problem(HEAD + "subtasks: []\n") == (
        "plan.yaml:4:11: subtasks must be a list of at least one subtask (got an empty list)"
    )


def test_yaml_anchors_and_merge_keys_work_and_a_reused_anchor_is_a_warning() -> None:
    text = (
        "version: 1\n"
        "name: demo\n"
        "agent: &agent {run: go, idempotent: true}\n"
        "subtasks:\n"
        "  - &base\n"
        "    id: a\n"
        "    limits: {timeout: 5m}\n"
        "  - <<: *base\n"
        "    id: b\n"
        "    agent: {<<: *agent, run: other}\n"
        "    prompt: &p one\n"
        "  - id: c\n"
        "    prompt: &p two\n"  # 13
    )
    loaded = load(text)
    b = loaded.plan.subtask("b")
    assert b.agent == AgentSpec(run="other", idempotent=True)
    assert b.limits.timeout_s == 300
    assert loaded.warnings == ("plan.yaml:13:13: found duplicate anchor 'p'",)


# --- subtasks: ids and dependencies --------------------------------------------------


def test_subtask_id_missing_invalid_or_repeated() -> None:
    text = HEAD + (
        "subtasks:\n"
        "  - prompt: no id\n"  # 5
        "  - id: Bad\n"  # 6
        "  - id: a\n"  # 7
        "  - id: a\n"  # 8
        "  - just text\n"  # 9
    )
    assert problems(text) == [
        "plan.yaml:5:5: subtask is missing required key 'id'",
        "plan.yaml:6:9: subtask id must be 1 to 63 characters of a-z, 0-9, '.', '_' and '-', "
        "starting with a letter or digit (got 'Bad')",
        "plan.yaml:8:9: subtask id 'a' is already used at line 7",
        "plan.yaml:9:5: each subtask must be a mapping with at least an id, "
        "e.g. {id: fix-auth, prompt: ...} (got 'just text')",
    ]


def test_unknown_and_self_dependencies() -> None:
    text = HEAD + (
        "subtasks:\n"
        "  - id: a\n"
        "  - id: b\n"
        "    depends_on: [a, x, b]\n"  # 7
        "  - id: c\n"
        "    depends_on:\n"
        "      - bb\n"  # 10
    )
    assert problems(text) == [
        "plan.yaml:7:21: subtask 'b' depends on unknown subtask 'x'",
        "plan.yaml:7:24: subtask 'b' depends on itself",
        "plan.yaml:10:9: subtask 'c' depends on unknown subtask 'bb' (did you mean 'b'?)",
    ]


def test_depending_on_a_subtask_with_its_own_problem_is_not_also_unknown() -> None:
    text = HEAD + "subtasks:\n  - id: a\n    allow_empty: maybe\n  - id: b\n    depends_on: a\n"
    assert problems(text) == [
        "plan.yaml:6:18: subtask 'a': allow_empty must be true or false (got 'maybe')"
    ]


def test_cycles_are_named_from_the_first_written_member() -> None:
    text = HEAD + (
        "subtasks:\n"
        "  - id: a\n"
        "    depends_on: [c]\n"  # 6
        "  - id: b\n"
        "    depends_on: [a]\n"
        "  - id: c\n"
        "    depends_on: [b]\n"
        "  - id: d\n"
        "    depends_on: [e]\n"  # 12
        "  - id: e\n"
        "    depends_on: d\n"
    )
    assert problems(text) == [
        "plan.yaml:6:18: dependency cycle: a -> c -> b -> a",
        "plan.yaml:12:18: dependency cycle: d -> e -> d",
    ]


# --- agents --------------------------------------------------------------------------

AGENTS = """
version: 1
name: demo
agent: {kind: command, command: [aider, --message-file, "{prompt_file}"], idempotent: true}
verify: make test
limits: {timeout: 30m, token_budget: 1000}
subtasks:
  - id: same-kind
    agent: {command: [aider, --yes]}
  - id: to-shell
    agent: {kind: shell, run: ./codemod.sh}
    limits: {timeout: 90, max_attempts: 5}
    verify: null
  - id: to-claude
    agent: {kind: claude-code, idempotent: false}
    limits: {token_budget: null}
    verify: make test-fast
  - id: inherits
"""


def test_agent_overrides_merge_key_by_key() -> None:
    by_id = {s.id: s for s in load(AGENTS).plan.subtasks}
    assert by_id["same-kind"].agent == AgentSpec(
        kind="command", command=("aider", "--yes"), idempotent=True
    )
    # a new kind drops the plan's command (written for kind command), keeps idempotent
    assert by_id["to-shell"].agent == AgentSpec(kind="shell", run="./codemod.sh", idempotent=True)
    assert by_id["to-claude"].agent == AgentSpec(kind="claude-code")
    assert by_id["inherits"].agent == AgentSpec(
        kind="command", command=("aider", "--message-file", "{prompt_file}"), idempotent=True
    )
    assert by_id["to-shell"].limits == Limits(timeout_s=90, max_attempts=5, token_budget=1000)
    assert by_id["to-claude"].limits == Limits(timeout_s=1800, max_attempts=3, token_budget=None)
    assert [by_id[i].verify for i in ("to-shell", "to-claude", "inherits")] == [
        None,
        "make test-fast",
        "make test",
    ]


def test_agent_kind_rules() -> None:
    text = (
        "version: 1\n"
        "name: demo\n"
        "agent: {kind: shell, run: go}\n"
        "subtasks:\n"
        "  - id: a\n"
        "    agent: {command: [x]}\n"  # 6: shell takes no command
        "  - id: b\n"
        "    agent: {kind: command}\n"  # 8: command needs command (run dropped: new kind)
        "  - id: c\n"
        "    agent: {kind: command, command: [x], run: y}\n"  # 10
        "  - id: d\n"
        "    agent: {kind: command, command: []}\n"  # 12
        "  - id: e\n"
        "    agent: {kind: aider, run: y}\n"  # 14
        "  - id: f\n"
        "    agent: {kind: gpt}\n"  # 16
        "  - id: g\n"
        "    agent: {run: null}\n"  # 18
    )
    assert problems(text) == [
        "plan.yaml:6:13: subtask 'a': agent kind 'shell' takes run, not command "
        "(that is kind 'command')",
        "plan.yaml:8:5: subtask 'b': agent of kind 'command' needs command: "
        "a list of arguments, run directly",
        "plan.yaml:10:42: subtask 'c': agent kind 'command' takes command, not run "
        "(that is kind 'shell')",
        "plan.yaml:12:37: subtask 'd': agent.command must be a non-empty list of arguments, "
        "e.g. [aider, --message-file, '{prompt_file}'] (for one command line, use kind shell "
        "and run) (got an empty list)",
        "plan.yaml:14:26: subtask 'e': agent kind 'aider' takes no run: its adapter starts "
        "the agent",
        "plan.yaml:16:19: subtask 'f': agent.kind must be one of shell, command, claude-code, "
        "codex, aider (got 'gpt')",
        "plan.yaml:18:5: subtask 'g': agent of kind 'shell' needs run: a command line for "
        "/bin/sh -c",
    ]


def test_an_incomplete_plan_agent_is_reported_once_where_written() -> None:
    text = "version: 1\nname: demo\nagent: {idempotent: true}\nsubtasks:\n  - id: a\n  - id: b\n"
    assert only_problem(text) == (
        "plan.yaml:3:1: agent of kind 'shell' needs run: a command line for /bin/sh -c "
        "(shell is the default kind)"
    )


def test_without_a_plan_agent_each_subtask_needs_its_own() -> None:
    text = "version: 1\nname: demo\nsubtasks:\n  - id: a\n    agent: {run: go}\n  - id: b\n"
    assert only_problem(text) == (
        "plan.yaml:6:5: subtask 'b' has no agent: give it agent: {run: ...}, "
        "or give the plan a top-level agent"
    )


def test_codex_without_a_timeout_is_warned_of_once() -> None:
    text = "version: 1\nname: demo\nagent: {kind: codex}\nsubtasks:\n  - id: a\n  - id: b\n"
    assert load(text).warnings == (
        "plan.yaml:5:5: subtask 'a' (and 1 more) runs codex with no limits.timeout: codex "
        "retries a lost connection for ever, so give it one (say 30m)",
    )
    bounded = text.replace("subtasks:", "limits: {timeout: 30m}\nsubtasks:")
    assert load(bounded).warnings == ()
    whole_run = text.replace("subtasks:", "execution_limits: {timeout: 4h}\nsubtasks:")
    assert load(whole_run).warnings == ()  # which ends running attempts too
    unset = text.replace("subtasks:", "limits: {timeout: null}\nsubtasks:")
    assert len(load(unset).warnings) == 1
    assert load(text.replace("codex", "claude-code")).warnings == ()


def test_adapter_kinds_need_no_run_or_command() -> None:
    text = "version: 1\nname: demo\nagent: {kind: codex}\nsubtasks:\n  - id: a\n"
    assert load(text).plan.subtasks[0].agent == AgentSpec(kind="codex")


def test_problems_of_subtasks_are_found_even_when_the_top_level_is_wrong() -> None:
    text = HEAD + "max_parallel: 0\nsubtasks:\n  - id: a\n    depends_on: [zz]\n"
    assert problems(text) == [
        "plan.yaml:4:15: max_parallel must be a whole number >= 1 (got 0)",
        "plan.yaml:7:18: subtask 'a' depends on unknown subtask 'zz'",
    ]


def test_a_subtask_with_another_problem_has_its_unknown_dependencies_found_too() -> None:
    text = (
        HEAD + "subtasks:\n  - id: a\n  - id: c\n    depends_on: [zz, a, c]\n"
        "    limits: {timeout: 10 minutes}\n  - id: d\n    depends_on: yy\n    timeout: 1\n"
    )
    assert problems(text) == [
        "plan.yaml:7:18: subtask 'c' depends on unknown subtask 'zz'",
        "plan.yaml:7:25: subtask 'c' depends on itself",
        "plan.yaml:8:23: subtask 'c': limits.timeout must be a duration such as 30m, 90s, "
        "4h or 1h30m, or a number of seconds (got '10 minutes')",
        "plan.yaml:10:17: subtask 'd' depends on unknown subtask 'yy'",
        "plan.yaml:11:5: subtask 'd': unknown key 'timeout'",
    ]


# --- files and split -----------------------------------------------------------------

FILES = ["lib/a/1.py", "lib/a/2.py", "lib/a/3.py", "lib/b/4.py", "lib/5.py", "docs/x.md"]


def split_plan(split: str, *more: str) -> str:
    return HEAD + "subtasks:\n  - id: s\n    split: " + split + "\n" + "".join(more)


def test_split_by_count_chunks_sorted_paths() -> None:
    resolved = load(split_plan("{files: 'lib/**/*.py', max_files: 2, by: count}"), FILES).plan
    assert [(s.id, s.split_of, s.files) for s in resolved.subtasks] == [
        ("s-1", "s", ("lib/5.py", "lib/a/1.py")),
        ("s-2", "s", ("lib/a/2.py", "lib/a/3.py")),
        ("s-3", "s", ("lib/b/4.py",)),
    ]


def test_split_by_directory_chunks_each_directory() -> None:
    resolved = load(split_plan("{files: 'lib/**/*.py', max_files: 2}"), FILES).plan
    assert [s.files for s in resolved.subtasks] == [
        ("lib/5.py",),
        ("lib/a/1.py", "lib/a/2.py"),
        ("lib/a/3.py",),
        ("lib/b/4.py",),
    ]


@pytest.mark.parametrize("by", ["count", "directory"])
def test_split_parts_are_disjoint_and_cover_the_match(by: str) -> None:
    tracked = [f"pkg/m{d}/f{n}.py" for d in range(4) for n in range(d * 3)] + ["pkg/.hidden.py"]
    text = split_plan(f"{{files: 'pkg/**', max_files: 4, by: {by}}}")
    loaded = load(text, tracked)
    owned = [path for s in loaded.plan.subtasks for path in s.files]
    assert sorted(owned) == sorted(tracked)  # DOTMATCH: a leading-dot name is matched too
    assert len(owned) == len(set(owned))
    assert all(1 <= len(s.files) <= 4 for s in loaded.plan.subtasks)
    assert loaded.warnings == ()


def test_split_titles_number_the_parts_when_the_entry_has_one() -> None:
    text = split_plan("{files: 'lib/a/*', max_files: 2}", "    title: Port\n")
    assert [s.title for s in load(text, FILES).plan.subtasks] == ["Port (1/2)", "Port (2/2)"]


def test_split_globs_brace_and_exclusion() -> None:
    text = split_plan("{files: ['lib/{a,b}/*.py', '!lib/a/2.py'], max_files: 9, by: count}")
    (part,) = load(text, FILES).plan.subtasks
    assert part.files == ("lib/a/1.py", "lib/a/3.py", "lib/b/4.py")


def test_depending_on_a_split_means_all_its_parts() -> None:
    text = split_plan(
        "{files: 'lib/a/*', max_files: 1}",
        "  - id: after\n    depends_on: [s]\n",
        "  - id: one\n    depends_on: [s-2, after]\n",
    )
    resolved = load(text, FILES).plan
    assert resolved.subtask("after").depends_on == ("s-1", "s-2", "s-3")
    assert resolved.subtask("one").depends_on == ("s-2", "after")


def test_split_problems() -> None:
    text = HEAD + (
        "subtasks:\n"
        "  - id: both\n"
        "    files: [lib/a/*]\n"  # 6
        "    split: {files: lib/b/*, max_files: 1}\n"
        "  - id: none\n"
        "    split: {files: [lib/**, 'src/**/*.rs'], max_files: 1}\n"  # 9
        "  - id: bad\n"
        "    split: {files: lib/**, max_files: 0, by: folder}\n"  # 11
        "  - id: short\n"
        "    split: {max_files: 3}\n"  # 13
        "  - id: excluded\n"
        "    split: {files: [docs/*, '!docs/*'], max_files: 3}\n"  # 15
    )
    assert problems(text, FILES) == [
        "plan.yaml:6:5: subtask 'both': files and split cannot both be given: a split owns "
        "the files it matches, so leave files out",
        "plan.yaml:9:29: subtask 'none': split glob 'src/**/*.rs' matches no tracked file",
        "plan.yaml:11:39: subtask 'bad': split.max_files must be a whole number >= 1 (got 0)",
        "plan.yaml:11:46: subtask 'bad': split.by must be 'directory' or 'count' (got 'folder')",
        "plan.yaml:13:5: subtask 'short': split is missing required key 'files'",
        "plan.yaml:15:5: subtask 'excluded': split's '!' globs exclude every file",
    ]


def test_split_needs_tracked_files() -> None:
    assert only_problem(split_plan("{files: 'lib/**', max_files: 2}"), None) == (
        "plan.yaml:6:5: subtask 's': split needs a git repository to list files"
    )


def test_ids_made_by_a_split_must_be_unique_and_valid() -> None:
    long_id = "x" * 62
    text = split_plan(
        "{files: 'lib/a/*', max_files: 1}",
        "  - id: s-2\n",  # line 7
        f"  - id: {long_id}\n    split: {{files: 'lib/a/*', max_files: 1}}\n",  # line 9
    )
    assert problems(text, FILES) == [
        "plan.yaml:6:5: subtask 's': split makes subtask 's-2', but that id is already used "
        "at line 7",
        f"plan.yaml:9:5: subtask '{long_id}': split would make ids like '{long_id}-3', "
        "longer than 63 characters; shorten the id",
    ]


def test_files_resolve_to_tracked_paths_or_stay_empty_without_a_repository() -> None:
    text = HEAD + "subtasks:\n  - id: a\n    files: 'lib/a/**'\n"
    assert load(text, FILES).plan.subtasks[0].files == ("lib/a/1.py", "lib/a/2.py", "lib/a/3.py")
    assert load(text, None).plan.subtasks[0].files == ()


def test_overlapping_ownership_is_a_warning_on_the_later_subtask() -> None:
    text = HEAD + (
        "subtasks:\n"
        "  - id: a\n"
        "    files: ['lib/**']\n"
        "  - id: b\n"
        "    files: ['lib/a/*', docs/x.md]\n"  # 8
        "  - id: c\n"
        "    files: [docs/*]\n"  # 10
    )
    assert load(text, FILES).warnings == (
        "plan.yaml:8:5: subtasks 'a' and 'b' both own lib/a/1.py (and 2 more)",
        "plan.yaml:10:5: subtasks 'b' and 'c' both own docs/x.md",
    )


# --- durations -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        ("30m", 1800),
        ("10s", 10),
        ("4h", 14400),
        ("1.5h", 5400),
        ("1h30m", 5400),
        (90, 90),
        (0.5, 0.5),
        ("45", 45),
        (" 2M ", 120),
    ],
)
def test_durations(written: object, seconds: float) -> None:
    assert parse_duration(written) == seconds


@pytest.mark.parametrize("written", ["", "0s", "-5m", "5 minutes", "30m1h", "h", True, None, 0])
def test_not_durations(written: object) -> None:
    with pytest.raises(ValueError, match="must be a duration"):
        parse_duration(written)


def test_format_duration() -> None:
    assert [format_duration(s) for s in (5400, 45, 3600, 1.5)] == ["1h30m", "45s", "1h", "1.5s"]


def test_worktree_setup_is_resolved_and_each_subtask_has_its_own_port_block() -> None:
    text = HEAD + (
        "worktree: {copy_files: .env, setup: 'npm ci', port_base: 30000, ports: 4}\n"
        "subtasks:\n  - id: a\n  - id: b\n"
    )
    resolved = load(text).plan
    assert resolved.worktree.copy_files == (".env",)
    assert resolved.worktree.setup == "npm ci"
    assert (resolved.port_of("a"), resolved.port_of("b")) == (30000, 30004)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("{copy_files: ../secrets}", "worktree.copy_files must be a glob relative to the"),
        ("{copy_files: /etc/passwd}", "worktree.copy_files must be a glob relative to the"),
        ("{ports: 0}", "worktree.ports must be a whole number from 1 to 1000 (got 0)"),
        ("{port_base: 80}", "worktree.port_base must be a whole number from 1024 to 65000"),
        ("{setup: ''}", "worktree.setup must not be empty"),
        ("[.env]", "worktree must be a mapping such as {copy_files: [.env]"),
    ],
)
def test_a_wrong_worktree_setting_is_named(setting: str, message: str) -> None:
    problem = only_problem(HEAD + f"worktree: {setting}\nsubtasks:\n  - id: a\n")
    assert message in problem and problem.startswith("plan.yaml:4:")


# --- inputs that broke the loader (a fuzz campaign's findings) ------------------------------


def test_a_duplicate_id_that_depends_on_its_twin_is_one_problem_not_a_crash() -> None:
    text = "version: 1\nname: p\nagent: {run: go}\nsubtasks: [{id: a}, {id: a, depends_on: [a]}]\n"
    assert only_problem(text) == "plan.yaml:4:26: subtask id 'a' is already used at line 4"


def test_a_nul_character_is_refused_where_it_is_written() -> None:
    assert only_problem(HEAD + 'base: "main\\0"\nsubtasks:\n  - id: a\n') == (
        "plan.yaml:4:7: a value holds a NUL character (\\0), which no command line, file "
        "name or variable can hold"
    )


def test_nesting_past_its_cap_is_a_yaml_error_at_once() -> None:
    assert only_problem(HEAD + "subtasks: " + "[" * 2000 + "]" * 2000 + "\n") == (
        "plan.yaml:4:75: not valid YAML: nested more than 64 deep"
    )


def test_aliases_that_expand_past_the_cap_are_refused_before_they_are_expanded() -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 12)]
    started = time.monotonic()
    message = only_problem("\n".join(lines) + "\n" + HEAD + "subtasks:\n  - id: a\n")
    assert message.startswith("plan.yaml:1:1: the plan holds more than 250,000 values once")
    assert time.monotonic() - started < 2  # 9^12 values, never made


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("max_parallel: " + "9" * 30, "plan.yaml:4:15: max_parallel must be at most 1,000"),
        ("limits: {max_attempts: " + "9" * 41 + "}", "limits.max_attempts must be at most 100"),
        ("limits: {timeout: 9223372036854775807s}", "limits.timeout must be at most 30 days"),
        (
            "execution_limits: {token_budget: 9007199254740992}",
            "must be at most 9,007,199,254,740,991",
        ),
    ],
)
def test_numbers_past_their_caps_are_refused_at_validate(line: str, message: str) -> None:
    assert message in only_problem(HEAD + line + "\nsubtasks:\n  - id: a\n")


def test_more_subtasks_than_the_cap_are_refused_whether_written_or_split(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(plan_file, "MAX_SUBTASKS", 3)
    monkeypatch.setattr(plan_resolve, "MAX_SUBTASKS", 3)
    written = HEAD + "subtasks: [{id: a}, {id: b}, {id: c}, {id: d}]\n"
    assert only_problem(written) == "plan.yaml:4:1: the plan has 4 subtasks; at most 3"
    split = HEAD + "subtasks:\n  - id: s\n    split: {files: 'src/*.py', max_files: 1}\n"
    tracked = ("src/a.py", "src/b.py", "src/c.py", "src/d.py")
    with pytest.raises(PlanError) as info:
        load_plan(split, "plan.yaml", tracked_files=tracked)
    assert "the plan's splits make 4 subtasks; at most 3" in info.value.message


def test_a_prompt_too_long_to_hand_an_agent_is_refused_at_validate() -> None:
    # exec refuses any one variable or argument over 128 KiB: every attempt would fail
    text = HEAD + "subtasks:\n  - id: a\n    prompt: '" + "x" * 70_000 + "'\n"
    assert only_problem(text) == (
        "plan.yaml:6:5: subtask 'a': its prompt is 68 KiB; an agent is handed at most 64 KiB "
        "of it (in a variable and on its command line): point it at a file of the "
        "repository, or split the subtask"
    )


@pytest.mark.parametrize(
    ("plan_key", "own_key", "attempts"),
    [
        ("", "", 0),  # off unless asked for
        ("resolve_conflicts: agent\n", "", 1),
        ("resolve_conflicts: true\n", "", 1),
        ("resolve_conflicts: {attempts: 2}\n", "", 2),
        ("resolve_conflicts: agent\n", "    resolve_conflicts: off\n", 0),
        ("resolve_conflicts: agent\n", "    resolve_conflicts: false\n", 0),
        ("", "    resolve_conflicts: {attempts: 3}\n", 3),
    ],
)
def test_resolve_conflicts_is_the_subtasks_own_else_the_plans(
    plan_key: str, own_key: str, attempts: int
) -> None:
    resolved = load(HEAD + plan_key + "subtasks:\n  - id: a\n" + own_key).plan
    assert resolved.subtasks[0].resolve_attempts == attempts


def test_an_unknown_resolve_conflicts_is_refused_where_written() -> None:
    assert only_problem(HEAD + "resolve_conflicts: maybe\nsubtasks:\n  - id: a\n") == (
        "plan.yaml:4:20: resolve_conflicts.by must be 'agent' or 'off' (got 'maybe')"
    )


def test_checks_import_checkout_is_warn_error_or_off_and_no_part_of_the_recorded_plan() -> None:
    assert load(HEAD + "subtasks: [{id: a}]\n").checks_import_checkout == "warn"
    strict = load(HEAD + "checks_import_checkout: error\nsubtasks: [{id: a}]\n")
    assert strict.checks_import_checkout == "error"
    assert "checks_import_checkout" not in strict.plan.model_dump()
    problem = only_problem(HEAD + "checks_import_checkout: strict\nsubtasks: [{id: a}]\n")
    assert problem.startswith("plan.yaml:4:25: checks_import_checkout"), problem


# --- sandbox.network ---------------------------------------------------------------------


def network_of(value: str) -> str:
    return HEAD + f"sandbox: {{kind: bwrap, network: {value}}}\nsubtasks: [{{id: a}}]\n"


@pytest.mark.parametrize(
    ("value", "agent", "setup", "checks"),
    [
        ("{}", "endpoint", "all", "none"),  # the default: a setup installs, a check runs
        ("endpoint", "endpoint", "none", "none"),  # a setup or check has no model to reach
        ("all", "all", "all", "all"),
        ("true", "all", "all", "all"),  # as the setting was before it had three values
        ("false", "none", "none", "none"),
        ("{agent: all, checks: all}", "all", "all", "all"),
        ("{setup: false}", "endpoint", "none", "none"),
    ],
)
def test_the_network_is_one_value_for_every_step_or_one_per_step(
    value: str, agent: str, setup: str, checks: str
) -> None:
    text = (
        network_of(value)
        if value != "{}"
        else HEAD + "sandbox: {kind: bwrap}\nsubtasks: [{id: a}]\n"
    )
    sandbox = load(text).plan.sandbox
    assert (sandbox.network_for("agent"), sandbox.network_for("setup")) == (agent, setup)
    assert sandbox.network_for("verify") == sandbox.network_for("integration_verify") == checks


def test_outside_a_sandbox_every_step_has_the_user_s_network() -> None:
    sandbox = load(
        HEAD + "sandbox: {kind: local, network: none}\nsubtasks: [{id: a}]\n"
    ).plan.sandbox
    assert sandbox.network_for("agent") == sandbox.network_for("verify") == "all"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            "maybe",
            "plan.yaml:4:33: sandbox.network must be none, endpoint or all (true: all, false: "
            "none), or a mapping such as {agent: endpoint, setup: all, checks: none} (got 'maybe')",
        ),
        (
            "{setup: endpoint}",
            "plan.yaml:4:41: sandbox.network.setup must be none or all (endpoint is an agent's: "
            "its model) (got 'endpoint')",
        ),
        (
            "{agnt: all}",
            "plan.yaml:4:34: unknown key 'agnt' in sandbox.network (did you mean 'agent'?)",
        ),
        (
            "{agent: some}",
            "plan.yaml:4:41: sandbox.network.agent must be none, endpoint or all (got 'some')",
        ),
    ],
)
def test_a_network_setting_that_is_none_of_these_is_worded_on_one_line(
    value: str, expected: str
) -> None:
    assert only_problem(network_of(value)) == expected
