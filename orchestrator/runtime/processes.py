"""Short commands the supervisor itself runs (the verify gate), with their output kept."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import trio

OUTPUT_TAIL_BYTES = 4096  # how much of a command's output an event keeps: its end


@dataclass(frozen=True)
class ShellResult:
    exit_code: int
    output: str  # stdout and stderr, interleaved as they came


async def run_shell(command: str, *, cwd: Path, env: Mapping[str, str]) -> ShellResult:
    completed = await trio.run_process(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        stderr=subprocess.STDOUT,
        check=False,
    )
    output = completed.stdout.decode("utf-8", errors="replace") if completed.stdout else ""
    return ShellResult(exit_code=completed.returncode, output=output)
