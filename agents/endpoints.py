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
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

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


# --- The network of a sandboxed agent: its model endpoint and nothing else (agents/egress.py)

#: The hosts each kind talks to its vendor through, when the plan names no endpoint: the
#: API, and for codex the ChatGPT sign-in's backend and where its tokens are refreshed.
VENDOR_HOSTS: Mapping[str, tuple[str, ...]] = {
    "claude-code": ("api.anthropic.com:443",),
    "codex": ("api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"),
    "aider": ("api.openai.com:443", "api.anthropic.com:443"),
}
#: Variables whose value is the base URL the agent program sends its requests to.
BASE_URL_VARIABLES = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_BASE")
LOOPBACK_NAMES = ("localhost", "::1")
_URL = re.compile(r"https?://[^\s\"'{},]+")
#: Where inside the sandbox an endpoint the forwarder cannot listen at is reached instead
#: (over http, its reverse proxy holding the TLS to the real one).
ENDPOINT_PORT = 3127
#: Where inside the sandbox the CONNECT proxy listens: the first of these no loopback URL
#: of the agent's already takes.
_PROXY_PORTS = range(3128, 3228)


@dataclass(frozen=True)
class EgressRoutes:
    """What an agent whose network is `endpoint` reaches, and how (agents/egress.py)."""

    proxy: int  # the in-sandbox port of the CONNECT proxy (HTTPS_PROXY)
    allow: tuple[str, ...] = ()  # host:port the proxy opens tunnels to
    forwards: tuple[tuple[int, str], ...] = ()  # in-sandbox port -> host:port outside, as is
    reverse: tuple[tuple[int, str], ...] = ()  # in-sandbox port -> the endpoint's URL
    hold: tuple[str, ...] = ()  # the variables holding the endpoint's key: a stand-in inside

    @property
    def lead_anywhere(self) -> bool:
        """Whether they reach anything at all (a shell command given no base URL: no)."""
        return bool(self.allow or self.forwards or self.reverse)

    @property
    def ports(self) -> tuple[int, ...]:
        """Every in-sandbox port the forwarder listens on."""
        taken = [port for port, _ in (*self.forwards, *self.reverse)]
        return (self.proxy, *taken)


def _address(url: str) -> tuple[str, int, bool] | None:
    """host, port and whether it is a loopback address, of an http(s) URL."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        return None
    return host, port, host in LOOPBACK_NAMES or host.startswith("127.")


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _reachable_unchanged(url: str) -> bool:
    """Whether the forwarder can listen where `url` points (a loopback address, a port
    the agent may bind without privilege), so that the agent's URL needs no change."""
    found = _address(url)
    return found is not None and found[2] and found[1] >= 1024


def behind_egress(spec: AgentSpec) -> AgentSpec:
    """`spec` as the agent sees it when its endpoint is reached through egress: an
    endpoint the forwarder cannot listen at (another host, a privileged port) becomes
    plain http on the in-sandbox port of egress's reverse proxy, path kept."""
    endpoint = spec.endpoint
    if endpoint is None or _reachable_unchanged(endpoint.url):
        return spec
    parts = urlsplit(endpoint.url)
    local = urlunsplit(("http", f"127.0.0.1:{ENDPOINT_PORT}", parts.path, parts.query, ""))
    return spec.model_copy(update={"endpoint": endpoint.model_copy(update={"url": local})})


def egress_routes(spec: AgentSpec, environment: Mapping[str, str]) -> EgressRoutes:
    """The routes of an agent of `spec` whose variables are `environment`: its vendor's
    hosts, the hosts of the base URLs it is given (by a variable, or in `extra_args`: a
    model server on this machine keeps its URL, a forwarder listening there), and the
    plan's endpoint, served by a reverse proxy that holds its key."""
    endpoint = spec.endpoint
    # An agent sent to the plan's endpoint has no business with its vendor.
    allow: list[str] = [] if endpoint else list(VENDOR_HOSTS.get(spec.kind, ()))
    forwards: dict[int, str] = {}
    given = [environment[name] for name in BASE_URL_VARIABLES if environment.get(name)]
    given += [url for arg in spec.extra_args for url in _URL.findall(arg)]
    # The endpoint's own URL, as the plan gives it and as the agent sees it: served below.
    served: tuple[str, ...] = ()
    if endpoint is not None:
        seen = behind_egress(spec).endpoint
        served = (endpoint.url, seen.url if seen else endpoint.url)
    for url in given:
        found = _address(url)
        if found is None or url.startswith(served):
            continue
        host, port, loopback = found
        if loopback and port >= 1024:
            forwards.setdefault(port, _host_port(host, port))
        allow.append(_host_port(host, port))
    reverse: tuple[tuple[int, str], ...] = ()
    hold: tuple[str, ...] = ()
    if endpoint is not None:
        found = _address(endpoint.url)
        if found is not None:
            port = found[1] if _reachable_unchanged(endpoint.url) else ENDPOINT_PORT
            forwards.pop(port, None)
            reverse = ((port, endpoint.url),)
        if endpoint.key_env:
            key = f"${{{endpoint.key_env}}}"
            hold = tuple(name for name, value in agent_templates(spec).items() if value == key)
    taken = {*forwards, *(port for port, _ in reverse)}
    return EgressRoutes(
        proxy=next(port for port in _PROXY_PORTS if port not in taken),
        allow=tuple(dict.fromkeys(allow)),
        forwards=tuple(sorted(forwards.items())),
        reverse=reverse,
        hold=hold,
    )
