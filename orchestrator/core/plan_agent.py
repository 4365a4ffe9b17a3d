"""A subtask's agent: its overrides merged over the plan's `agent`, and the rules between
`kind`, `run`, `command` and the adapter keys (plan.md, "Coding agents")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from orchestrator.core.plan import ADAPTER_KINDS, PERMISSION_MODES, AgentKind, AgentSpec, Endpoint
from orchestrator.core.plan_errors import Problems
from orchestrator.core.plan_yaml import Path

if TYPE_CHECKING:
    from orchestrator.core.plan_raw import RawAgent, RawSubtask

# The keys that say which program runs and how; written for one kind, they mean nothing to
# another. (`idempotent` describes the work, not the program.)
ADAPTER_KEYS = ("binary", "model", "permission_mode", "extra_args", "endpoint")
PROGRAM_KEYS = frozenset({"kind", "run", "command", *ADAPTER_KEYS})


def fields_set(model: BaseModel | None) -> dict[str, Any]:
    """The keys a section actually wrote: merging key by key must not let a default value
    of the override (say `max_attempts: 3`) hide what the plan's defaults say.
    """
    return {key: getattr(model, key) for key in model.model_fields_set} if model else {}


def _program_problems(kind: str, values: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(offending key or '' when one is missing, sentence) for an agent's kind/run/command."""
    run, command = values.get("run"), values.get("command")
    if kind == "shell":
        if command is not None:
            yield "command", "agent kind 'shell' takes run, not command (that is kind 'command')"
        elif run is None:
            default = "" if values.get("kind") else " (shell is the default kind)"
            yield "", f"agent of kind 'shell' needs run: a command line for /bin/sh -c{default}"
    elif kind == "command":
        if run is not None:
            yield "run", "agent kind 'command' takes command, not run (that is kind 'shell')"
        elif command is None:
            yield "", "agent of kind 'command' needs command: a list of arguments, run directly"
    else:
        for key in ("run", "command"):
            if values.get(key) is not None:
                yield key, f"agent kind '{kind}' takes no {key}: its adapter starts the agent"
    if kind not in ADAPTER_KINDS:
        for key in ADAPTER_KEYS:
            if values.get(key):  # null or [] asks for nothing
                yield (
                    key,
                    (
                        f"agent kind '{kind}' takes no {key}: only kinds "
                        f"{', '.join(ADAPTER_KINDS)} do"
                    ),
                )
        return
    endpoint = values.get("endpoint")
    keys = {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"} & (values.get("env") or {}).keys()
    if kind == "claude-code" and endpoint is not None and endpoint.key_env is None and not keys:
        yield (
            "endpoint",
            "agent kind 'claude-code' needs a key for its endpoint (Claude Code does not "
            "start without one, and gets none of yours there): name the variable that holds "
            "it in endpoint.key_env",
        )
    mode = values.get("permission_mode")
    if mode is not None:
        allowed = PERMISSION_MODES.get(kind)
        if allowed is None:
            yield "permission_mode", f"agent kind '{kind}' takes no permission_mode"
        elif mode not in allowed:
            yield (
                "permission_mode",
                (
                    f"agent kind '{kind}': permission_mode must be one of "
                    f"{', '.join(allowed)} (got {mode!r})"
                ),
            )


def resolve_agent(
    i: int, sub: RawSubtask, default_agent: RawAgent | None, problems: Problems
) -> AgentSpec | None:
    """Subtask `i`'s agent, its overrides merged key by key over the plan's `agent` (None
    when `problems` got why it has none)."""
    values = fields_set(default_agent)
    origin: dict[str, Path] = {key: ("agent", key) for key in values}
    own = fields_set(sub.agent)
    if own.get("kind") is None:
        own.pop("kind", None)  # `kind: null` keeps the plan's kind
    elif own["kind"] != (values.get("kind") or "shell"):
        # Another kind is another program: the plan's `run` is a shell line and its
        # `command` an argv, both written for the plan's kind; carried over they would
        # conflict with what the subtask asked for. `idempotent` describes the work,
        # not the program, so it still carries over.
        for key in PROGRAM_KEYS - {"kind"}:
            values.pop(key, None)
    if "env" in own:  # variable by variable: a subtask adds to the plan's, or overrides one
        own["env"] = {**values.get("env", {}), **own["env"]}
    values.update(own)
    origin.update({key: ("subtasks", i, "agent", key) for key in own})
    kind = cast("AgentKind", values.get("kind") or "shell")
    found = list(_program_problems(kind, values))
    # A subtask that says nothing about its program inherits the plan's: report that
    # once, at the plan's `agent`, rather than once per subtask.
    inherits = not (PROGRAM_KEYS & own.keys())
    for key, sentence in found:
        if key:
            prefix = "" if origin[key][0] == "agent" else f"subtask '{sub.id}': "
            problems.at_key(origin[key], prefix + sentence)
        elif inherits and default_agent is not None:
            problems.at_key(("agent",), sentence)
        elif inherits:
            problems.at_value(
                ("subtasks", i),
                f"subtask '{sub.id}' has no agent: give it agent: {{run: ...}}, "
                "or give the plan a top-level agent",
            )
        else:
            problems.at_key(("subtasks", i, "agent"), f"subtask '{sub.id}': {sentence}")
    if found:
        return None
    command = values.get("command")
    endpoint = values.get("endpoint")
    return AgentSpec(
        kind=kind,
        run=values.get("run"),
        command=tuple(command) if command is not None else None,
        idempotent=values.get("idempotent", False),
        binary=values.get("binary"),
        model=values.get("model"),
        permission_mode=values.get("permission_mode"),
        extra_args=tuple(values.get("extra_args", ())),
        endpoint=Endpoint(**endpoint.model_dump()) if endpoint is not None else None,
        env=dict(values.get("env", {})),
    )
