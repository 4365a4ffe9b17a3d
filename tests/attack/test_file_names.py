"""Reproduction 35.6: one file name stopped an execution for good.

An agent's `printf x > "$(printf 'bad\\377.txt')"` killed the supervisor as it recorded the
commit (`ValueError ... attempt_committed ... non-UTF-8`, `start --wait` exit 6, PAUSED),
and `resume` died the same way. git accepts any bytes in a name but NUL; each must be
recorded losslessly and handed back to git byte for byte: in the integration branch's
tree, in a conflict report, in an agent's resolution prompt. In either sandbox: a name is
made the same way in both.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.attack.sandboxes import LOCAL, Mode
from tests.e2e.conftest import Kairo, git

pytestmark = pytest.mark.slow

#: Names git accepts and UTF-8 JSON does not like, or a shell or a terminal does not.
NAMES = (
    b"bad\xff.txt",  # not UTF-8: the reproduction
    b"new\nline.txt",
    b"tab\there.txt",
    b"esc\x1b[2J\x1b]0;title\x07.txt",
    b"-n",  # a leading dash: an option to any command that takes it for one
    b"--output=x",
    b"quote\"d'.txt",
    b"back\\slash.txt",
    b"dir\xfe/sub\xc3(\x80.txt",  # in a directory that is not UTF-8 either
    (b"long\xe9" * 40)[:196] + b".txt",  # 200 bytes
)


def octal(name: bytes) -> str:
    """`name` as a printf format that prints exactly its bytes."""
    return "".join(chr(b) if bytes([b]).isalnum() else f"\\{b:03o}" for b in name)


def shell_name(name: bytes) -> str:
    """A shell word that is `name`, whatever its bytes."""
    return f"\"$(printf '{octal(name)}')\""


def writes(files: dict[bytes, bytes]) -> str:
    """A shell line that writes each file, making its directory first."""
    lines = []
    for name, content in files.items():
        if b"/" in name:
            lines.append(f'mkdir -p "$(dirname {shell_name(name)})"')
        lines.append(f"printf '{octal(content)}' > {shell_name(name)}")
    return "; ".join(lines)


def plan(kairo: Kairo, mode: Mode, name: str, subtasks: dict[str, str], **settings: Any) -> Path:
    """A plan of shell agents in `mode`'s sandbox; its YAML is JSON, which quotes any line."""
    document = {
        "version": 1,
        "name": name,
        **mode.settings,
        **settings,
        "subtasks": [
            {"id": sid, "agent": {"kind": "shell", "run": run}} for sid, run in subtasks.items()
        ],
    }
    return kairo.write_plan(json.dumps(document), f"{name}.yaml")


def tree(repo: Path, branch: str) -> dict[bytes, bytes]:
    """Every file of `branch`, its name's bytes to its content, as git holds them."""
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "-z", branch], cwd=repo, capture_output=True, check=True
    ).stdout
    files = {}
    for entry in listed.split(b"\0")[:-1]:
        header, name = entry.split(b"\t", 1)
        oid = header.split()[2]
        blob = subprocess.run(
            ["git", "cat-file", "blob", oid], cwd=repo, capture_output=True, check=True
        )
        files[name] = blob.stdout
    return files


def name_bytes(value: str | dict[str, str]) -> bytes:
    """A name as a JSON consumer of `status --json`, `report --json` or the log gets its
    bytes back (docs/store.md): a string's UTF-8, or an object's base64."""
    if isinstance(value, dict):
        return base64.b64decode(value["base64"])
    return value.encode("utf-8")


def json_of(kairo: Kairo, *args: str) -> Any:
    """A command's JSON output, checked to be I-JSON: no lone surrogate escaped in it."""
    done = kairo.run(*args)
    assert done.returncode == 0, done.stderr
    assert "\\ud" not in done.stdout.lower(), done.stdout
    return json.loads(done.stdout)


def events_of(kairo: Kairo, event_type: str) -> list[dict[str, Any]]:
    done = kairo.run("events", "--json")
    assert done.returncode == 0, done.stderr
    found = [json.loads(line) for line in done.stdout.splitlines()]
    return [event["payload"] for event in found if event["event_type"] == event_type]


@pytest.mark.reproduces("35.6")
def test_any_name_an_agent_makes_is_merged_byte_for_byte(
    kairo: Kairo, repo: Path, mode: Mode
) -> None:
    files = {name: f"file {i}\n".encode() for i, name in enumerate(NAMES)}
    names = plan(kairo, mode, "names", {"names": writes(files)})
    started = kairo.run("start", str(names), "--wait")

    assert started.returncode == 0, started.stderr
    status = json_of(kairo, "status", "--json")
    assert status["status"] == "COMPLETED"
    merged = tree(repo, status["integration_branch"])
    assert merged == {b"README.md": b"project\n", **files}
    (committed,) = events_of(kairo, "attempt_committed")
    assert sorted(map(name_bytes, committed["paths"])) == sorted(NAMES)
    (entry,) = json_of(kairo, "report", "--json")["merged"]
    assert sorted(map(name_bytes, entry["changed_paths"])) == sorted(NAMES)


CLASH = (b"clash\xff.txt", b"two\nlines\x1b.txt")


