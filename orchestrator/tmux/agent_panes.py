"""The agent panes of one tmux server: opened in batches, closed once their attempts ended,
retitled only when their title changes. TmuxServer (server.py) holds one.

In a fan-out panes are asked for faster than tmux opens them one call each (one more pane
chained into a call costs a tenth of a call of its own), so the requests that queue up
behind a call go together in the next one. Where each goes is `packing.py`'s (pure); this
module keeps each session's packing between calls and says what to do when tmux answers
otherwise than the packing expected.
"""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Awaitable, Callable, Sequence

import structlog
import trio

from orchestrator.errors import EnvironmentProblem, StepFailed
from orchestrator.tmux import layout, packing
from orchestrator.tmux.layout import NewPane, PaneRef
from orchestrator.tmux.packing import Packing

log = structlog.get_logger(__name__)

Run = Callable[[Sequence[str]], Awaitable[str]]  # a tmux call; StepFailed when it fails
RunRaw = Callable[[Sequence[str]], Awaitable[subprocess.CompletedProcess[bytes]]]


@dataclasses.dataclass(frozen=True, slots=True)
class Placing:
    """How the panes of one session are placed: so many to a window and, where the caller
    says how many agents run at once, so many windows (packing.windows_needed)."""

    panes_per_window: int
    windows_at_most: int | None
    recyclable: tuple[tuple[str, str], ...]  # (pane id, what its command names), oldest first


@dataclasses.dataclass(slots=True)
class _PaneRequest:
    """An agent pane asked for, and once its tmux call is over, where it opened or why not."""

    pane: NewPane
    placing: Placing
    ref: PaneRef | None = None
    error: BaseException | None = None

    @property
    def answered(self) -> bool:
        return self.ref is not None or self.error is not None


