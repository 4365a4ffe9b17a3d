"""Merges checked in batches end as merges checked one by one do, with fewer checks.

On generated plans, batch sizes and culprits, with a check that is a function of the tree
which, once failing, fails for every longer run (integration_answers.py): the subtasks
merged, in their order, are those of one-by-one checking, and the checks are at most one
per batch plus a bisection per culprit.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_decide import plan, run, start, subtask
from tests.core.test_stop_and_integration import CheckedWorld


def checked(ids: list[str], batch: int, order: str = "plan"):  # type: ignore[no-untyped-def]
    return plan(*(subtask(i) for i in ids), max_parallel=len(ids), merge_order=order).model_copy(
        update={"integration_verify": "check", "integration_batch": batch}
    )


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(1, 32),
    batch=st.integers(1, 48),
    culprits=st.sets(st.integers(0, 31), max_size=4),
    order=st.sampled_from(["plan", "completion"]),
    clashes=st.dictionaries(st.integers(0, 31), st.integers(0, 31), max_size=4),
)
def test_the_same_subtasks_merge_as_checked_one_by_one(
    n: int, batch: int, culprits: set[int], order: str, clashes: dict[int, int]
) -> None:
    ids = [f"s{i:02}" for i in range(n)]
    broken = {ids[i] for i in culprits if i < n}
    # Pairs whose changes conflict: the later one in merge order conflicts if the other
    # is on the branch when it merges.
    pairs = {ids[v]: ids[o] for v, o in clashes.items() if v < n and o < n and v != o}
    one_by_one = CheckedWorld(broken_by=tuple(broken), conflicts_with=pairs)
    expected = run(start(checked(ids, 1, order)), one_by_one, limit=5000)
    world = CheckedWorld(broken_by=tuple(broken), conflicts_with=pairs)
    final = run(start(checked(ids, batch, order)), world, limit=5000)
    assert final.merged == expected.merged
    conflicted = {sid for sid, v in final.subtasks.items() if v.state == "conflicted"}
    assert conflicted == {sid for sid, v in expected.subtasks.items() if v.state == "conflicted"}
    failed = {sid for sid, v in final.subtasks.items() if v.state == "failed"}
    assert failed == {sid for sid, v in expected.subtasks.items() if v.state == "failed"}
    if pairs:
        return  # the check counts below hold for merges that never conflict
    assert final.merged == tuple(i for i in ids if i not in broken)
    assert failed == broken
    assert len(one_by_one.checked) == n
    # Every subtask is accepted before the first merge here (run carries out attempt
    # steps first): one check a batch, and a bisection and one more check per culprit.
    bisection = math.ceil(math.log2(min(batch, n))) + 1
    assert len(world.checked) <= math.ceil(n / min(batch, n)) + len(broken) * (bisection + 1)
    if not broken:
        assert len(world.checked) == math.ceil(n / batch)


def test_thirty_two_merges_and_one_culprit_take_seven_checks_in_batches_of_sixteen() -> None:
    ids = [f"s{i:02}" for i in range(32)]
    for culprit in ids:
        world = CheckedWorld(broken_by=(culprit,))
        run(start(checked(ids, 16)), world, limit=5000)
        assert len(world.checked) <= 7, (culprit, world.checked)