@pytest.mark.reproduces("35.6")
def test_a_conflict_on_such_a_name_is_reported_naming_it(
    kairo: Kairo, repo: Path, mode: Mode
) -> None:
    left = writes({name: b"left\n" for name in CLASH})
    right = writes({name: b"right\n" for name in CLASH})
    started = kairo.run(
        "start", str(plan(kairo, mode, "clash", {"left": left, "right": right})), "--wait"
    )

    assert started.returncode == 1, started.stderr
    status = json_of(kairo, "status", "--json")
    conflicted = status["subtasks"][1]
    assert (conflicted["id"], conflicted["state"]) == ("right", "conflicted")
    assert sorted(name_bytes(c["path"]) for c in conflicted["conflicts"]) == sorted(CLASH)
    assert all(c["with"] == ["left"] for c in conflicted["conflicts"])
    (reported,) = json_of(kairo, "report", "--json")["conflicted"]
    assert sorted(name_bytes(c["path"]) for c in reported["conflicts"]) == sorted(CLASH)
    # What git holds is what was reported: the very names, on the branch that conflicts.
    branch = conflicted["branch"]
    assert {name: tree(repo, branch)[name] for name in CLASH} == dict.fromkeys(CLASH, b"right\n")


@pytest.mark.reproduces("35.6")
def test_an_agent_asked_to_resolve_a_conflict_is_named_the_very_file(
    kairo: Kairo, repo: Path, mode: Mode
) -> None:
    (name,) = CLASH[:1]
    path = shell_name(name)
    # Asked to resolve, the agent keeps both sides, if its prompt names the very file.
    resolve = (
        f'if grep -q "<<<<<<<" {path}; then grep -qF {path} "$KAIRO_PROMPT_FILE"'
        f" && printf 'left\\nright\\n' > {path}; else printf 'right\\n' > {path}; fi"
    )
    subtasks = {"left": writes({name: b"left\n"}), "right": resolve}
    resolving = plan(kairo, mode, "resolve", subtasks, resolve_conflicts="agent")
    started = kairo.run("start", str(resolving), "--wait")

    assert started.returncode == 0, started.stderr
    status = json_of(kairo, "status", "--json")
    assert tree(repo, status["integration_branch"])[name] == b"left\nright\n"
    run_root = Path(status["run_root"])
    assert name in (run_root / "right" / "2" / "prompt.txt").read_bytes()
    (conflicted,) = events_of(kairo, "subtask_conflicted")
    assert [name_bytes(c["path"]) for c in conflicted["conflicts"]] == [name]


@pytest.mark.reproduces("35.6")
def test_a_plan_split_over_such_names_and_an_agent_saying_them_run_to_their_end(
    kairo: Kairo, repo: Path, mode: Mode
) -> None:
    """The names reach the log before any agent runs (the plan's split, in its first event),
    and an agent's own words may hold any escape too (its usage file is JSON it writes)."""
    name = NAMES[0]
    (repo / name.decode("utf-8", "surrogateescape")).write_bytes(b"x\n")
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "-m", "a name that is not UTF-8")
    said = '{"input_tokens": 1, "output_tokens": 1, "summary": "done \\udcff \\ud800"}'
    agent = f"printf '%s\\n' '{said}' >> \"$KAIRO_USAGE_FILE\"; printf y >> {shell_name(name)}"
    document = {
        "version": 1,
        "name": "split",
        **mode.settings,
        "agent": {"kind": "shell", "run": agent},
        "subtasks": [
            {
                "id": "each",
                "prompt": "look at {files}",
                "split": {"files": "*.txt", "max_files": 10},
            }
        ],
    }
    started = kairo.run("start", str(kairo.write_plan(json.dumps(document))), "--wait")

    assert started.returncode == 0, started.stderr
    status = json_of(kairo, "status", "--json")
    assert tree(repo, status["integration_branch"])[name] == b"x\ny"
    (created,) = events_of(kairo, "execution_created")
    assert [name_bytes(f) for f in created["plan"]["subtasks"][0]["files"]] == [name]
    (subtask,) = status["subtasks"]
    assert Path(subtask["output"]).with_name("prompt.txt").read_bytes() == b"look at " + name
    (exited,) = events_of(kairo, "attempt_exited")
    if mode.sandboxed:  # its usage file is not its own to write there: no summary of its
        return
    assert name_bytes(exited["summary"]) == "done \udcff \ufffd".encode("utf-8", "surrogateescape")


@pytest.mark.reproduces("35.6")
def test_an_execution_the_name_stopped_before_resumes(kairo: Kairo, repo: Path) -> None:
    """The state the old supervisor died in: the agent's work committed on its branch, and
    no event of it in the log, for it died making that event. Made here as the old one
    made it: killed right after `attempt_exited` (its 8th event, the guard's record one
    of them), the commit then made as its commit step had made it."""
    name = NAMES[0]
    crashed = subprocess.run(
        [
            *kairo_command(),
            "start",
            str(plan(kairo, LOCAL, "old", {"a": writes({name: b"x"})})),
            "--wait",
        ],
        cwd=repo,
        env=dict(kairo.env, KAIRO_FAULT_CRASH_AFTER_EVENT="8"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert crashed.returncode == 6, crashed.stderr
    status = json_of(kairo, "status", "--json")
    assert status["status"] == "PAUSED"
    assert [e["exit_code"] for e in events_of(kairo, "attempt_exited")] == [0]
    assert events_of(kairo, "attempt_committed") == []
    worktree = Path(status["subtasks"][0]["worktree"])
    git(worktree, "add", "--all")
    git(worktree, "commit", "-q", "-m", "kairo-orch: agent changes")

    resumed = kairo.run("resume", "--wait")

    assert resumed.returncode == 0, resumed.stderr
    status = json_of(kairo, "status", "--json")
    assert status["status"] == "COMPLETED"
    assert tree(repo, status["integration_branch"])[name] == b"x"
    (committed,) = events_of(kairo, "attempt_committed")
    assert [name_bytes(path) for path in committed["paths"]] == [name]


def kairo_command() -> list[str]:
    return [sys.executable, "-m", "orchestrator.cli.main"]
