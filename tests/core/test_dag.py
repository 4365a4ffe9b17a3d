"""Plan order, cycles and dependents: small graphs by hand, then against naive versions."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.core.dag import dependents, find_cycle, merge_order, stable_topological_order
from orchestrator.core.plan import AgentSpec, ResolvedPlan, ResolvedSubtask


def make_plan(edges: dict[str, tuple[str, ...]]) -> ResolvedPlan:
    agent = AgentSpec(run="true")
    subtasks = tuple(
        ResolvedSubtask(id=i, title=i, prompt="", depends_on=d, agent=agent)
        for i, d in edges.items()
    )
    return ResolvedPlan(name="demo", subtasks=subtasks)


def test_merge_order_puts_dependencies_first_then_the_order_written() -> None:
    plan = make_plan({"c": ("b",), "a": (), "b": (), "d": ("a",), "e": ()})
    # c waits for b; everything else keeps its place
    assert merge_order(plan) == ("a", "b", "c", "d", "e")


def test_merge_order_of_independent_subtasks_is_the_order_written() -> None:
    assert merge_order(make_plan({"z": (), "y": (), "x": ()})) == ("z", "y", "x")


def test_stable_order_refuses_a_cycle() -> None:
    with pytest.raises(ValueError, match="cycle among a, b"):
        stable_topological_order(["a", "b", "c"], {"a": ["b"], "b": ["a"]})


def test_find_cycle() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    assert find_cycle({"a": ["b"], "b": ["a"]}) == ["a", "b", "a"]
    assert find_cycle({"x": ["a"], "a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["a"]}) == ["a", "a"]
    assert find_cycle({"a": ["unknown"]}) is None  # unknown ids are reported elsewhere
    # a diamond is not a cycle, however often it is reached
    assert find_cycle({"d": ["b", "c"], "b": ["a"], "c": ["a"], "a": []}) is None


def test_find_cycle_on_a_long_chain_needs_no_recursion() -> None:
    chain = {str(n): [str(n + 1)] for n in range(5000)}
    chain["5000"] = ["0"]
    cycle = find_cycle(chain)
    assert cycle is not None and len(cycle) == 5002


def test_dependents() -> None:
    plan = make_plan({"a": (), "b": ("a",), "c": ("b",), "d": (), "e": ("a", "c")})
    assert dependents(plan, "a") == ("b", "e")
    assert dependents(plan, "a", transitive=True) == ("b", "c", "e")
    assert dependents(plan, "d", transitive=True) == ()


@st.composite
def graphs(draw: st.DrawFn, acyclic: bool) -> dict[str, list[str]]:
    size = draw(st.integers(min_value=0, max_value=8))
    ids = [f"n{k}" for k in draw(st.permutations(range(size)))]
    edges: dict[str, list[str]] = {}
    for node in ids:
        # acyclic: only edges to nodes of higher rank (by name), whatever the written order
        pool = [o for o in ids if not acyclic or o > node]
        edges[node] = draw(st.lists(st.sampled_from(pool), unique=True)) if pool else []
    return edges


def naive_order(ids: list[str], edges: dict[str, list[str]]) -> list[str]:
    placed: list[str] = []
    while len(placed) < len(ids):
        placed.append(next(n for n in ids if n not in placed and set(edges[n]) <= set(placed)))
    return placed


def has_cycle(edges: dict[str, list[str]]) -> bool:
    reach = {n: set(d) for n, d in edges.items()}
    for _ in edges:
        for node in reach:
            reach[node] |= {far for near in reach[node] for far in reach[near]}
    return any(node in reach[node] for node in reach)


@settings(max_examples=25, deadline=None)
@given(graphs(acyclic=True))
def test_stable_order_is_the_naive_rule(edges: dict[str, list[str]]) -> None:
    ids = list(edges)
    assert list(stable_topological_order(ids, edges)) == naive_order(ids, edges)


@settings(max_examples=25, deadline=None)
@given(graphs(acyclic=False))
def test_find_cycle_finds_a_real_cycle_exactly_when_there_is_one(
    edges: dict[str, list[str]],
) -> None:
    cycle = find_cycle(edges)
    assert (cycle is not None) == has_cycle(edges)
    if cycle is not None:
        assert cycle[0] == cycle[-1]
        assert len(set(cycle[:-1])) == len(cycle) - 1
        assert all(b in edges[a] for a, b in itertools.pairwise(cycle))
