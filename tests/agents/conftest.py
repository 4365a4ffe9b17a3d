"""Running an adapter's command line for real: against the stand-ins, or the real CLIs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agents.base import AttemptContext

STANDINS = Path(__file__).parent / "standins"


@dataclass
class Run:
    code: int
    out: str
    usage: list[dict[str, Any]]
    argv: list[list[str]] = field(default_factory=list)  # what the stand-in was given

    @property
    def record(self) -> dict[str, Any]:
        """The one usage line the filter must have written."""
        assert len(self.usage) == 1, self.usage
        return self.usage[0]


@dataclass
class Attempts:
    """One subtask's attempts: a worktree, an empty HOME, a run directory per attempt."""

    root: Path
    scenario: str = "success"
    env: dict[str, str] = field(default_factory=dict)
    number: int = 0

    @property
    def worktree(self) -> Path:
        return self.root / "worktree"

    @property
    def home(self) -> Path:
        return self.root / "home"

    def context(self, prompt: str = "Rename fmt to format", **extra: Any) -> AttemptContext:
        self.number += 1
        run_dir = self.run_dir(self.number)
        (run_dir / "scratch").mkdir(parents=True, exist_ok=True)
        (run_dir / "prompt.txt").write_text(prompt)
        fields: dict[str, Any] = {
            "execution_id": "01JEXEC",
            "subtask_id": "rename",
            "attempt": self.number,
            "prompt": prompt,
            "prompt_file": str(run_dir / "prompt.txt"),
            "feedback": "",
            "files": (),
            "worktree": str(self.worktree),
            "idempotency_key": f"key-{self.number}",
            "usage_file": str(run_dir / "usage.jsonl"),
            "scratch": str(run_dir / "scratch"),
            **extra,
        }
        return AttemptContext(**fields)

    def run_dir(self, number: int) -> Path:
        return self.root / "runs" / str(number)

    def usage_files(self) -> list[str]:
        return [str(self.run_dir(n) / "usage.jsonl") for n in range(1, self.number + 1)]

    def environment(self, context: AttemptContext, extra: dict[str, str]) -> dict[str, str]:
        """What the supervisor would give the agent, with nothing of this machine's user:
        no credentials, an empty HOME, the stand-ins first on PATH."""
        env = {
            "PATH": f"{STANDINS}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "STANDIN_SCENARIO": self.scenario,
            "STANDIN_ARGV_FILE": str(self.root / "argv.jsonl"),
            **context.environment(),
            **self.env,
        }
        env.update(extra)
        return env

    def run(
        self,
        argv: list[str],
        context: AttemptContext,
        extra_env: dict[str, str] | None = None,
        *,
        stop_when: str | None = None,
        stop_after: float | None = None,
        timeout: float = 60.0,
        cwd: Path | None = None,
    ) -> Run:
        """Run `argv` in the worktree as the runner would; with `stop_when`/`stop_after`,
        SIGTERM the filter (only it: it must pass the signal on) once its output holds
        that text, or after that many seconds."""
        env = self.environment(context, extra_env or {})
        argv_file = Path(env["STANDIN_ARGV_FILE"])
        argv_file.unlink(missing_ok=True)
        out_path = self.root / "out.txt"
        with out_path.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                cwd=cwd or self.worktree,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                deadline = time.monotonic() + timeout
                signalled = False
                while proc.poll() is None:
                    now = time.monotonic()
                    assert now < deadline, f"still running after {timeout}s: {argv}"
                    text = out_path.read_text(errors="replace")
                    due = (stop_when is not None and stop_when in text) or (
                        stop_after is not None and now >= deadline - timeout + stop_after
                    )
                    if due and not signalled:
                        proc.send_signal(signal.SIGTERM)
                        signalled = True
                    time.sleep(0.02)
            finally:
                # whatever is left of its session, as the runner does after the agent exits
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        usage_file = Path(context.usage_file)
        usage = (
            [json.loads(line) for line in usage_file.read_text().splitlines()]
            if (usage_file.exists())
            else []
        )
        given = (
            [json.loads(line) for line in argv_file.read_text().splitlines()]
            if (argv_file.exists())
            else []
        )
        return Run(proc.returncode, out_path.read_text(errors="replace"), usage, given)


@pytest.fixture
def attempts(tmp_path: Path) -> Attempts:
    found = Attempts(tmp_path)
    found.worktree.mkdir()
    found.home.mkdir()
    subprocess.run(["git", "init", "-q", str(found.worktree)], check=True)
    return found
