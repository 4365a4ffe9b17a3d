"""`make attack`: every attack of tests/attack, run, and counted by reproduction.

    python -m tests.attack [pytest arguments]

The exit status is pytest's: 0 only when every attack was defended."""

from __future__ import annotations

import sys

import pytest

if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "tests.attack.tally", "tests/attack", *sys.argv[1:]]))
