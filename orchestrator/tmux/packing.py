"""Where agent panes go, and which go away: pure, over a model of a session's agents windows.

Agent panes are packed `panes_per_window` to an `agents-N` window. A plan of a thousand
subtasks must not leave a thousand panes: the panes of ended attempts are closed (their
output is in the run's files), and a window whose last pane is closed is gone, as tmux
removes it. So a new pane goes into the first window with room, and a new window is
opened only when every window is full; its number is the lowest one free. Then the
windows are never more than the panes open at once need. When the caller gives a bound
(`windows_at_most`) and every window is full, a pane whose attempt has ended is closed to
make room, in the same tmux call that opens the new one, rather than a window opened.

The model is this process's view: panes closed behind its back make a tmux call fail,
and the caller then reads the windows again (`read_packing`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from orchestrator.tmux import layout
from orchestrator.tmux.layout import AGENT_WINDOW_PREFIX, Command, NewPane, PaneRef

#: What `read_packing` reads: `list-panes -s -F` of the session.
PANES_FORMAT = "#{window_id}\t#{window_name}\t#{pane_id}\t#{pane_start_command}"
# The id a pane has in the model until tmux has said its real one.
_PENDING = "?"


@dataclass(frozen=True, slots=True)
class AgentWindow:
    number: int
    panes: tuple[str, ...]  # pane ids, in the order they opened
    window_id: str | None = None  # None until tmux has said it: then targeted by name

    @property
    def name(self) -> str:
        return f"{AGENT_WINDOW_PREFIX}{self.number}"

    def target(self, session: str) -> str:
        return self.window_id or layout.window_target(session, self.name)


@dataclass(frozen=True, slots=True)
class Packing:
    """Every agents window of a session, by number."""

    windows: tuple[AgentWindow, ...] = ()

    def holding(self, pane_id: str) -> AgentWindow | None:
        return next((w for w in self.windows if pane_id in w.panes), None)


def read_packing(text: str) -> Packing:
    """From `list-panes -s -F PANES_FORMAT`: the agents windows and their panes."""
    windows: dict[int, AgentWindow] = {}
    for line in text.splitlines():
        window_id, name, pane_id, _ = line.split("\t", 3)
        suffix = name.removeprefix(AGENT_WINDOW_PREFIX)
        if not (name.startswith(AGENT_WINDOW_PREFIX) and suffix.isdigit()):
            continue  # the supervisor's window, or one of the user's own
        number = int(suffix)
        known = windows.get(number, AgentWindow(number, (), window_id))
        windows[number] = replace(known, panes=(*known.panes, pane_id))
    return Packing(tuple(windows[n] for n in sorted(windows)))


def open_panes_argv(
    session: str,
    packing: Packing,
    panes: Sequence[NewPane],
    panes_per_window: int,
    *,
    windows_at_most: int | None = None,
    recyclable: Sequence[str] = (),
    new_window: bool = False,
) -> tuple[Command, Packing]:
    """One tmux argv opening `panes` in order; each prints its REF_FORMAT line. Also the
    packing after it, whose new panes have pending ids until `placed` gives the real ones.

    `recyclable`: panes whose attempts have ended, oldest first, which may be closed to make
    room once there are `windows_at_most` windows. `new_window`: the first pane goes into a
    new window whatever room the others seem to have (a split there failed).
    """
    if panes_per_window < 1:
        raise ValueError("panes_per_window must be at least 1")
    windows = {w.number: w for w in packing.windows}
    held = {pane_id for window in packing.windows for pane_id in window.panes}
    spare = [pane_id for pane_id in recyclable if pane_id in held]  # not those closed already
    commands: list[Command] = []
    for i, pane in enumerate(panes):
        window = None if new_window and i == 0 else _with_room(windows, panes_per_window)
        at_bound = windows_at_most is not None and len(windows) >= windows_at_most
        if window is None and at_bound and spare and not (new_window and i == 0):
            closed = spare.pop(0)
            commands.append(["kill-pane", "-t", closed])
            window = _without(windows, closed)
        pending = f"{_PENDING}{i}"
        if window is not None:
            commands += layout.split_commands(window.target(session), pane)
            windows[window.number] = replace(window, panes=(*window.panes, pending))
        else:
            number = next(n for n in range(1, len(windows) + 2) if n not in windows)
            added = AgentWindow(number, (pending,))
            commands += layout.new_window_commands(session, added.name, pane)
            windows[number] = added
    return layout.chain(*commands), Packing(tuple(windows[n] for n in sorted(windows)))


def _with_room(windows: dict[int, AgentWindow], panes_per_window: int) -> AgentWindow | None:
    return next(
        (windows[n] for n in sorted(windows) if len(windows[n].panes) < panes_per_window), None
    )


def _without(windows: dict[int, AgentWindow], pane_id: str) -> AgentWindow | None:
    """Take `pane_id` out of its window; the window, unless that was its last pane (tmux
    then removes the window, and a new one is opened in its place)."""
    window = next(w for w in windows.values() if pane_id in w.panes)
    left = tuple(p for p in window.panes if p != pane_id)
    if not left:
        del windows[window.number]
        return None
    windows[window.number] = replace(window, panes=left)
    return windows[window.number]


def placed(after: Packing, refs: Sequence[PaneRef]) -> Packing:
    """The packing once tmux has opened its pending panes: `refs`, in order, give their
    ids and those of the windows made for them."""
    real = {f"{_PENDING}{i}": ref for i, ref in enumerate(refs)}
    windows = []
    for window in after.windows:
        new = [real[p] for p in window.panes if p in real]
        windows.append(
            replace(
                window,
                panes=tuple(real[p].pane_id if p in real else p for p in window.panes),
                window_id=window.window_id or (new[0].window_id if new else None),
            )
        )
    return Packing(tuple(windows))


def close_panes_argv(session: str, packing: Packing, pane_ids: Sequence[str]) -> Command:
    """One tmux argv closing `pane_ids`, then tiling each window that keeps some panes (a
    closed pane's room goes to its neighbour only)."""
    after = without(packing, pane_ids)
    touched = {w.number for p in pane_ids if (w := packing.holding(p)) is not None}
    kills: list[Command] = [["kill-pane", "-t", pane_id] for pane_id in pane_ids]
    tiles: list[Command] = [
        ["select-layout", "-t", w.target(session), "tiled"]
        for w in after.windows
        if w.number in touched
    ]
    return layout.chain(*kills, *tiles)


def without(packing: Packing, pane_ids: Sequence[str]) -> Packing:
    """The packing once `pane_ids` are closed: a window left with none is gone."""
    gone = set(pane_ids)
    windows = (
        replace(w, panes=tuple(p for p in w.panes if p not in gone)) for w in packing.windows
    )
    return Packing(tuple(w for w in windows if w.panes))


def windows_needed(max_parallel: int, panes_per_window: int) -> int:
    """The agents windows a run of `max_parallel` agents at once keeps: those its running
    agents need, and one more, where the panes of attempts that just ended stay a while."""
    return -(-max_parallel // panes_per_window) + 1


def start_commands(text: str) -> dict[str, str]:
    """From `list-panes -s -F PANES_FORMAT`: each pane's command line, as tmux shows it."""
    return {
        pane_id: command
        for _, _, pane_id, command in (line.split("\t", 3) for line in text.splitlines())
    }
