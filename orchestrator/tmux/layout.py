"""Pure tmux argv building and output parsing: no processes here, so it tests in microseconds.

Three facts about tmux 3.x shape everything below:

- A command line given to tmux as one argument runs under the session's `default-shell`
  (the user's shell, which may be fish), not /bin/sh. Given as several arguments it is
  exec'd directly. So a pane command is always passed as argv, never as a shell string.
- When several commands are chained in one invocation, any argument that ENDS with ';'
  ends a command, however it was quoted (`find -exec rm {} ;` would break the chain). tmux
  turns a trailing '\\;' back into ';', so `escape_arg` adds that backslash.
- Some arguments are format-expanded (`-c` start directory, `select-pane -T`); there a '#'
  must be written '##'. Option values set without -F are not expanded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator.core.inert_text import inert
from orchestrator.core.secrets import is_secret

# The border shows our own title: an agent's output goes to the pane verbatim, and an
# escape sequence in it may rename the pane, but not this user option.
TITLE_OPTION = "@kairo_title"
BORDER_FORMAT = f" #{{?{TITLE_OPTION},#{{{TITLE_OPTION}}},#{{pane_title}}}} "
HISTORY_LIMIT = 50_000
AGENT_WINDOW_PREFIX = "agents-"
MIN_VERSION = (3, 2)
REF_FORMAT = "#{pane_id}\t#{window_id}"

Command = list[str]


@dataclass(frozen=True, slots=True)
class PaneRef:
    pane_id: str
    window_id: str


@dataclass(frozen=True, slots=True)
class PaneInfo:
    pane_id: str
    pid: int
    title: str
    dead: bool  # tmux's view; it can lag (zombie panes): the runner's exit file is the truth


@dataclass(frozen=True, slots=True)
class NewPane:
    """An agent pane to open: its border's title, its command (argv) and directory."""

    title: str
    command: Sequence[str]
    cwd: str


#: What of the supervisor's environment its tmux clients get: what tmux and the programs it
#: starts for kairo-orch (the in-pane runner, the live view) need to find their programs,
#: their socket and their language. A client that starts the server gives it its own
#: environment, which the server keeps as its global one and every program in its panes
#: inherits and can read (`tmux show-environment -g`), agents among them: the rest of the
#: supervisor's environment, its secrets first, must not go there.
CLIENT_ENVIRONMENT = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR"}
    | {"TERM", "COLORTERM", "TERMINFO", "TERMINFO_DIRS", "TMUX_TMPDIR", "PYTHONPATH"}
)


def client_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """What of `environment` a tmux client gets (CLIENT_ENVIRONMENT, the locale's LC_*),
    but a secret, wherever one hides."""
    return {
        name: value
        for name, value in environment.items()
        if (name in CLIENT_ENVIRONMENT or name.startswith("LC_")) and not is_secret(name, value)
    }


def not_installed(tmux_bin: str) -> str:
    return f"tmux is not installed (no {tmux_bin!r} on PATH); install tmux 3.2 or newer."


def escape_arg(arg: str) -> str:
    return arg[:-1] + "\\;" if arg.endswith(";") else arg


def literal(text: str) -> str:
    """`text` for an argument that tmux format-expands."""
    return text.replace("#", "##")


def clean_title(title: str) -> str:
    """A title on one line, inert (core/inert_text.py): a control character would break
    the border and our parsing, and reach the terminal of every client that shows it."""
    return inert(title.strip()) or "agent"


def chain(*commands: Command) -> Command:
    """One tmux argv running `commands` in order, in one server round trip and atomically:
    the server handles nothing else (say, a pane's command exiting) between them."""
    argv: Command = []
    for command in commands:
        if argv:
            argv.append(";")
        argv.extend(escape_arg(a) for a in command)
    return argv


def session_target(name: str) -> str:
    # '=' asks for an exact match; without it tmux also accepts a prefix or a pattern.
    return f"={name}"


def check_session_name(name: str) -> None:
    # tmux silently turns '.' and ':' into '_', after which the name we keep matches nothing.
    if not name or "." in name or ":" in name:
        raise ValueError(f"tmux session name {name!r} is empty or contains '.' or ':'")


def window_options(target: str) -> list[Command]:
    """Window options are per window (or global, which would change the user's own server),
    so every window we create gets them in the same invocation that creates it."""
    return [
        ["set-option", "-w", "-t", target, "remain-on-exit", "on"],
        ["set-option", "-w", "-t", target, "allow-rename", "off"],
        # Nor may what runs in a pane retitle it (tmux 3.4 and later; -q: an older one does
        # not know the option, and goes on with the chain).
        ["set-option", "-q", "-w", "-t", target, "allow-set-title", "off"],
        ["set-option", "-w", "-t", target, "pane-border-status", "top"],
        ["set-option", "-w", "-t", target, "pane-border-format", BORDER_FORMAT],
    ]


