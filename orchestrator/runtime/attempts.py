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

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from agents.base import AttemptContext
from agents.containment import children
from agents.endpoints import agent_templates, behind_egress, egress_routes, expand
from agents.live_usage import count
from agents.redaction import StreamRedactor
from agents.registry import adapter_for
from agents.runner import RUNNER_MAIN, runner_argv
from agents.runner_records import create_new
from agents.usage import USAGE_FILE, usage_records
from orchestrator.core.events import AttemptExited, Refusal, RunnerRecord
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


def not_for_agents(base: Mapping[str, str]) -> dict[str, str]:
    """`base` less the supervisor's own variables, which no agent or sandboxed check gets."""
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
    cgroup: str | None = None,
) -> list[str]:
    """Write the prompt, the runner spec and the credentials file; return the pane's
    command line. `cgroup`: the name of the cgroup the runner is to hold the attempt's
    processes in, where it can."""
    files.directory.mkdir(parents=True, exist_ok=True)
    # A name that is not UTF-8 reaches the agent as the very bytes git gave (os_strings).
    files.prompt.write_text(context.prompt, encoding="utf-8", errors="surrogateescape")
    files.usage.touch()
    adapter = adapter_for(spec.agent.kind)
    # Behind egress, an endpoint elsewhere is reached at a port of the sandbox's own.
    confined = sandbox.network == "endpoint"
    agent = behind_egress(spec.agent) if confined else spec.agent
    base = not_for_agents(base_environment)
    env = without_secrets(base, passed=pass_env, kind=agent.kind, vendor=agent.endpoint is None)
    env.update(adapter.environment(agent, context))
    # What the plan asked for by name (agent.env, agent.endpoint) passes the filter.
    env.update(expand(agent_templates(agent), base))
    if confined:
        place = replace(place, egress=egress_routes(spec.agent, env))
    secrets = secrets_of(env)
    key_env = spec.agent.endpoint.key_env if spec.agent.endpoint else None
    if key_env is not None and key_env in env:  # codex gets its endpoint key under that name
        secrets[key_env] = env[key_env]
    runner_spec: dict[str, Any] = {
        "argv": sandbox.wrap(adapter.argv(agent, context), place),
        "cwd": context.worktree,
        "env": {name: value for name, value in env.items() if name not in secrets},
        "output_log": str(files.output),
        "started_path": str(files.started),
        "exit_path": str(files.exit),
        "tmux_socket": tmux_socket,
        "wake_channel": wake_channel,
        "title": f"{spec.id} attempt {context.attempt}",
        **({"cgroup": cgroup} if cgroup is not None else {}),
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
        # Made anew: a link an agent planted at that name is unlinked, not written through.
        with os.fdopen(create_new(str(scrubbed)), "wb") as out:
            while chunk := source.read(_SCRUB_CHUNK):
                out.write(redactor.feed(chunk))
            out.write(redactor.flush())
    scrubbed.replace(path)


@dataclass(frozen=True)
class ExitRecord:
    exit_code: int
    output_tail: str
    interrupted: bool  # the runner itself was signalled (its pane or tmux server went away)
    # What the runner wrote to the output log (None: it kept none whole).
    output_bytes: int | None = None
    output_sha256: str | None = None
    # Which file it was read from: a record found forged is known again by it.
    stamp: tuple[int, int] = (0, 0)


def read_exit_record(files: RunFiles) -> ExitRecord | None:
    """The exit record in the attempt's run folder, or None while there is none. Any
    process may have written it: a record is the runner's only once its runner is gone
    (runtime/awaiting_exit.py)."""
    try:
        fd = os.open(files.exit, os.O_RDONLY | os.O_NOFOLLOW)
    except (FileNotFoundError, OSError):
        return None  # none, or a link someone planted in its place
    with os.fdopen(fd, encoding="utf-8") as handle:
        facts = os.fstat(fd)
        try:
            data = json.loads(handle.read())
            exit_code = int(data["exit_code"])
        except (ValueError, KeyError, TypeError):
            return None  # a record half-written by hand is none either
    size, digest = data.get("output_bytes"), data.get("output_sha256")
    return ExitRecord(
        exit_code=exit_code,
        output_tail=str(data.get("output_tail", "")),
        interrupted=data.get("runner_signal") is not None,
        output_bytes=size if isinstance(size, int) else None,
        output_sha256=digest if isinstance(digest, str) else None,
        stamp=(facts.st_ino, facts.st_mtime_ns),
    )


def output_log_changed(files: RunFiles, record: ExitRecord) -> bool:
    """Whether the output log is not what the runner says it wrote: another process wrote
    into it, or replaced it. Unknown (False) where the runner kept no log whole."""
    if record.output_sha256 is None or record.output_bytes is None:
        return False
    try:
        fd = os.open(files.output, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return True  # gone, or a link in its place
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as log:
        if os.fstat(fd).st_size != record.output_bytes:
            return True
        while chunk := log.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest() != record.output_sha256


#: An attempt's runner: "with_agent" while its agent (or anything it started) runs,
#: "without_agent" before it starts the agent and after it has ended all of it (writing its
#: records, waking the supervisor), "gone" once it has exited.
RunnerState = Literal["with_agent", "without_agent", "gone"]


def runner_state(files: RunFiles) -> RunnerState:
    """What the attempt's runner is doing, found by its command line, which names the
    attempt's spec. The pid in its start record is looked at first; where that is no
    runner of this spec (not written yet, or written by someone else: the run folder is
    the user's, which any agent may write) every process's command line is, so that a
    forged record can make a runner seem alive, never gone."""
    pid = _runner_pid(files)
    if pid is None:
        return "gone"
    with_agent = any(_leads_a_session(child) for child in children(pid))
    return "with_agent" if with_agent else "without_agent"


def _runner_pid(files: RunFiles) -> int | None:
    tail = b"\0" + bytes(files.spec) + b"\0"
    try:
        hinted = int(json.loads(files.started.read_text(encoding="utf-8"))["pid"])
        if _is_runner(Path(f"/proc/{hinted}/cmdline"), tail):
            return hinted
    except (OSError, ValueError, KeyError, TypeError):
        pass
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        if _is_runner(cmdline, tail):
            return int(cmdline.parent.name)
    return None


def _is_runner(cmdline: Path, tail: bytes) -> bool:
    try:
        found = cmdline.read_bytes()
    except OSError:
        return False
    return found.endswith(tail) and RUNNER_MAIN.encode() in found


def _leads_a_session(pid: int) -> bool:
    """The runner starts its agent in a session of its own, and nothing else that way."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return False
    return len(fields) > 3 and fields[0] != "Z" and fields[3] == str(pid)


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


def records_written_by_others(
    files: RunFiles, record: ExitRecord, *, forged: bool = False
) -> tuple[RunnerRecord, ...]:
    """Which of the runner's records another process wrote: an exit record found while its
    agent ran (`forged`, runtime/awaiting_exit.py), and the output log, if it is not what
    the runner wrote. Looked at before `scrub`, which may rewrite the log itself."""
    written: list[RunnerRecord] = ["exit_record"] if forged else []
    if output_log_changed(files, record):
        written.append("output_log")
    return tuple(written)


def exited(
    files: RunFiles,
    subtask_id: str,
    attempt: int,
    record: ExitRecord,
    *,
    written_by_others: tuple[RunnerRecord, ...] = (),
) -> AttemptExited:
    """The event that says how an attempt ended: its runner's record and its usage file,
    and which of its runner's records another process wrote."""
    usage = read_usage(files)
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
        written_by_others=written_by_others,
    )
