"""The supervisor's async handle on one tmux server: each method is ONE tmux client process.

The supervisor is not inside tmux and does not need libtmux's object model on its hot
path: a libtmux split, layout and title run about nine tmux processes, where
`open_agent_pane` chains the same work into one, several times faster. The argv is built in `layout`
(pure); this module runs it and turns failures into `StepFailed` or `EnvironmentProblem`;
where agent panes go, and which are closed, is `agent_panes`'s.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

import structlog
import trio

from orchestrator.errors import EnvironmentProblem, StepFailed
from orchestrator.tmux import layout, packing
from orchestrator.tmux.agent_panes import AgentPanes, Placing
from orchestrator.tmux.layout import PaneInfo, PaneRef
from orchestrator.tmux.waiters import waited_channels

log = structlog.get_logger(__name__)

StrPath = str | os.PathLike[str]
DeliverCancel = Callable[[trio.Process], Awaitable[None]]
# What a client says when there is no server, or it went away while we asked.
_NO_SERVER: Final = ("no server running", "error connecting to", "server exited unexpectedly")
_GONE_POLL_SECONDS: Final = 0.01
_KILL_SERVER_TIMEOUT: Final = 5.0
_RELEASE_GRACE: Final = 1.0

__all__ = ["PaneInfo", "PaneRef", "TmuxServer"]


class TmuxServer:
    """One tmux server: `socket_name` as `tmux -L NAME`, or None for the user's default.

    `config_file` is passed as `-f` and only matters when a call starts the server (tests
    use /dev/null so that no user configuration leaks in).
    """

    def __init__(
        self,
        socket_name: str | None,
        *,
        tmux_bin: str = "tmux",
        config_file: str | None = None,
    ) -> None:
        self.socket_name = socket_name
        self.tmux_bin = tmux_bin
        self._prefix = [tmux_bin]
        if socket_name is not None:
            self._prefix += ["-L", socket_name]
        if config_file is not None:
            self._prefix += ["-f", config_file]
        # Without -L a client inside tmux follows $TMUX to whatever server that is; the
        # contract (cli.md) says the default server, so $TMUX is not passed on, nor is
        # anything else a server it starts does not need (layout.CLIENT_ENVIRONMENT).
        self._env = layout.client_environment(os.environ)
        self._agents = AgentPanes(self._run, self._run_raw)

    def __repr__(self) -> str:
        return f"TmuxServer(socket_name={self.socket_name!r})"

    async def new_session(
        self,
        name: str,
        *,
        window_name: str,
        command: Sequence[str],
        cwd: StrPath,
        title: str | None = None,
        width: int = 250,
        height: int = 60,
        environment: Mapping[str, str] | None = None,
    ) -> str:
        """Create detached session `name` running `command` in its first window, its pane
        titled `title` (else the window's name); its pane id.

        The options are set in the same invocation, so a command that exits at once still
        leaves its pane (remain-on-exit) rather than taking the session with it.
        """
        argv = layout.new_session_argv(
            name,
            window_name=window_name,
            title=title or window_name,
            command=command,
            cwd=os.fspath(cwd),
            width=width,
            height=height,
            environment=environment,
        )
        self._agents.forget(name)
        pane_id = (await self._run(argv)).strip()
        self._agents.forget(name, new=True)
        log.info("tmux_session_created", session=name, pane_id=pane_id)
        return pane_id

    async def open_agent_pane(
        self,
        session: str,
        *,
        title: str,
        command: Sequence[str],
        cwd: StrPath,
        panes_per_window: int = 4,
        max_parallel: int | None = None,
        recyclable: Mapping[str, str] | None = None,
    ) -> PaneRef:
        """A new pane running `command`, packed `panes_per_window` to an 'agents-N' window
        (packing.py says which).

        With `max_parallel`, the agents that run at once, the windows are kept to those
        they need and one more: where every window is full, one of the `recyclable` panes
        (of attempts that ended, oldest first: each id and what its command names, which
        it must name to be closed) is closed to make room. Panes asked for while a call is
        under way are opened together in the next one.
        """
        if panes_per_window < 1:
            raise ValueError("panes_per_window must be at least 1")
        needed = (
            None if max_parallel is None else packing.windows_needed(max_parallel, panes_per_window)
        )
        placing = Placing(panes_per_window, needed, tuple((recyclable or {}).items()))
        pane = layout.NewPane(title, list(command), os.fspath(cwd))
        return await self._agents.open(session, pane, placing)

    async def close_panes(self, session: str, panes: Mapping[str, str]) -> None:
        """Close agent panes of `session`, each id with what its command names (a pane
        whose command does not name it is left alone); their windows go with their last
        pane, and a pane already gone is not an error."""
        await self._agents.close(session, tuple(panes.items()))

    async def set_pane_title(self, pane_id: str, names: str, title: str) -> None:
        """Retitle a pane whose command names `names` (not again with the title it has):
        a pane id is unique only within one tmux server. A pane that is gone, or that is
        another's now, is not an error: a title is cosmetic."""
        await self._agents.set_title(pane_id, names, title)

    async def respawn_pane(self, session: str, window: str, command: Sequence[str]) -> None:
        """Start `command` afresh in the pane of `session`'s `window`."""
        await self._run(layout.respawn_pane_argv(session, window, command))

    async def has_session(self, name: str) -> bool:
        """Whether session `name` exists (False, too, when no server runs)."""
        argv = [*self._prefix, "has-session", "-t", layout.session_target(name)]
        result = await _run_client(argv, tmux_bin=self.tmux_bin, env=self._env)
        return result.returncode == 0

    async def kill_session(self, name: str) -> None:
        """Kill session `name` and its panes; nothing to do if it does not exist."""
        self._agents.forget(name)
        try:
            await self._run(["kill-session", "-t", layout.session_target(name)])
        except StepFailed:
            if await self.has_session(name):
                raise

    async def sessions(self) -> dict[str, Path]:
        """Every session's name and the directory it was started in; none when no server
        runs."""
        text = await self._run_if_serving(
            ["list-sessions", "-F", "#{session_name}\t#{session_path}"]
        )
        found = (line.partition("\t") for line in (text or "").splitlines())
        return {name: Path(path) for name, _, path in found}

    async def live_pane_windows(self) -> list[str]:
        """The window of each pane of the server whose program still runs; none when no
        server runs."""
        text = await self._run_if_serving(
            ["list-panes", "-a", "-F", "#{pane_dead}\t#{window_name}"]
        )
        found = (line.partition("\t") for line in (text or "").splitlines())
        return [window for dead, _, window in found if dead != "1"]

    async def list_panes(self, session: str) -> list[PaneInfo]:
        """Every pane of every window of `session`."""
        target = layout.session_target(session)
        text = await self._run(["list-panes", "-s", "-t", target, "-F", layout.PANE_FORMAT])
        return layout.parse_panes(text)

    async def capture_pane(self, pane_id: str, *, lines: int = 200) -> str:
        """The last `lines` lines of a pane's screen and history, as plain text."""
        return await self._run(["capture-pane", "-p", "-J", "-t", pane_id, "-S", f"-{lines}"])

    async def wait_for(self, channel: str) -> None:
        """Return when `channel` is signalled (tmux remembers ONE signal sent while nobody
        waits). A wake-up is a hint: it also comes when the server exits, or spuriously
        after a cancelled wait, so the caller re-reads the durable state it waits on.

        On cancellation the channel is signalled before the client is killed: tmux keeps a
        killed client's wait registered, and that dead waiter would swallow the next real
        signal on the channel.
        """

        async def release(process: trio.Process) -> None:
            await _run_client(
                [*self._prefix, "wait-for", "-S", channel], tmux_bin=self.tmux_bin, env=self._env
            )
            await trio.sleep(_RELEASE_GRACE)  # the run is cancelled as soon as it exits
            process.kill()

        await self._run(["wait-for", channel], deliver_cancel=release)

    async def release_waiters(self, channel_prefix: str) -> int:
        """Wake the `wait-for` clients left on channels starting with `channel_prefix` (a
        supervisor killed with -9 leaves its clients waiting until each channel is
        signalled, one per running agent); return how many channels were woken. Signalled,
        not killed: tmux would keep a killed client's wait, which swallows the next real
        signal on its channel."""
        channels = await trio.to_thread.run_sync(waited_channels, channel_prefix)
        for channel in channels:
            await self.signal(channel)
        return len(channels)

    async def signal(self, channel: str) -> None:
        """Wake every waiter on `channel`, or the next one if nobody waits."""
        await self._run(["wait-for", "-S", channel])

    async def kill_server(self) -> None:
        """Kill the server and return only once its process is gone (tmux answers first).

        Nothing to do if no server runs.
        """
        self._agents.forget_all()
        text = await self._run_if_serving(["display-message", "-p", "#{pid}", ";", "kill-server"])
        if text is None:
            return
        pid = int(text.split()[0])
        deadline = trio.current_time() + _KILL_SERVER_TIMEOUT
        while trio.current_time() < deadline:
            if not _process_alive(pid):
                return
            await trio.sleep(_GONE_POLL_SECONDS)  # not our child: no event to wait on
        raise StepFailed(f"the tmux server (pid {pid}) was still running after kill-server.")

    async def _run_if_serving(self, args: Sequence[str]) -> str | None:
        """`_run`, or None when no server runs (nothing to ask it)."""
        try:
            return await self._run(args)
        except StepFailed as error:
            if any(marker in error.message for marker in _NO_SERVER):
                return None
            raise

    async def _run_raw(self, args: Sequence[str]) -> subprocess.CompletedProcess[bytes]:
        return await _run_client([*self._prefix, *args], tmux_bin=self.tmux_bin, env=self._env)

    async def _run(
        self,
        args: Sequence[str],
        *,
        deliver_cancel: DeliverCancel | None = None,
    ) -> str:
        argv = [*self._prefix, *args]
        result = await _run_client(
            argv, tmux_bin=self.tmux_bin, env=self._env, deliver_cancel=deliver_cancel
        )
        if result.returncode != 0:
            where = (
                f"on socket {self.socket_name!r}" if self.socket_name else "on the default server"
            )
            reason = result.stderr.decode(errors="replace").strip() or f"exit {result.returncode}"
            raise StepFailed(f"tmux {args[0]} failed {where}: {reason}")
        return result.stdout.decode(errors="replace")


async def _run_client(
    argv: Sequence[str],
    *,
    tmux_bin: str,
    env: Mapping[str, str] | None,
    deliver_cancel: DeliverCancel | None = None,
) -> subprocess.CompletedProcess[bytes]:
    try:
        return await trio.run_process(
            list(argv),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=env,
            deliver_cancel=deliver_cancel,
        )
    except FileNotFoundError as exc:
        raise EnvironmentProblem(layout.not_installed(tmux_bin)) from exc


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); where nothing reaps orphans (some container inits)
    # the server stays one for ever, so on Linux look at its state too.
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return True
