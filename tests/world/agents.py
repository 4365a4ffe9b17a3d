"""In-memory panes and processes: the Panes and Processes ports (orchestrator/runtime/
ports.py) over a world where an agent is a Python callable that edits its worktree's
files and returns an exit code, or waits until it is killed.

What it keeps of the runner's contract (agents/runner.py) is what the supervisor reads:
`started.json` with the agent's process group when the pane opens, `exit.json` with its
exit code when it ends (143 when its group was stopped), and a `wait-for` signal on the
attempt's wake channel. Runners live in the world's nursery, not the supervisor's: a
supervisor cancelled mid-run leaves them running, as a killed one does.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import trio

from orchestrator.runtime.attempts import RunFiles, RunnerState
from orchestrator.runtime.processes import STOPPED, CheckSandbox, CheckScope, ShellResult
from orchestrator.tmux.layout import PaneRef
from orchestrator.tmux.packing import windows_needed
from tests.world.repository import MemoryRepository, Tree

#: An agent: given its worktree's files (to change in place) and its attempt's number,
#: its exit code.
Agent = Callable[[Tree, int], Awaitable[int]]
#: A scripted shell command: given the files of the checkout it runs in, its exit code
#: and output.
Check = Callable[[Tree], tuple[int, str]]

KILLED = 143  # what the runner records for an agent its group's SIGTERM ended


@dataclass
class _Runner:
    pgid: int
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    ended: trio.Event = field(default_factory=trio.Event)  # its exit recorded
    lost: bool = False  # gone without a word, as with its tmux server killed


class MemoryHost:
    """The Panes and the Processes ports at once: an agent's pane and its runner's
    process are the same thing here."""

    def __init__(self, repository: MemoryRepository, agents: Mapping[str, Agent]) -> None:
        self.repository = repository
        self.agents = dict(agents)
        self.checks: dict[str, Check] = {}
        self.check_seconds = 0.0  # how long each check takes
        self.nursery: trio.Nursery | None = None  # the world's, set while it runs
        self.panes: dict[str, str] = {}  # pane id -> its runner's spec path
        self.titles: dict[str, str] = {}
        self.open_panes: set[str] = set()
        self.closed_panes: list[str] = []  # in the order they were closed
        self.most_open = 0  # the most panes open at once
        self.launched: list[tuple[str, int]] = []  # (subtask, attempt), in order
        self.shell_commands: list[str] = []
        self._running: dict[str, _Runner] = {}  # by spec path
        self._signalled: set[str] = set()
        self._waiting: dict[str, trio.Event] = {}
        #: Run once, at the next look for a runner: a test's way into the moment between
        #: two looks of the supervisor's.
        self.before_alive_check: Callable[[], Awaitable[None]] | None = None

    # Panes

    async def open_agent_pane(
        self,
        session: str,
        *,
        title: str,
        command: Sequence[str],
        cwd: Path,
        max_parallel: int | None = None,
        recyclable: Mapping[str, str] | None = None,
    ) -> PaneRef:
        assert self.nursery is not None, "the world is not running"
        spec_path = command[-1]  # runner_argv ends with it
        spec = json.loads(await trio.Path(spec_path).read_text(encoding="utf-8"))
        directory = Path(spec_path).parent  # <run root>/<subtask>/<attempt>
        subtask_id, number = directory.parent.name, int(directory.name)
        # As tmux/packing.py does at its bound, with a window for each pane: one ended
        # pane closed to make room (no await between the count and the open, as the
        # real one holds a lock).
        if max_parallel is not None and len(self.open_panes) >= windows_needed(max_parallel, 1):
            ours = [p for p in recyclable or {} if p in self.open_panes]
            await self.close_panes(session, {p: self.panes[p] for p in ours[:1]})
        self.most_open = max(self.most_open, len(self.open_panes) + 1)
        pane_id = f"%{len(self.panes) + 1}"
        self.panes[pane_id] = spec_path
        self.titles[pane_id] = title
        self.open_panes.add(pane_id)
        runner = _Runner(pgid=10_000 + len(self.panes))
        self._running[spec_path] = runner
        _write_json(spec["started_path"], {"pid": runner.pgid, "pgid": runner.pgid})
        self.launched.append((subtask_id, number))
        checkout = self.repository.worktrees[Path(spec["cwd"])]
        self.nursery.start_soon(self._run, spec, runner, self.agents[subtask_id], checkout.files)
        return PaneRef(pane_id, "@1")

    async def _run(self, spec: dict[str, str], runner: _Runner, agent: Agent, files: Tree) -> None:
        code = KILLED
        with runner.scope:
            code = await agent(files, int(Path(spec["exit_path"]).parent.name))
        if runner.lost:
            del self._running[str(Path(spec["exit_path"]).parent / "runner.json")]
            runner.ended.set()
            return
        _write_json(
            spec["exit_path"], {"exit_code": code, "output_tail": "", "runner_signal": None}
        )
        del self._running[str(Path(spec["exit_path"]).parent / "runner.json")]
        runner.ended.set()
        await self.signal(spec["wake_channel"])

    async def close_panes(self, session: str, panes: Mapping[str, str]) -> None:
        for pane_id, spec_path in panes.items():
            assert self.panes[pane_id] == spec_path, f"{pane_id} is not {spec_path}'s pane"
            # Closing the pane of an agent that still runs would kill its runner: a bug.
            assert spec_path not in self._running, f"{pane_id} still runs"
            self.open_panes.discard(pane_id)
            self.closed_panes.append(pane_id)

    async def has_session(self, name: str) -> bool:
        return True

    async def set_pane_title(self, pane_id: str, names: str, title: str) -> None:
        assert self.panes[pane_id] == names, f"{pane_id} is not {names}'s pane"
        self.titles[pane_id] = title

    async def wait_for(self, channel: str) -> None:
        # As tmux does: one signal sent while nobody waited is kept for the next wait.
        if channel in self._signalled:
            self._signalled.discard(channel)
            return
        await self._waiting.setdefault(channel, trio.Event()).wait()

    async def signal(self, channel: str) -> None:
        waiting = self._waiting.pop(channel, None)
        if waiting is None:
            self._signalled.add(channel)
        else:
            waiting.set()

    async def release_waiters(self, channel_prefix: str) -> int:
        released = [c for c in self._waiting if c.startswith(channel_prefix)]
        for channel in released:
            await self.signal(channel)
        return len(released)

    async def pane_running(self, spec_path: str) -> str | None:
        return next((p for p, spec in self.panes.items() if spec == spec_path), None)

    # Processes

    async def run_shell(
        self,
        command: str,
        *,
        cwd: Path,
        env: Mapping[str, str],
        timeout_s: float | None = None,
        stop: trio.Event | None = None,
        scope: CheckScope | None = None,
        sandbox: CheckSandbox | None = None,
    ) -> ShellResult:
        if stop is not None and stop.is_set():
            return ShellResult(STOPPED, "[kairo] not run: kairo-orch stop --now came first\n")
        self.shell_commands.append(command)
        check = self.checks.get(command)
        if check is None:
            return ShellResult(0, "")
        await trio.sleep(self.check_seconds)
        return ShellResult(*check(self.repository.worktrees[cwd].files))

    async def end_leftovers(self, execution_id: str, run_root: Path) -> None:
        return None  # a world's checks end with it, and its agents hold nothing else

    async def end_attempt(self, files: RunFiles, cgroup: str) -> None:
        return None  # a world's agent starts nothing that could outlive it

    async def stop_group(self, pgid: int) -> None:
        for runner in list(self._running.values()):
            if runner.pgid == pgid:
                runner.scope.cancel()
                await runner.ended.wait()

    async def lose(self, subtask_id: str) -> None:
        """The subtask's runner and agent gone at once, leaving no exit record."""
        for spec_path, runner in list(self._running.items()):
            if Path(spec_path).parent.parent.name == subtask_id:
                runner.lost = True
                runner.scope.cancel()
                await runner.ended.wait()

    async def runner_state(self, files: RunFiles) -> RunnerState:
        hook, self.before_alive_check = self.before_alive_check, None
        if hook is not None:
            await hook()
        return "with_agent" if str(files.spec) in self._running else "gone"

    async def finished(self, subtask_id: str) -> None:
        """Once the subtask's runner has recorded its agent's exit."""
        for spec_path, runner in list(self._running.items()):
            if Path(spec_path).parent.parent.name == subtask_id:
                await runner.ended.wait()

    def running(self) -> list[str]:
        """The subtasks whose agents run."""
        return [Path(spec).parent.parent.name for spec in self._running]


def _write_json(path: str, data: object) -> None:
    # Whole or not at all, as the real runner writes it: the supervisor reads it from a
    # thread, which could otherwise find the file made and still empty.
    partial = Path(f"{path}.partial")
    partial.write_text(json.dumps(data), encoding="utf-8")
    partial.replace(path)
