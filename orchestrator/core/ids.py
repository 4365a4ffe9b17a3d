"""Deterministic names and keys derived from an execution: ids, branches, sessions, keys."""

from __future__ import annotations

import hashlib
import re

from orchestrator.core.canonical import canonical_json

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


def short_id(execution_id: str) -> str:
    """The random tail of a ULID, lower-cased: unique enough for names, unlike its time prefix."""
    return execution_id[-6:].lower()


def default_integration_branch(plan_name: str, execution_id: str) -> str:
    return f"kairo/{plan_name}/{short_id(execution_id)}"


# Subtask branches live in a namespace of their own. git keeps refs as paths, so a branch
# `kairo/p/abc123` (the default integration branch, plan.md) and `kairo/p/abc123/x` cannot
# both exist; nor can `kairo/p` (an integration branch a plan may name) and `kairo/p/...`.
SUBTASK_NAMESPACE = "kairo-subtasks"


def subtask_branch(plan_name: str, execution_id: str, subtask_id: str) -> str:
    return f"{SUBTASK_NAMESPACE}/{plan_name}/{short_id(execution_id)}/{subtask_id}"


def named_short_id(branch: str) -> str | None:
    """The short id of the execution a subtask branch, or a branch of the default
    integration branch's form, is named after."""
    parts = branch.split("/")
    ours = (parts[0], len(parts)) in ((SUBTASK_NAMESPACE, 4), ("kairo", 3))
    return parts[2] if ours and _SHORT_ID.fullmatch(parts[2]) else None


_SHORT_ID = re.compile(r"[0-9a-z]{6}")


def short_id_named(text: str) -> str | None:
    """The short id a user's `ID` names when it is one, or a whole execution id (26
    characters); not a prefix, which names no short id."""
    text = text.strip().lower()
    short = text[-6:]
    return short if len(text) in (6, 26) and _SHORT_ID.fullmatch(short) else None


def tmux_session_name(plan_name: str, execution_id: str) -> str:
    # tmux treats '.' and ':' as target separators, so they cannot appear in a session name.
    safe = plan_name.replace(".", "-").replace(":", "-")
    return f"kairo-{safe}-{short_id(execution_id)}"


def worker_tmux_socket(host: str) -> str:
    """The tmux server a worker on `host` runs its agents' panes in (`attach` there)."""
    return f"kairo-worker-{re.sub(r'[^A-Za-z0-9_-]', '-', host)}"


def idempotency_key(execution_id: str, subtask_id: str, attempt: int, step: str) -> str:
    """store.md: sha256_hex(canonical_json([execution_id, subtask_id, attempt, step]))[:32]."""
    payload = canonical_json([execution_id, subtask_id, attempt, step])
    return hashlib.sha256(payload).hexdigest()[:32]


def wake_channel(execution_id: str, subtask_id: str, attempt: int) -> str:
    """The `tmux wait-for` channel on which one attempt's runner wakes the supervisor.

    One per attempt: tmux remembers a single signal sent while nobody waits, and a second
    one on the same channel clears it, so a shared channel loses wake-ups.
    """
    return f"{wake_channel_prefix(execution_id)}{subtask_id}-{attempt}"


def wake_channel_prefix(execution_id: str) -> str:
    """What every wake channel of the execution starts with."""
    return f"kairo-wake-{execution_id.lower()}-"


def live_view_channel(execution_id: str) -> str:
    """The `tmux wait-for` channel on which the supervisor lets its live view start."""
    return f"kairo-live-{execution_id.lower()}"


#: Where the in-pane runner copies all an agent printed, in its attempt's run directory:
#: the pane itself is closed a while after the attempt ended (runtime/closing_panes.py).
OUTPUT_LOG = "output.log"


def attempt_output(run_dir: str) -> str:
    return f"{run_dir.rstrip('/')}/{OUTPUT_LOG}"


#: Every cgroup kairo-orch makes starts so (agents/containment.py): an attempt's, below its
#: runner's own, and a check's, below the supervisor's; found by it at `resume` and `clean`.
CGROUP_PREFIX = "kairo-"
_ATTEMPT_CGROUP = "kairo-attempt"
_CHECK_CGROUP = "kairo-check"


def attempt_cgroup(execution_id: str, subtask_id: str, attempt: int) -> str:
    """The name of the cgroup that holds every process of one attempt."""
    return f"{_ATTEMPT_CGROUP}.{execution_id.lower()}.{subtask_id}.{attempt}"


def check_cgroup(execution_id: str, check: str, token: str) -> str:
    """The name of the cgroup of one run of a check (`verify`, `integration_verify`,
    `setup`); `token` tells runs of one check apart."""
    return f"{_CHECK_CGROUP}.{execution_id.lower()}.{check}.{token}"


def cgroup_of_execution(name: str, execution: str) -> bool:
    """Whether the cgroup `name` is one of the execution `execution` (its id, or its short
    id: the id's tail)."""
    kind, _, rest = name.partition(".")
    named = rest.partition(".")[0]
    return kind in (_ATTEMPT_CGROUP, _CHECK_CGROUP) and named.endswith(execution.lower())


def cgroup_attempt(name: str) -> tuple[str, int] | None:
    """The subtask and attempt an attempt's cgroup is named after (None for a check's)."""
    kind, _, rest = name.partition(".")
    subtask, _, number = rest.partition(".")[2].rpartition(".")
    if kind != _ATTEMPT_CGROUP or not number.isdigit() or not ID_PATTERN.match(subtask):
        return None
    return subtask, int(number)