class AgentPanes:
    def __init__(self, run: Run, run_raw: RunRaw) -> None:
        self._run = run
        self._run_raw = run_raw
        self._lock = trio.Lock()
        self._packing: dict[str, Packing] = {}
        self._queued: dict[str, list[_PaneRequest]] = {}
        # The title each pane was last given here: the supervisor retitles after every
        # event, and most leave the title as it was (one tmux client each, for nothing).
        # Only we write @kairo_title, which the border shows, so nobody else changes it.
        self._titles: dict[str, str] = {}
        # Panes closed here: retitling one would be a tmux call that fails.
        self._closed: set[str] = set()
        # Each pane's command line, as opened here or as tmux showed it. A pane id is
        # unique only within one tmux server: once the server was killed and started
        # again, the id of an ended attempt's pane may be that of a running agent's. So
        # a pane is closed only if its command names what the caller says it does.
        self._commands: dict[str, str] = {}

    def forget(self, session: str, *, new: bool = False) -> None:
        """Ask tmux where `session`'s windows are next time; `new`: it has none yet."""
        self._packing.pop(session, None)
        if new:  # its first panes need not ask tmux where to go
            self._packing[session] = Packing()

    def forget_all(self) -> None:
        self._packing.clear()

    async def open(self, session: str, pane: NewPane, placing: Placing) -> PaneRef:
        """Calls are serialized (each places its pane from where the last one put its own),
        and those that queue up behind one go together in the next tmux call."""
        request = _PaneRequest(pane, placing)
        self._queued.setdefault(session, []).append(request)
        try:
            async with self._lock:
                if not request.answered:  # nobody took it along: it leads the next call
                    await self._open_queued(session, self._queued.pop(session))
        finally:
            queued = self._queued.get(session, [])
            if not request.answered and request in queued:
                queued.remove(request)  # cancelled while it queued: it was never asked for
        if request.error is not None:
            raise request.error
        assert request.ref is not None
        return request.ref

    async def _open_queued(self, session: str, batch: list[_PaneRequest]) -> None:
        """Answer every request of `batch`, in one tmux call while that goes well."""
        try:
            if len(batch) > 1:
                await self._open_together(session, batch)
            for request in batch:
                if not request.answered:  # alone, or left over from a call that failed
                    try:
                        request.ref = await self._open_one(session, request)
                    except (StepFailed, EnvironmentProblem) as error:
                        request.error = error
        except BaseException:
            # Cancelled or failed midway, a pane may exist or not: ask tmux next time.
            self._packing.pop(session, None)
            for request in batch:
                if not request.answered:
                    request.error = StepFailed("opening its tmux pane was cut short")
            raise
        for request in batch:
            if request.ref is not None:
                self._titles[request.ref.pane_id] = request.pane.title
                self._commands[request.ref.pane_id] = " ".join(request.pane.command)
                self._closed.discard(request.ref.pane_id)  # a new server numbers anew

    async def _open_together(self, session: str, batch: list[_PaneRequest]) -> None:
        """Open `batch`'s panes in one call. tmux skips the rest of a chain at a failing
        command, so the panes it printed are the first ones asked for; the others are left
        to be opened one by one, from where tmux says the windows now are."""
        current = await self._current(session)
        placing = _together(batch)
        argv, after = packing.open_panes_argv(
            session,
            current,
            [request.pane for request in batch],
            placing.panes_per_window,
            windows_at_most=placing.windows_at_most,
            recyclable=self._ours(placing.recyclable),
        )
        result = await self._run_raw(argv)
        lines = result.stdout.decode(errors="replace").splitlines()
        refs = [layout.parse_pane_ref(line) for line in lines if line.strip()]
        for request, ref in zip(batch, refs, strict=False):
            request.ref = ref
        if result.returncode == 0 and len(refs) == len(batch):
            self._packing[session] = packing.placed(after, refs)
        else:
            reason = result.stderr.decode(errors="replace").strip()
            log.warning("tmux_panes_opened_in_part", opened=len(refs), of=len(batch), error=reason)
            self._packing.pop(session, None)
        log.info("tmux_panes_opened", pane_ids=[ref.pane_id for ref in refs])

    async def _open_one(self, session: str, request: _PaneRequest) -> PaneRef:
        current = await self._current(session)
        try:
            return await self._place(session, current, request, new_window=False)
        except StepFailed as error:
            # A pane it meant to close or a window it meant to split was closed behind our
            # back, or the window has no room left at the client's size: the pane goes
            # into a fresh window, placed from what tmux says is there.
            log.warning("tmux_split_failed", error=error.message)
            self._packing.pop(session, None)
            current = await self._current(session)
            return await self._place(session, current, request, new_window=True)

    async def _place(
        self, session: str, current: Packing, request: _PaneRequest, *, new_window: bool
    ) -> PaneRef:
        placing = request.placing
        argv, after = packing.open_panes_argv(
            session,
            current,
            [request.pane],
            placing.panes_per_window,
            windows_at_most=placing.windows_at_most,
            recyclable=self._ours(placing.recyclable),
            new_window=new_window,
        )
        ref = layout.parse_pane_ref(await self._run(argv))
        self._packing[session] = packing.placed(after, [ref])
        log.info("tmux_pane_opened", pane_id=ref.pane_id, window_id=ref.window_id)
        return ref

    async def _current(self, session: str) -> Packing:
        current = self._packing.get(session)
        if current is None:
            target = layout.session_target(session)
            text = await self._run(["list-panes", "-s", "-t", target, "-F", packing.PANES_FORMAT])
            current = self._packing[session] = packing.read_packing(text)
            self._commands.update(packing.start_commands(text))
        return current

    def _ours(self, panes: Sequence[tuple[str, str]]) -> list[str]:
        """The ids of `panes` (id, what its command names) whose command does name it."""
        return [pane_id for pane_id, names in panes if names in self._commands.get(pane_id, "")]

    async def close(self, session: str, panes: Sequence[tuple[str, str]]) -> None:
        """Close `panes`, each (id, what its command names): one already gone, or whose
        command names something else (the id another server's), is left alone. What is
        left is tiled."""
        if not panes:
            return
        async with self._lock:
            current = await self._current(session)
            pane_ids = self._ours(panes)
            if not pane_ids:
                return
            try:
                await self._run(packing.close_panes_argv(session, current, pane_ids))
            except StepFailed as error:
                # One was gone already (closed by hand), which stopped the chain there.
                log.info("tmux_panes_closed_in_part", error=error.message)
                for pane_id in pane_ids:
                    await self._close_if_there(pane_id)
                self._packing.pop(session, None)
            else:
                self._packing[session] = packing.without(current, pane_ids)
            for pane_id in pane_ids:
                self._closed.add(pane_id)
                self._titles.pop(pane_id, None)
                self._commands.pop(pane_id, None)
        log.info("tmux_panes_closed", pane_ids=pane_ids)

    async def _close_if_there(self, pane_id: str) -> None:
        try:
            await self._run(["kill-pane", "-t", pane_id])
        except StepFailed as error:
            if "can't find pane" not in error.message:
                raise

    async def set_title(self, pane_id: str, names: str, title: str) -> None:
        """Retitle a pane whose command names `names` (its attempt's runner spec): not
        again with the title it has, nor one closed here, nor one whose id a tmux server
        started again gave another pane. A pane that is gone is not an error: a title is
        cosmetic."""
        if self._titles.get(pane_id) == title or pane_id in self._closed:
            return
        if pane_id not in self._commands:  # opened before this process: ask tmux
            text = await self._run(["list-panes", "-a", "-F", packing.PANES_FORMAT])
            self._commands.update(packing.start_commands(text))
        command = self._commands.get(pane_id)
        if command is None:
            self._gone(pane_id)
            return
        if names not in command:
            log.info("tmux_pane_id_reused", pane_id=pane_id)  # another pane's now
            return
        try:
            await self._run(layout.chain(*layout.title_commands(["-t", pane_id], title)))
        except StepFailed as error:
            if "can't find pane" not in error.message:
                raise
            self._gone(pane_id)
        else:
            self._titles[pane_id] = title

    def _gone(self, pane_id: str) -> None:
        """A pane closed behind our back (by hand, or to make room): not asked about again,
        until a pane of that id is opened here."""
        log.info("tmux_pane_gone", pane_id=pane_id)
        self._closed.add(pane_id)
        self._titles.pop(pane_id, None)
        self._commands.pop(pane_id, None)


def _together(batch: Sequence[_PaneRequest]) -> Placing:
    """One placing for a batch: its requests come from one supervisor, and the latest
    knows of the most ended panes."""
    first = batch[0].placing
    recyclable = dict(p for request in batch for p in request.placing.recyclable)
    return dataclasses.replace(first, recyclable=tuple(recyclable.items()))
