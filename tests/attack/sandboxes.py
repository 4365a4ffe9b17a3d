"""The two ways an attack is run, and what must stay as it was outside the agent's reach.

    local     `sandbox: {kind: local}`: the agent runs as the user, and what kairo-orch
              guarantees is that it notices, names and repairs (docs/security.md)
    default   a plan that names no sandbox: bubblewrap, where the attack must change
              nothing outside the agent's worktree and state directory at all

A test of both takes the `mode` fixture (tests/attack/conftest.py) and puts `mode.plan` in
its plan; `make attack` counts its cases by mode (tally.py)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.core.guard import in_kairo_namespace
from tests.e2e.conftest import git, snapshot_checkout


@dataclass(frozen=True)
class Mode:
    name: str  # "local" | "default"

    @property
    def sandboxed(self) -> bool:
        return self.name == "default"

    @property
    def plan(self) -> str:
        """The plan's line for it: none at all for the default settings."""
        return "" if self.sandboxed else "sandbox: {kind: local}"

    @property
    def settings(self) -> dict[str, Any]:
        """The same, as a plan's settings."""
        return {} if self.sandboxed else {"sandbox": {"kind": "local"}}

    @property
    def sandbox(self) -> str:
        """The sandbox its agents run in, as `make attack` counts them."""
        return "bwrap" if self.sandboxed else "local"


LOCAL = Mode("local")
DEFAULT = Mode("default")


def outside(repo: Path, *also: Path) -> dict[str, Any]:
    """Everything of the user's that no agent may change, as it is now: their refs and
    stash, their git directory's config, hooks and info, every object the repository
    holds (by content), their checkout, and the files under `also` (a home, a file)."""
    common = repo / ".git"
    refs = _git(repo, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
    return {
        "refs": [line for line in refs if not in_kairo_namespace(os.fsdecode(line.split()[0]))],
        "stash": _git(repo, "stash", "list", "--format=%H %gs"),
        "git files": _files(common / "config", common / "HEAD", common / "hooks", common / "info"),
        "objects": objects(repo),
        "checkout": snapshot_checkout(repo),
        "also": _files(*also),
    }


def unchanged_outside(repo: Path, before: Mapping[str, Any], *also: Path) -> None:
    """Nothing of `before` changed: every object it had still there with its content (the
    run adds its own), git's fsck clean, and the rest byte for byte."""
    after = outside(repo, *also)
    had = before["objects"]
    assert objects(repo, had) == had, "an object of the repository was changed or removed"
    fsck = subprocess.run(
        ["git", "fsck", "--no-progress", "--no-dangling"], cwd=repo, capture_output=True, text=True
    )
    assert (fsck.returncode, fsck.stdout, fsck.stderr) == (0, "", "")
    for key in ("refs", "stash", "git files", "checkout", "also"):
        assert after[key] == before[key], key


def objects(repo: Path, only: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each object's name to the digest of its content as git reads it (`only`'s names,
    or every object the repository holds): an object overwritten under its own name reads
    differently, one removed reads as missing."""
    if only is None:
        listed = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
        names: Iterable[str] = listed.split()
    else:
        names = only
    wanted = "".join(f"{name}\n" for name in names).encode()
    read = subprocess.run(
        ["git", "cat-file", "--batch"], cwd=repo, input=wanted, capture_output=True, check=True
    ).stdout
    found: dict[str, str] = {}
    for name in wanted.decode().split():
        header, _, read = read.partition(b"\n")
        if header.endswith(b" missing"):
            found[name] = "missing"
            continue
        size = int(header.split()[2])
        found[name] = hashlib.sha256(read[:size]).hexdigest()
        read = read[size + 1 :]
    return found


def _git(repo: Path, *args: str) -> bytes:
    """A git command's output as its bytes: a ref's name need not be UTF-8."""
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout


def _files(*roots: Path) -> dict[str, str]:
    """Each file under `roots` to the digest of its bytes (a link to what it names)."""
    digests: dict[str, str] = {}
    for root in roots:
        for path in sorted([root, *root.rglob("*")] if root.is_dir() else [root]):
            if path.is_symlink():
                digests[str(path)] = f"-> {path.readlink()}"
            elif path.is_file():
                digests[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif not path.exists():
                digests[str(path)] = "absent"
    return digests
