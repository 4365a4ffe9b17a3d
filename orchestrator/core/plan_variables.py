"""What an agent's `env` and `endpoint` may say (plan.md, "Coding agents"): variables'
names and `${NAME}` templates, and endpoint URLs that hold no secret.

The plan and the event log, which records it, are read by others: a key is named, never
written (`key_env`, `${NAME}`), and a URL with a user, a password, a query or a template
in it is refused, its value not echoed back (plan_errors.py).
"""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_name(value: str) -> str:
    if not _ENV_NAME.fullmatch(value):
        raise PydanticCustomError(
            "plan_env_name", "must be an environment variable's name, e.g. GATEWAY_KEY"
        )
    return value


def _agent_variable(value: str) -> str:
    _env_name(value)
    if value.startswith("KAIRO_"):
        raise PydanticCustomError(
            "plan_env_name", "must not be a KAIRO_ variable: kairo-orch sets those itself"
        )
    return value


def _env_value(value: str) -> str:
    if value.replace("${", "").count("}") < value.count("${") or re.search(r"\$\{[^}]*$", value):
        raise PydanticCustomError(
            "plan_env_reference", "has a ${ left open: write ${NAME}, or $${ for a literal"
        )
    for name in re.findall(r"\$\{([^}]*)\}", value):
        if not _ENV_NAME.fullmatch(name):
            raise PydanticCustomError(
                "plan_env_reference",
                "${...} must name an environment variable, e.g. ${GATEWAY_KEY}",
            )
    return value


def _url(value: str) -> str:
    expected = "must be an http:// or https:// URL, e.g. http://127.0.0.1:4000"
    if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?(\?\S*)?(#\S*)?", value):
        raise PydanticCustomError("plan_url", expected)
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018  (raises for a port that is no port)
    except ValueError:
        raise PydanticCustomError("plan_url", f"{expected}, with a port from 1 to 65535") from None
    if parts.username is not None or parts.query or parts.fragment or "${" in value:
        raise PydanticCustomError(
            "plan_url",
            "must hold no user, password, query or ${variable}: the plan and the event log "
            "are read by others; name the key's variable in key_env",
        )
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]
AgentVariable = Annotated[str, AfterValidator(_agent_variable)]
VariableValue = Annotated[str, AfterValidator(_env_value)]
Url = Annotated[str, AfterValidator(_url)]
