"""A supervisor forked ahead of its execution: abandoned, handed over, or dead.

Each scenario (supervisor_scenarios.py) runs in an interpreter of its own, as a command
does: this test process runs threads, and a supervisor is not forked from one that does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.errors import StepFailed
from orchestrator.runtime.supervisor_process import farewell
from tests import postgres

ROOT = Path(__file__).resolve().parents[2]


def scenario(name: str, *arguments: str) -> None:
    code = f"from tests.runtime import supervisor_scenarios as s; s.{name}(*{arguments!r})"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{name}:\n{done.stdout}{done.stderr}"


@pytest.mark.parametrize(
    "name",
    [
        "abandoned",
        "a_session_of_its_own_named_kairo_orch",
        "refused_while_a_thread_runs",
        "keeps_none_of_the_commands_other_descriptors",
        "killed_when_too_slow",
        "imports_out_of_gc_leaves_the_collector_as_it_was",
    ],
)
def test_a_pending_supervisor(name: str) -> None:
    scenario(name)


@pytest.mark.parametrize(
    "name",
    [
        "handed_over_to_its_log",
        "a_farewell_is_only_its_own",
        "a_farewell_comes_before_what_else_it_said",
        "handed_over_after_it_died",
        "refused_while_a_store_is_open",
    ],
)
def test_a_pending_supervisor_in_a_directory(name: str, tmp_path: Path) -> None:
    scenario(name, str(tmp_path))


def test_a_pending_supervisor_is_refused_while_a_postgresql_store_is_open() -> None:
    with postgres.fresh_schema() as url:
        scenario("refused_while_a_postgresql_store_is_open", url)


def test_a_farewell_is_one_line_of_our_error_unwrapped_from_trios_groups_of_one() -> None:
    nested = ExceptionGroup("nursery", [ExceptionGroup("inner", [StepFailed("tmux: gone")])])
    assert farewell(nested) == "tmux: gone"
    assert farewell(ValueError("two\nlines")) == "ValueError: two lines"
    both = ExceptionGroup("nursery", [StepFailed("a"), StepFailed("b")])
    assert farewell(both) == "ExceptionGroup: nursery (2 sub-exceptions)"
