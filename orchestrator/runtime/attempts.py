"""One agent attempt at the edge: its run directory, its runner spec, its exit record.

The agent runs under `agents.runner` in a tmux pane, not as our child, so a supervisor that
dies leaves it running; the runner's exit record in the run directory is how we (or a
later supervisor) learn that it ended.

No file of an attempt keeps a secret. The runner spec holds the agent's environment less
its secrets (its API key, what the plan passes it): those are in a credentials file that
the runner removes as it reads it, before the agent starts. Nothing of them needs to
outlive that: a resumed supervisor re-attaches to live runners, which hold them in memory,
and takes them again from its own environment for the attempts it starts (as it takes
`${NAME}`). Once the runner has ended, `scrub` cuts every secret the supervisor knows out
of what the agent left (the runner cut out only its own as they streamed), and removes a
credentials file that no runner took.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.base import AttemptContext
from agents.endpoints import agent_templates, expand
from agents.live_usage import count
from agents.redaction import StreamRedactor
from agents.registry import adapter_for
from agents.runner import runner_argv
from agents.usage import USAGE_FILE, usage_records
from orchestrator.core.events import AttemptExited, Refusal
from orchestrator.core.ids import OUTPUT_LOG
from orchestrator.core.plan import ResolvedSubtask
from orchestrator.core.secrets import Redactor, secrets_of
from orchestrator.runtime.processes import OUTPUT_TAIL_BYTES
from orchestrator.runtime.sandbox import AgentPlace, ExecutionSandbox, without_secrets

# Variables of the supervisor itself that must not leak into an agent's world.
_NOT_FOR_AGENTS = ("KAIRO_FAULT_CRASH_AFTER_EVENT", "KAIRO_STORE", "TMUX", "TMUX_PANE")


@dataclass(frozen=True)
class RunFiles:
    """The files of one attempt, under `<run root>/<subtask>/<attempt>/`."""

    directory: Path

    @property
    def spec(self) -> Path:
        return self.directory / "runner.json"

    @property
    def prompt(self) -> Path:
        return self.directory / "prompt.txt"

    @property
    def usage(self) -> Path:
        return self.directory / USAGE_FILE

    @property
    def output(self) -> Path:
        return self.directory / OUTPUT_LOG

    @property
    def started(self) -> Path:
        return self.directory / "started.json"

    @property
    def exit(self) -> Path:
        return self.directory / "exit.json"

    @property
    def credentials(self) -> Path:
        return self.directory / "credentials.json"

    @property
    def printed(self) -> tuple[Path, ...]:
        """The files that hold what the agent printed or said."""
        return (self.output, self.exit, self.usage)


def render_prompt(spec: ResolvedSubtask, feedback: str, earlier: str = "") -> str:
    # Plain replacement, not str.format: prompts are prose and may hold braces of their own.
    prompt = spec.prompt.replace("{files}", " ".join(spec.files))
    if earlier:
        prompt += f"\n\n## Earlier attempts at this task\n\n{earlier}\n"
    if feedback:
        prompt += f"\n\n## Feedback on your previous attempt\n\n{feedback}\n"
    return prompt


def _not_for_agents(base: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in base.items() if k not in _NOT_FOR_AGENTS}


def write_attempt_files(
    files: RunFiles,
    *,
    spec: ResolvedSubtask,
    context: AttemptContext,
    base_environment: Mapping[str, str],
    tmux_socket: str | None,
    wake_channel: str,
    sandbox: ExecutionSandbox,
    place: AgentPlace,
    pass_env: Sequence[str] = (),
) -> list[str]:
    """Write the prompt, the runner spec and the credentials file; return the pane's
    command line."""
    files.directory.mkdir(parents=True, exist_ok=True)
    # A name that is not UTF-8 reaches the agent as the very bytes git gave (os_strings).
    files.prompt.write_text(context.prompt, encoding="utf-8", errors="surrogateescape")
    files.usage.touch()
    adapter = adapter_for(spec.agent.kind)
    base = _not_for_agents(base_environment)
    env = without_secrets(
        base, passed=pass_env, kind=spec.agent.kind, vendor=spec.agent.endpoint is None
    )
    env.update(adapter.environment(spec.agent, context))
    # What the plan asked for by name (agent.env, agent.endpoint) passes the filter.
    env.update(expand(agent_templates(spec.agent), base))
    secrets = secrets_of(env)
    key_env = spec.agent.endpoint.key_env if spec.agent.endpoint else None
    if key_env is not None and key_env in env:  # codex gets its endpoint key under that name
        secrets[key_env] = env[key_env]
    runner_spec: dict[str, Any] = {
        "argv": sandbox.wrap(adapter.argv(spec.agent, context), place),
        "cwd": context.worktree,
        "env": {name: value for name, value in env.items() if name not in secrets},
        "output_log": str(files.output),
        "started_path": str(files.started),
        "exit_path": str(files.exit),
        "tmux_socket": tmux_socket,
        "wake_channel": wake_channel,
        "title": f"{spec.id} attempt {context.attempt}",
    }
    files.credentials.unlink(missing_ok=True)  # one written before a crash: made anew
    if secrets:
        _write_credentials(files.credentials, secrets)
        runner_spec["credentials_path"] = str(files.credentials)
    # The user's environment, less its secrets, is theirs all the same: owner-only.
    fd = os.open(files.spec, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(runner_spec, handle)
    return runner_argv(str(files.spec))


def _write_credentials(path: Path, secrets: Mapping[str, str]) -> None:
    """The agent's secrets, for its runner alone (agents/runner.py): owner-only, made
    here and now (O_EXCL), never through a link planted where it goes (O_NOFOLLOW)."""
    redacted = Redactor.of(secrets).known
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with os.fdopen(os.open(path, flags, 0o600), "w", encoding="utf-8") as handle:
        json.dump({"env": dict(secrets), "redact": [list(pair) for pair in redacted]}, handle)


#: How much of a file `scrub` reads at a time.
_SCRUB_CHUNK = 1 << 20


def scrub(files: RunFiles, secrets: Iterable[tuple[str, str]]) -> None:
    """Once the attempt's runner has ended: no credentials file left (one its runner
    never took), and none of `secrets` (name, value) in what the agent left, as printed
    or as JSON writes it (the exit record, the usage file)."""
    files.credentials.unlink(missing_ok=True)
    needles = [
        (name, form.encode())
        for name, value in secrets
        for form in {value, json.dumps(value)[1:-1]}
    ]
    if needles:
        for path in files.printed:
            _scrub_file(path, needles)


def _scrub_file(path: Path, needles: list[tuple[str, bytes]]) -> None:
    """`path` with the needles cut out, if it holds any: only then is it written (a new
    file put in its place), and most hold none."""
    try:
        source = path.open("rb")
    except FileNotFoundError:
        return
    with source:
        look = StreamRedactor(needles)
        while chunk := source.read(_SCRUB_CHUNK):
            look.feed(chunk)
        if not look.redacted:
            return
        source.seek(0)
        redactor = StreamRedactor(needles)
        scrubbed = path.with_name(f".{path.name}.scrubbed")
        fd = os.open(scrubbed, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            while chunk := source.read(_SCRUB_CHUNK):
                out.write(redactor.feed(chunk))
            out.write(redactor.flush())
    scrubbed.replace(path)


@dataclass(frozen=True)
class ExitRecord:
    exit_code: int
    output_tail: str
    interrupted: bool  # the runner itself was signalled (its pane or tmux server went away)


def read_exit_record(files: RunFiles) -> ExitRecord | None:
    """The runner's record of the agent's exit, or None while the agent runs."""
    try:
        data = json.loads(files.exit.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return ExitRecord(
        exit_code=int(data["exit_code"]),
        output_tail=str(data.get("output_tail", "")),
        interrupted=data.get("runner_signal") is not None,
    )


def runner_alive(files: RunFiles) -> bool:
    """Whether the attempt's runner process still runs, found by its spec path.

    The pid in its start record is tried first; without one (it may not have written it
    yet) every process's command line is looked at, which finds it from its first instant.
    """
    needle = str(files.spec).encode()
    try:
        pid = int(json.loads(files.started.read_text(encoding="utf-8"))["pid"])
        candidates: list[Path] = [Path(f"/proc/{pid}/cmdline")]
    except (OSError, ValueError, KeyError):
        candidates = list(Path("/proc").glob("[0-9]*/cmdline"))
    for cmdline in candidates:
        try:
            if needle in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False


def runner_ever_started(files: RunFiles) -> bool:
    return files.started.exists() or files.exit.exists()


@dataclass(frozen=True)
class Usage:
    """What an attempt's usage file says: summed tokens and cost, the last session id, how
    the agent program said its run ended (the last line that says), what it went through."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    session_id: str | None = None  # the conversation it had, shown by `status`
    result: str | None = None
    is_error: bool = False
    api_retries: int = 0
    api_status: int | None = None
    refusals: tuple[Refusal, ...] = ()
    summary: str = ""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def read_usage(files: RunFiles) -> Usage:
    """What every well-formed line of the usage file adds up to; an agent's half-written or
    malformed line is not worth failing an attempt for, so it is skipped."""
    found: dict[str, Any] = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    found["api_retries"] = 0
    refusals: list[Refusal] = []
    for record in usage_records(files.usage):
        for key in ("input_tokens", "output_tokens", "api_retries"):
            found[key] += count(record.get(key))
        value = record.get("cost_usd")
        if isinstance(value, int | float) and value > 0:
            found["cost_usd"] += value
        for key in ("session_id", "summary"):
            if isinstance(record.get(key), str) and record[key]:
                found[key] = record[key]
        if isinstance(record.get("api_status"), int):
            found["api_status"] = record["api_status"]
        value = record.get("result")
        if isinstance(value, str) and value:
            found.update(result=value, is_error=record.get("is_error") is True)
        listed = record.get("refusals")
        for refusal in listed if isinstance(listed, list) else []:
            if isinstance(refusal, dict):
                refusals.append(_refusal(refusal))
    found["cost_usd"] = round(found["cost_usd"], 6)
    return Usage(**found, refusals=tuple(refusals))


def _refusal(record: dict[str, Any]) -> Refusal:
    return Refusal(
        tool=str(record.get("tool") or "a tool"),
        target=str(record.get("target") or ""),
        message=str(record.get("message") or ""),
    )


def exited(subtask_id: str, attempt: int, record: ExitRecord, usage: Usage) -> AttemptExited:
    """The event that says how an attempt ended: its runner's record and its usage file."""
    return AttemptExited(
        subtask_id=subtask_id,
        attempt=attempt,
        exit_code=record.exit_code,
        output_tail=record.output_tail[-OUTPUT_TAIL_BYTES:],
        tokens=usage.tokens,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost_usd=usage.cost_usd,
        session_id=usage.session_id,
        result=usage.result,
        is_error=usage.is_error,
        api_retries=usage.api_retries,
        api_status=usage.api_status,
        refusals=usage.refusals,
        summary=usage.summary,
    )
