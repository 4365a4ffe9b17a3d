"""How each agent kind is pointed at a model endpoint other than its vendor's (a gateway, a
proxy, a local model), and the variables a plan gives an agent (`agent.env`).

    claude-code  ANTHROPIC_BASE_URL, and ANTHROPIC_API_KEY from `key_env`
    codex        a model provider of its own (`-c model_providers.kairo={...}`) whose
                 `env_key` is `key_env`: codex reads the key from that variable itself
    aider        OPENAI_API_BASE and OPENAI_API_KEY; the model is an `openai/` one

Values are templates: `${NAME}` is NAME of kairo-orch's environment, expanded when an
attempt starts, so that no key is written in the plan (and none in the event log, which
records the plan); `$${NAME}` is a literal `${NAME}`. `start` and `resume` refuse a plan
whose templates name an unset variable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping

from orchestrator.core.plan import AgentSpec

_REFERENCE = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)\}")
CODEX_PROVIDER = "kairo"


def agent_templates(spec: AgentSpec) -> dict[str, str]:
    """The variables the plan asks for this agent, unexpanded: the endpoint's, then `env`."""
    found: dict[str, str] = {}
    endpoint = spec.endpoint
    if endpoint is not None:
        key = f"${{{endpoint.key_env}}}" if endpoint.key_env else None
        if spec.kind == "claude-code":
            found["ANTHROPIC_BASE_URL"] = endpoint.url
            if key:
                found["ANTHROPIC_API_KEY"] = key
        elif spec.kind == "codex" and key and endpoint.key_env:
            found[endpoint.key_env] = key  # past the secret filter, for codex to read
        elif spec.kind == "aider":
            found["OPENAI_API_BASE"] = endpoint.url
            if key:
                found["OPENAI_API_KEY"] = key
    return {**found, **spec.env}


def expand(templates: Mapping[str, str], environment: Mapping[str, str]) -> dict[str, str]:
    """Each `${NAME}` replaced by NAME's value (an unset one by nothing: `start` refused it),
    each `$${NAME}` by `${NAME}`."""

    def value_of(found: re.Match[str]) -> str:
        escaped, name = found.groups()
        return f"${{{name}}}" if escaped else environment.get(name, "")

    return {name: _REFERENCE.sub(value_of, value) for name, value in templates.items()}


def unset_references(spec: AgentSpec, environment: Mapping[str, str]) -> Iterator[str]:
    """The variables the agent's templates name that `environment` lacks."""
    for value in agent_templates(spec).values():
        for escaped, name in _REFERENCE.findall(value):
            if not escaped and name not in environment:
                yield name


def codex_provider_args(spec: AgentSpec) -> list[str]:
    """`codex exec` options that make the endpoint its model provider (Responses API)."""
    endpoint = spec.endpoint
    if endpoint is None:
        return []
    fields = [f"name={json.dumps(CODEX_PROVIDER)}", f"base_url={json.dumps(endpoint.url)}"]
    if endpoint.key_env:
        fields.append(f"env_key={json.dumps(endpoint.key_env)}")
    fields.append('wire_api="responses"')
    return [
        "-c",
        f"model_provider={json.dumps(CODEX_PROVIDER)}",
        "-c",
        f"model_providers.{CODEX_PROVIDER}={{{','.join(fields)}}}",
    ]
