"""`make chaos`'s short form, in `make test`: every kind of fault once, at a small size."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import postgres

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_quick_chaos_campaign_ends_every_run_as_its_plan_means(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAIRO_", "TMUX"))}
    done = subprocess.run(
        [sys.executable, "-m", "tests.chaos", "--quick", "--workdir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    if "PostgreSQL runs not made" in done.stdout and not postgres.REQUIRED:
        pytest.skip("no PostgreSQL server programs here; CI runs the whole campaign")
    assert done.returncode == 0, done.stdout + done.stderr
    # The exit status says the runs held; the counts say something was done to them.
    assert re.search(r"supervisors killed with -9, then resumed +[1-9]", done.stdout)
    assert re.search(r"PostgreSQL outages.* +1 \(", done.stdout), done.stdout
    assert re.search(r"left after clean +worktrees 0, branches 0, panes 0", done.stdout)
