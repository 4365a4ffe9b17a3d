#!/usr/bin/env python3
"""How many runs of `integration_verify` the merge queue makes, by batch size and number of
culprits: the figures `integration_batch`'s default was chosen by (docs/benchmarks.md).

32 subtasks all accepted before the first merge, in plan order; a check that fails once
any culprit is merged. Every placement of one culprit; for more, 200 random placements
(seeded). Pure: the decide/fold core against scripted answers, no git, in seconds.
"""

from __future__ import annotations

import itertools
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.core.test_checked_in_batches import checked
from tests.core.test_decide import run, start
from tests.core.test_stop_and_integration import CheckedWorld

SUBTASKS = 32
BATCHES = (1, 4, 8, 16, 32)
CULPRITS = (0, 1, 2, 4)


def checks(batch: int, broken: tuple[str, ...]) -> int:
    ids = [f"s{i:02}" for i in range(SUBTASKS)]
    world = CheckedWorld(broken_by=broken)
    run(start(checked(ids, batch)), world, limit=20_000)
    return len(world.checked)


def placements(culprits: int) -> list[tuple[str, ...]]:
    ids = [f"s{i:02}" for i in range(SUBTASKS)]
    if culprits <= 1:
        return [tuple(c) for c in itertools.combinations(ids, culprits)]
    rng = random.Random(culprits)
    return [tuple(rng.sample(ids, culprits)) for _ in range(200)]


def main() -> int:
    print("checks of 32 merges: median (max) over culprit placements")
    print("batch | " + " | ".join(f"{c} culprit(s)" for c in CULPRITS))
    for batch in BATCHES:
        cells = []
        for culprits in CULPRITS:
            counts = [checks(batch, broken) for broken in placements(culprits)]
            cells.append(f"{statistics.median(counts):g} ({max(counts)})")
        print(f"{batch:5} | " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
