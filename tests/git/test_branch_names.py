"""branch_names.py agrees with git: every name `git check-ref-format --branch` refuses is
refused by the pure check too (which refuses a few more: '-x', 'HEAD', very long names)."""

from __future__ import annotations

import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.core.branch_names import branch_name_problem

PIECES = ["a", "b", "kairo", "x1", ".", "..", "/", "//", "@", "@{", "{", "}", "~", "^", ":",
          "?", "*", "[", "\\", " ", "\t", ".lock", "-", "_", "HEAD", "\x7f", "é"]  # fmt: skip


def git_takes(name: str) -> bool:
    done = subprocess.run(
        ["git", "check-ref-format", "--branch", name], capture_output=True, check=False
    )
    return done.returncode == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("".join))
def test_what_git_refuses_is_refused(name: str) -> None:
    if not git_takes(name):
        assert branch_name_problem(name) is not None, name


def test_the_names_of_the_campaign() -> None:
    for name in ("a b", "a..b", "a.lock", "x/", "a@{1}", "a~1", "a:b", ".hidden", "x" * 300,
                 "HEAD", "@", "-x"):  # fmt: skip
        assert branch_name_problem(name) is not None, name
    for name in ("kairo/p/abc123", "feature/fix-1", "origin/main", "a.b_c-d"):
        assert branch_name_problem(name) is None and git_takes(name), name