def title_commands(target: list[str], title: str) -> list[Command]:
    """Set both the pane title and our own copy; `target` is [] or ["-t", pane]."""
    title = clean_title(title)
    return [
        ["select-pane", *target, "-T", literal(title)],
        ["set-option", "-p", *target, TITLE_OPTION, title],
    ]


def new_session_argv(
    name: str,
    *,
    window_name: str,
    title: str,
    command: Sequence[str],
    cwd: str,
    width: int,
    height: int,
    environment: Mapping[str, str] | None,
) -> Command:
    check_session_name(name)
    # set-option takes a pane target; "=name:" is the session's current window (its only one).
    target = f"{session_target(name)}:"
    env = [a for k, v in (environment or {}).items() for a in ("-e", f"{k}={v}")]
    create = ["new-session", "-d", "-s", name, "-n", window_name, "-x", str(width)]
    create += ["-y", str(height), "-c", literal(cwd), *env, "-P", "-F", "#{pane_id}"]
    return chain(
        [*create, "--", *pane_command(command)],
        # destroy-unattached is off by default, but a user's config may turn it on.
        ["set-option", "-t", target, "destroy-unattached", "off"],
        # Nor does a client that attaches bring its SSH_AUTH_SOCK or KRB5CCNAME into the
        # session's environment, where agents would find them.
        ["set-option", "-t", target, "update-environment", ""],
        ["set-option", "-t", target, "history-limit", str(HISTORY_LIMIT)],
        *window_options(target),
        *title_commands(["-t", target], title),  # else its border shows the host's name
    )


def new_window_commands(session: str, name: str, pane: NewPane) -> list[Command]:
    # -d: creating a window must not switch an attached user away from what they watch.
    # The new pane is then targeted by the window's unique name (the active pane of a window
    # with one pane), since tmux gives back its id only on stdout.
    window = window_target(session, name)
    create = ["new-window", "-d", "-t", f"{session_target(session)}:", "-n", name]
    create += ["-c", literal(pane.cwd), "-P", "-F", REF_FORMAT]
    return [
        [*create, "--", *pane_command(pane.command)],
        *window_options(window),
        *title_commands(["-t", window], pane.title),
    ]


def split_commands(window: str, pane: NewPane) -> list[Command]:
    # Without -d, split-window makes the new pane the current target of the commands that
    # follow, so they need no pane id; it changes the active pane inside that window only.
    create = ["split-window", "-t", window, "-c", literal(pane.cwd), "-P", "-F", REF_FORMAT]
    return [
        [*create, "--", *pane_command(pane.command)],
        *title_commands([], pane.title),
        ["select-layout", "-t", window, "tiled"],
    ]


def window_target(session: str, name: str) -> str:
    return f"{session_target(session)}:={name}"


def respawn_pane_argv(session: str, window: str, command: Sequence[str]) -> Command:
    """Start `command` afresh in the pane of `session`'s `window`, ending what ran there."""
    target = window_target(session, window)
    return chain(["respawn-pane", "-k", "-t", target, "--", *pane_command(command)])


def pane_command(command: Sequence[str]) -> list[str]:
    if not command:
        raise ValueError("a pane needs an explicit command; tmux would start a login shell")
    # tmux hands a lone argument to default-shell -c; have /bin/sh exec it literally instead.
    return list(command) if len(command) > 1 else ["/bin/sh", "-c", 'exec "$0"', command[0]]


PANE_FORMAT = f"#{{pane_id}}\t#{{pane_pid}}\t#{{pane_dead}}\t#{{{TITLE_OPTION}}}\t#{{pane_title}}"


def parse_panes(text: str) -> list[PaneInfo]:
    panes = []
    for line in text.splitlines():
        pane_id, pid, dead, ours, theirs = line.split("\t", 4)
        panes.append(PaneInfo(pane_id, int(pid), ours or theirs, dead == "1"))
    return panes


def parse_pane_ref(text: str) -> PaneRef:
    pane_id, window_id = text.strip().split("\t")
    return PaneRef(pane_id, window_id)


def parse_version(text: str) -> tuple[int, int]:
    """`tmux -V` output -> (major, minor); builds from git say 'next-3.5' or 'master'."""
    match = re.search(r"(\d+)\.(\d+)", text)
    if match is None:
        if "master" in text:
            return (99, 0)
        raise ValueError(f"cannot read a tmux version from {text.strip()!r}")
    return int(match[1]), int(match[2])
