"""Terminal injection (issue 35, item 7): an agent prints escape sequences, names a file
with them and commits with them in its message, and a `verify` prints them; none of it
may reach a terminal through `status`, `report`, `report --markdown`, the live view or a
pane title. Each is shown escaped, as text one can read (`\\x1b]52;...`).

The agent's own pane is a terminal running the agent: it shows the agent's raw output, as
any terminal would, and attaching to it is the user's choice. Its `output.log` keeps the
raw bytes: the test reads them back to show that the attack was real. What is printed is
the same in either sandbox; the test runs in local mode.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.runtime.daemon import LIVE_VIEW_TITLE, SUPERVISOR_WINDOW
from tests.e2e.conftest import Kairo
from tests.e2e.test_recovery import wait_for

pytestmark = pytest.mark.slow

#: What the agents and the verify print: a clipboard write (OSC 52), a hyperlink (OSC 8), a
#: cleared screen, a tmux passthrough (DCS) of another clipboard write, window and pane
#: titles (OSC 0 and 2), a C1 CSI as UTF-8, a right-to-left override and an isolate.
PRINTED = (
    r"printf 'clip \033]52;c;cm0gLXJmIH4K\007 link \033]8;;http://evil.example/\033\\here"
    r"\033]8;;\033\\ \033[2J \033Ptmux;\033\033]52;c;cHduZWQK\007\033\\ "
    r"\033]0;pwned-title\007\033]2;pwned-title\007 c1 \302\2332J "
    r"bidi \342\200\256desrever\342\200\254 \342\201\246isolated\342\201\251\n'"
)
#: A file name holding a title-setting OSC and a newline, as the agents write it, as git
#: and `status --json` have it, and as `status` and the reports show it.
EVIL_NAME = r"$(printf 'evil\033]2;pwned-path\007\nname.txt')"
NAME = "evil\x1b]2;pwned-path\x07\nname.txt"
SHOWN_NAME = r"evil\x1b]2;pwned-path\x07\nname.txt"
#: A commit message holding a clipboard write, a cleared screen and an override.
MESSAGE = r"$(printf 'msg \033]52;c;cHduZWQK\007 \033[2J \342\200\256x')"

#: What must never reach a terminal: ESC, a C1 CSI, BEL, and the bidi overrides,
#: embeddings and isolates (Trojan Source).
RAW = re.compile("[\x1b\x9b\x07\u202a-\u202e\u2066-\u2069]")
#: An escape sequence that is not a CSI one (the live view's own are: its colours and
#: cursor moves): an OSC, a DCS, or any other.
NOT_CSI = re.compile(rb"\x1b[^\[]|\x1b\[2J|\xc2\x9b|\x07|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def _agent(tmp_path: Path, content: str, exit_code: int) -> Path:
    script = tmp_path / f"agent-{content}.sh"
    script.write_text(
        f"set -e\n{PRINTED}\n"
        f'printf {content} > "{EVIL_NAME}"\n'
        f'git add -A && git commit -q -m "{MESSAGE}"\n'
        "sleep 2\n"  # all at work at once, so that the overlap watch sees them
        f"exit {exit_code}\n"
    )
    return script


def _ended(kairo: Kairo) -> bool:
    return kairo.json("status")["status"] not in ("RUNNING", "RECOVERING")


@pytest.mark.reproduces("35.7")
def test_escape_sequences_from_agents_reach_no_terminal(kairo: Kairo, tmp_path: Path) -> None:
    verify = tmp_path / "verify.sh"
    verify.write_text(f"{PRINTED}\nexit 1\n")
    plan = kairo.write_plan(
        "version: 1\nname: inject\nsandbox: {kind: local}\nmax_parallel: 4\n"
        f"agent: {{kind: shell, run: 'sh {_agent(tmp_path, 'a', 0)}'}}\n"
        "limits: {max_attempts: 1}\n"
        "subtasks:\n"
        "  - id: a\n"  # merges: its file and commit are on the integration branch
        f"  - id: b\n    agent: {{run: 'sh {_agent(tmp_path, 'b', 0)}'}}\n"  # conflicts with a
        f"  - id: c\n    verify: 'sh {verify}'\n"  # fails its verify
        f"  - id: d\n    agent: {{run: 'sh {_agent(tmp_path, 'd', 1)}'}}\n"  # fails
    )
    kairo.env["KAIRO_OVERLAP_EVERY"] = "0.3"
    started = kairo.run("start", str(plan), "--detach")
    assert started.returncode == 0, started.stderr
    session = kairo.json("status")["tmux_session"]
    supervisor = f"={session}:{SUPERVISOR_WINDOW}"
    # Every byte the live view writes to its terminal, before tmux reads any of it.
    written = tmp_path / "live-view.bytes"
    wait_for(lambda: kairo.tmux("has-session", "-t", f"={session}").returncode == 0)
    piped = kairo.tmux("pipe-pane", "-t", supervisor, f"cat > {written}")
    assert piped.returncode == 0, piped.stderr
    wait_for(lambda: _ended(kairo), seconds=120)
    status = kairo.json("status")
    states = {item["id"]: item["state"] for item in status["subtasks"]}
    assert states == {"a": "merged", "b": "conflicted", "c": "failed", "d": "failed"}

    # The attack is real: the agent printed the raw bytes, kept whole in its output.log;
    # `status --json` has the file name as git has it (JSON escapes it) and its overlaps.
    printed = Path(status["subtasks"][0]["output"]).read_bytes()
    for raw in (b"\x1b]52;c;", b"\x1b]8;;http", b"\x1b[2J", b"\x1bPtmux;", b"\xc2\x9b"):
        assert raw in printed
    assert "\u202edesrever" in printed.decode()
    assert [conflict["path"] for conflict in status["subtasks"][1]["conflicts"]] == [NAME]
    assert NAME in status["overlaps"][0]["paths"]

    shown = {
        "status": kairo.run("status"),
        "report": kairo.run("report"),
        "report --markdown": kairo.run("report", "--markdown"),
        "report --html": kairo.run("report", "--html"),
    }
    for what, said in shown.items():
        assert said.returncode == 0, (what, said.stderr)
        assert RAW.findall(said.stdout) == [], (what, said.stdout)
        assert SHOWN_NAME in said.stdout, (what, said.stdout)  # readable, not dropped
    for what in ("report", "report --markdown"):  # the tails of c's verify and d's agent
        assert r"\x1b]52;c;cm0gLXJmIH4K\x07" in shown[what].stdout
        assert r"\u202edesrever\u202c" in shown[what].stdout

    # The live view showed the name escaped; of what it wrote, the only escape sequences
    # are its own CSI ones (colours, cursor moves), none of the agents'.
    wait_for(lambda: SHOWN_NAME in kairo.tmux("capture-pane", "-p", "-t", supervisor).stdout)
    kairo.tmux("pipe-pane", "-t", supervisor)  # closes the pipe
    view = written.read_bytes()
    assert SHOWN_NAME.encode() in view
    assert NOT_CSI.findall(view) == []

    panes = kairo.tmux("list-panes", "-a", "-F", "#{window_name}\t#{pane_title}").stdout
    titles = [line.split("\t", 1) for line in panes.splitlines()]
    assert [title for _, title in titles if RAW.search(title)] == [], titles
    assert [title for window, title in titles if window == SUPERVISOR_WINDOW] == [LIVE_VIEW_TITLE]
