"""The real agent programs the tests run: pinned versions, installed once into a cache
outside the clone, found there by the tests.

    python -m tests.real_agents install     (what `make test` runs first)

Claude Code and Codex CLI come from the npm registry, Aider from PyPI into a virtual
environment of its own (~700 MB, it pins its own dependencies). Each lands in
`$KAIRO_AGENTS_CACHE` (default `~/.cache/kairo-orch/agents`) under a directory named by its
version, so a later run, or another clone, reuses it, and a new pin installs beside the
old. Where npm or the registries are out of reach, the install says so and the tests that
need the program skip, unless KAIRO_TEST_REQUIRE_AGENTS=1 (CI), where they fail.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REQUIRE = "KAIRO_TEST_REQUIRE_AGENTS"


@dataclass(frozen=True)
class Program:
    name: str  # the command
    package: str
    version: str
    registry: str  # "npm" | "pypi"

    @property
    def home(self) -> Path:
        return cache() / f"{self.name}-{self.version}"

    @property
    def binary(self) -> Path:
        if self.registry == "npm":
            return self.home / "node_modules" / ".bin" / self.name
        return self.home / "bin" / self.name

    @property
    def installed(self) -> bool:
        return (self.home / ".installed").exists() and self.binary.exists()


CLAUDE = Program("claude", "@anthropic-ai/claude-code", "2.1.197", "npm")
CODEX = Program("codex", "@openai/codex", "0.171.0", "npm")
AIDER = Program("aider", "aider-chat", "0.86.2", "pypi")
PROGRAMS = (CLAUDE, CODEX, AIDER)


def cache() -> Path:
    configured = os.environ.get("KAIRO_AGENTS_CACHE")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kairo-orch" / "agents"


def required() -> bool:
    return os.environ.get(REQUIRE) == "1"


def missing_reason(program: Program) -> str:
    return (
        f"{program.package} {program.version} is not installed in {program.home} "
        "(`python -m tests.real_agents install`, which `make test` runs)"
    )


def installed(program: Program) -> Path:
    """The program's binary, for a test that runs it: skipped where it is not installed,
    failed in CI (KAIRO_TEST_REQUIRE_AGENTS=1), where it must be."""
    import pytest  # here: `python -m tests.real_agents install` runs without it

    if not program.installed:
        if required():
            pytest.fail(missing_reason(program))
        pytest.skip(missing_reason(program))
    return program.binary


def install(program: Program) -> str | None:
    """Install `program` unless it is; None when done, else why it could not be. The stamp
    is written last: a half-done install (a kill, a full disk) is started over."""
    if program.installed:
        return None
    steps = _steps(program)
    if steps is None:
        return "npm is not installed"
    shutil.rmtree(program.home, ignore_errors=True)
    program.home.mkdir(parents=True)
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=1800, check=False)
        if done.returncode != 0:
            shutil.rmtree(program.home, ignore_errors=True)
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
            return f"`{' '.join(step[:2])} ...` failed: {last[0]}"
    (program.home / ".installed").touch()
    return None


def _steps(program: Program) -> list[list[str]] | None:
    if program.registry == "pypi":  # a venv's scripts name its path: made in place
        pip = str(program.home / "bin" / "pip")
        requirement = f"{program.package}=={program.version}"
        return [
            [sys.executable, "-m", "venv", str(program.home)],
            [pip, "install", "--quiet", "--disable-pip-version-check", requirement],
        ]
    npm = shutil.which("npm")
    if npm is None:
        return None
    return [
        [
            npm,
            "install",
            "--prefix",
            str(program.home),
            "--no-audit",
            "--no-fund",
            f"{program.package}@{program.version}",
        ],
    ]


def main(argv: list[str]) -> int:
    if argv != ["install"]:
        print("usage: python -m tests.real_agents install", file=sys.stderr)
        return 2
    cache().mkdir(parents=True, exist_ok=True)
    with open(cache() / ".lock", "w") as lock:  # two `make test` at once install once
        fcntl.flock(lock, fcntl.LOCK_EX)
        failed = 0
        for program in PROGRAMS:
            if program.installed:
                continue
            print(f"installing {program.package} {program.version} into {program.home} ...")
            why = install(program)
            if why is not None:
                failed += 1
                print(f"could not install {program.package} {program.version}: {why}")
    return 1 if failed and required() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
