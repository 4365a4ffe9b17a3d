"""Where agent panes go and which are closed (tmux/packing.py): pure, no tmux."""

from __future__ import annotations

import random

import pytest

from orchestrator.tmux import layout, packing
from orchestrator.tmux.layout import PaneRef
from orchestrator.tmux.packing import AgentWindow, Packing
from tests.tmux.conftest import split_chain


def _panes(count: int) -> list[layout.NewPane]:
    return [layout.NewPane(f"t{i}", ["run", str(i)], "/w") for i in range(count)]


def _creates(argv: list[str]) -> list[tuple[str, str, str]]:
    """Each pane-making command: what it is, its target, its pane's last argument."""
    return [
        (c[0], c[c.index("-t") + 1], c[-1])
        for c in split_chain(argv)
        if c[0] in ("split-window", "new-window", "kill-pane")
    ]


def test_panes_opened_together_fill_the_window_then_new_ones_by_name() -> None:
    current = Packing((AgentWindow(1, ("%1",), "@3"),))

    argv, after = packing.open_panes_argv("s", current, _panes(4), panes_per_window=2)

    assert _creates(argv) == [
        ("split-window", "@3", "0"),
        ("new-window", "=s:", "1"),
        ("split-window", "=s:=agents-2", "2"),
        ("new-window", "=s:", "3"),
    ]
    creates = [c for c in split_chain(argv) if c[0] in ("split-window", "new-window")]
    assert all(c[-6:-3] == ["-P", "-F", layout.REF_FORMAT] for c in creates)
    assert after == Packing(
        (
            AgentWindow(1, ("%1", "?0"), "@3"),
            AgentWindow(2, ("?1", "?2")),
            AgentWindow(3, ("?3",)),
        )
    )


def test_placed_gives_pending_panes_and_new_windows_their_ids() -> None:
    current = Packing((AgentWindow(1, ("%1",), "@3"),))
    _, after = packing.open_panes_argv("s", current, _panes(3), panes_per_window=2)

    refs = [PaneRef("%7", "@3"), PaneRef("%8", "@9"), PaneRef("%9", "@9")]

    assert packing.placed(after, refs) == Packing(
        (AgentWindow(1, ("%1", "%7"), "@3"), AgentWindow(2, ("%8", "%9"), "@9"))
    )


def test_a_hole_in_an_early_window_is_filled_before_a_later_one() -> None:
    current = Packing(
        (
            AgentWindow(1, ("%1", "%2", "%3"), "@1"),
            AgentWindow(2, ("%4", "%5"), "@2"),
            AgentWindow(4, ("%6",), "@4"),
        )
    )

    argv, _ = packing.open_panes_argv("s", current, _panes(5), panes_per_window=3)

    assert [(what, target) for what, target, _ in _creates(argv)] == [
        ("split-window", "@2"),
        ("split-window", "@4"),
        ("split-window", "@4"),
        ("new-window", "=s:"),
        ("split-window", "=s:=agents-3"),  # the lowest number free
    ]


def test_at_the_bound_an_ended_pane_is_closed_in_the_same_call() -> None:
    current = Packing((AgentWindow(1, ("%1", "%2"), "@1"), AgentWindow(2, ("%3", "%4"), "@2")))

    argv, after = packing.open_panes_argv(
        "s", current, _panes(2), 2, windows_at_most=2, recyclable=["%9", "%3", "%2"]
    )

    # %9 is none of ours; %3 makes room in agents-2, then %2 in agents-1
    assert _creates(argv) == [
        ("kill-pane", "%3", "%3"),
        ("split-window", "@2", "0"),
        ("kill-pane", "%2", "%2"),
        ("split-window", "@1", "1"),
    ]
    assert after.windows == (
        AgentWindow(1, ("%1", "?1"), "@1"),
        AgentWindow(2, ("%4", "?0"), "@2"),
    )


def test_below_the_bound_a_new_window_comes_before_an_ended_pane_goes() -> None:
    current = Packing((AgentWindow(1, ("%1", "%2"), "@1"),))

    argv, _ = packing.open_panes_argv(
        "s", current, _panes(1), 2, windows_at_most=2, recyclable=["%1"]
    )

    assert [what for what, _, _ in _creates(argv)] == ["new-window"]


