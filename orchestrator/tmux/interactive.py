"""The synchronous, terminal-facing side of tmux that the CLI uses outside any trio run.

`tmux_version` is the check `start` makes before it creates anything. `has_session_sync`
goes through libtmux, the project's tmux library for blocking calls.
`attach_session` does not: libtmux runs every tmux command with captured output, and an
attached client needs the user's terminal as its stdin and stdout.
"""

from __future__ import annotations

import os
import subprocess

from orchestrator.errors import EnvironmentProblem, StepFailed
from orchestrator.tmux.layout import (
    MIN_VERSION,
    check_session_name,
    not_installed,
    parse_version,
    session_target,
)


def socket_from_environment() -> str | None:
    """The tmux server (`tmux -L NAME`) executions started from here use: the user's own
    unless KAIRO_TMUX_SOCKET names another."""
    return os.environ.get("KAIRO_TMUX_SOCKET") or None


def tmux_version(tmux_bin: str = "tmux") -> tuple[int, int]:
    """The installed tmux's (major, minor); EnvironmentProblem if missing or too old.

    3.2 is the floor: `new-session -e` appeared in 3.2, and libtmux 0.62 (behind the CLI's
    synchronous queries) supports tmux 3.2a and later only.
    """
    try:
        result = subprocess.run([tmux_bin, "-V"], capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise EnvironmentProblem(not_installed(tmux_bin)) from exc
    try:
        version = parse_version(result.stdout)
    except ValueError as exc:
        raise EnvironmentProblem(f"{exc}; kairo-orch needs tmux 3.2 or newer.") from exc
    if version < MIN_VERSION:
        found = result.stdout.strip()
        raise EnvironmentProblem(f"{found} is too old: kairo-orch needs tmux 3.2 or newer.")
    return version


def has_session_sync(socket_name: str | None, name: str, *, tmux_bin: str = "tmux") -> bool:
    """Whether session `name` exists on the server (False when no server runs)."""
    import libtmux  # a slow import: only the commands that need it pay for it
    from libtmux import exc

    check_session_name(name)
    try:
        return libtmux.Server(socket_name=socket_name, tmux_bin=tmux_bin).has_session(name)
    except exc.TmuxCommandNotFound as error:
        raise EnvironmentProblem(not_installed(tmux_bin)) from error


def attach_session(socket_name: str | None, name: str, *, tmux_bin: str = "tmux") -> int:
    """Show session `name` on this terminal; return tmux's exit status once the user detaches.

    Inside tmux (on the same server) the current client switches to it instead; inside
    another server it falls back to a nested client, which tmux allows once $TMUX is unset.
    """
    check_session_name(name)
    prefix = [tmux_bin, *(["-L", socket_name] if socket_name else [])]
    target = session_target(name)
    try:
        if os.environ.get("TMUX"):
            switched = subprocess.run(
                [*prefix, "switch-client", "-t", target], capture_output=True, check=False
            )
            if switched.returncode == 0:
                return 0
        env = {k: v for k, v in os.environ.items() if k != "TMUX"}
        attached = subprocess.run([*prefix, "attach-session", "-t", target], env=env, check=False)
    except FileNotFoundError as error:
        raise EnvironmentProblem(not_installed(tmux_bin)) from error
    if attached.returncode != 0 and not has_session_sync(socket_name, name, tmux_bin=tmux_bin):
        raise StepFailed(f"there is no tmux session {name!r} to attach to.")
    return attached.returncode