def test_closing_a_windows_only_pane_opens_a_new_window_in_its_place() -> None:
    current = Packing((AgentWindow(1, ("%1",), "@1"),))

    argv, after = packing.open_panes_argv(
        "s", current, _panes(1), 1, windows_at_most=1, recyclable=["%1"]
    )

    assert [(what, target) for what, target, _ in _creates(argv)] == [
        ("kill-pane", "%1"),
        ("new-window", "=s:"),
    ]
    assert after == Packing((AgentWindow(1, ("?0",)),))


def test_a_split_that_failed_goes_to_a_new_window() -> None:
    current = Packing((AgentWindow(1, ("%1",), "@1"),))

    argv, _ = packing.open_panes_argv(
        "s", current, _panes(1), 4, windows_at_most=1, recyclable=["%1"], new_window=True
    )

    assert [what for what, _, _ in _creates(argv)] == ["new-window"]


def test_read_packing_keeps_agents_windows_and_their_panes() -> None:
    text = (
        "@0\tsupervisor\t%0\tkairo-orch watch\n@1\tagents-1\t%1\tpython run a/1/runner.json\n"
        "@1\tagents-1\t%2\tpython\tx\n@5\tagents-3\t%7\t\n@6\tnotes\t%8\tvi\n@7\tagents-x\t%9\tsh\n"
    )

    assert packing.read_packing(text) == Packing(
        (AgentWindow(1, ("%1", "%2"), "@1"), AgentWindow(3, ("%7",), "@5"))
    )
    commands = packing.start_commands(text)
    assert commands["%1"] == "python run a/1/runner.json" and commands["%2"] == "python\tx"


def test_closing_panes_tiles_the_windows_left_and_drops_the_empty_ones() -> None:
    current = Packing((AgentWindow(1, ("%1", "%2"), "@1"), AgentWindow(2, ("%3",), "@2")))

    argv = packing.close_panes_argv("s", current, ["%1", "%3"])

    assert split_chain(argv) == [
        ["kill-pane", "-t", "%1"],
        ["kill-pane", "-t", "%3"],
        ["select-layout", "-t", "@1", "tiled"],
    ]
    assert packing.without(current, ["%1", "%3"]) == Packing((AgentWindow(1, ("%2",), "@1"),))


def test_windows_needed_is_those_of_the_running_agents_and_one() -> None:
    assert packing.windows_needed(32, 4) == 9
    assert packing.windows_needed(8, 4) == 3
    assert packing.windows_needed(9, 4) == 4
    assert packing.windows_needed(1, 4) == 2


@pytest.mark.parametrize("seed", range(20))
def test_a_long_run_keeps_its_windows_bounded(seed: int) -> None:
    """A thousand attempts, eight at once, ended ones closed at random moments or left
    open: the windows never exceed the bound, and no running pane is ever closed."""
    rng = random.Random(seed)
    max_parallel, per_window = 8, 4
    bound = packing.windows_needed(max_parallel, per_window)
    current = Packing()
    running: list[str] = []
    ended: list[str] = []
    serial = 0
    for _ in range(1000):
        if len(running) == max_parallel or (running and rng.random() < 0.5):
            ended.append(running.pop(rng.randrange(len(running))))
        if ended and rng.random() < 0.3:  # the grace period of some ran out
            gone = ended[: rng.randint(1, len(ended))]
            current = packing.without(current, gone)
            ended = ended[len(gone) :]
        opening = rng.randint(1, max_parallel - len(running))
        argv, after = packing.open_panes_argv(
            "s", current, _panes(opening), per_window, windows_at_most=bound, recyclable=ended
        )
        closed = [c[2] for c in split_chain(argv) if c[0] == "kill-pane"]
        assert not set(closed) & set(running)
        ended = [p for p in ended if p not in closed]
        refs = []
        for window in after.windows:
            for pane in window.panes:
                if pane.startswith("?"):
                    serial += 1
                    refs.append((int(pane[1:]), PaneRef(f"%{serial}", f"@{window.number}")))
        refs.sort()
        current = packing.placed(after, [ref for _, ref in refs])
        running += [ref.pane_id for _, ref in refs]
        assert len(current.windows) <= bound
        assert sum(len(w.panes) for w in current.windows) == len(running) + len(ended)
