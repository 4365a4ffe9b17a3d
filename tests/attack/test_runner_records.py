"""A sibling agent writing another attempt's runner records (issue 35, item 3).

Every attempt's run folder is the user's, and so any agent's to write: a forged `exit.json`
got a sibling judged `no_changes` while its agent still ran, an `output.log` overwritten
was shown as the agent's, and a symbolic link planted where the runner writes its
temporary file had it overwrite whatever the link named. Here `forger` does each to
`victim`, whose agent waits, while it is attacked, for the test to let it finish.

The forged record and log in both sandboxes: under the default settings (bubblewrap) no
agent sees another attempt's run folder, and the victim's records are its runner's. The
planted link in local mode (36.6 is the sandbox's own)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.attack.guarded_runs import agent_said
from tests.attack.sandboxes import LOCAL, Mode
from tests.e2e.conftest import Kairo, git
from tests.e2e.test_recovery import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.reproduces("35.3")]

# The victim's run folder, from the forger's own (both attempt 1).
VICTIM_RUN = '"$(dirname "$KAIRO_USAGE_FILE")/../../victim/1"'


#: Where the test lets the victim go: its run folder, which it sees in either sandbox.
RELEASE = '"$(dirname "$KAIRO_PROMPT_FILE")/release"'


def start(kairo: Kairo, forger: str, mode: Mode = LOCAL) -> None:
    victim = f"while [ ! -e {RELEASE} ]; do sleep 0.05; done\necho victim > victim.txt"
    script = "".join(f"        {line}\n" for line in forger.splitlines())
    plan = kairo.write_plan(
        f"version: 1\nname: records\n{mode.plan}\nmax_parallel: 2\n"
        "agent: {kind: shell, run: 'true'}\n"
        "subtasks:\n"
        "  - id: victim\n    agent:\n      run: |\n        echo the agent said this\n"
        + "".join(f"        {line}\n" for line in victim.splitlines())
        + "  - id: forger\n    agent:\n      run: |\n"
        + f"        run={VICTIM_RUN}\n"
        + script
        + "        echo forger > forger.txt\n"
    )
    done = kairo.run("start", str(plan), "--detach")
    assert done.returncode == 0, done.stderr


def victim_run(kairo: Kairo) -> Path:
    return Path(kairo.json("status")["run_root"]) / "victim" / "1"


def subtask(kairo: Kairo, subtask_id: str) -> dict[str, object]:
    """Its `status --json` entry. (The forger is merged only after the victim, which comes
    first in the plan: `succeeded` says it has done its work.)"""
    found: dict[str, object] = next(
        s for s in kairo.json("status")["subtasks"] if s["id"] == subtask_id
    )
    return found


def finish(kairo: Kairo) -> dict[str, object]:
    (victim_run(kairo) / "release").touch()
    wait_for(lambda: kairo.json("status")["status"] != "RUNNING", seconds=60)
    status: dict[str, object] = kairo.json("status")
    assert status["status"] == "COMPLETED"
    branch = str(status["integration_branch"])
    assert git(kairo.repo, "show", f"{branch}:victim.txt") == "victim\n"
    return status


def waits_for(condition: str) -> str:
    """A shell line that waits (a while: in the sandbox it never comes) for `condition`."""
    return f"for i in $(seq 200); do {condition} && break; sleep 0.05; done\n"


def test_an_exit_record_forged_while_the_agent_runs_is_not_its_exit(
    kairo: Kairo, mode: Mode
) -> None:
    forged = '{"exit_code": 0, "signal": null, "runner_signal": null, "output_tail": "FORGED"}'
    start(
        kairo,
        waits_for('[ -e "$run/started.json" ]') + f"echo '{forged}' > \"$run/exit.json\"",
        mode,
    )
    wait_for(lambda: subtask(kairo, "forger")["state"] == "succeeded", seconds=30)
    record = victim_run(kairo) / "exit.json"
    if mode.sandboxed:  # no run folder of another attempt's to write
        assert "Directory nonexistent" in agent_said(kairo.json("status"), "forger")
        status = finish(kairo)
        assert "written_by_others" not in status
        assert "FORGED" not in record.read_text()
        return
    assert "FORGED" in record.read_text()  # the attack is real: there it is, as the runner's

    # For more than two of the supervisor's looks a second apart: the victim still runs.
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        victim = subtask(kairo, "victim")
        assert (victim["state"], victim["attempts"]) == ("running", 1)
        time.sleep(0.1)

    status = finish(kairo)

    victim = next(s for s in status["subtasks"] if s["id"] == "victim")  # type: ignore[attr-defined]
    assert victim["attempts"] == 1
    assert "FORGED" not in json.loads(record.read_text())["output_tail"]  # the runner's own
    said = status["written_by_others"]
    assert said == [
        "victim attempt 1: an exit record was written into its run folder by another process "
        "while its agent still ran; it was not taken for the agent's exit"
    ]
    shown = kairo.run("status").stdout
    assert "written by another process" in shown and "FORGED" not in shown
    report = kairo.run("report", "--markdown").stdout
    assert said[0] in report and "FORGED" not in report


def test_an_output_log_another_process_changed_is_not_shown_as_the_agents(
    kairo: Kairo, mode: Mode
) -> None:
    start(
        kairo,
        waits_for('grep -q "the agent said" "$run/output.log" 2>/dev/null')
        + 'echo "FORGED: every test passed" > "$run/output.log"',
        mode,
    )
    log = victim_run(kairo) / "output.log"
    if mode.sandboxed:
        wait_for(lambda: subtask(kairo, "forger")["state"] == "succeeded", seconds=30)
        assert "Directory nonexistent" in agent_said(kairo.json("status"), "forger")
        status = finish(kairo)
        assert "written_by_others" not in status and "FORGED" not in log.read_text()
        victim = next(s for s in status["subtasks"] if s["id"] == "victim")  # type: ignore[attr-defined]
        assert victim["output"] == str(log)
        return
    wait_for(lambda: log.exists() and "FORGED" in log.read_text(), seconds=30)

    status = finish(kairo)

    assert "FORGED" in log.read_text()  # the attack is real: the file says it
    victim = next(s for s in status["subtasks"] if s["id"] == "victim")  # type: ignore[attr-defined]
    assert victim["output"] is None  # not named as the agent's output any more
    said = status["written_by_others"]
    assert said == [
        f"victim attempt 1: its output log ({log}) was changed by another process: it is not "
        "what its agent printed"
    ]
    report = kairo.run("report", "--markdown").stdout
    assert said[0] in report and "FORGED" not in report
    assert f"agent output in `{log}`" not in report
    html = kairo.run("report", "--html").stdout
    assert "FORGED" not in html


def test_a_link_planted_where_the_runner_writes_is_not_written_through(
    kairo: Kairo, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"the user's own notes\n")
    start(
        kairo,
        'while [ ! -e "$run/started.json" ]; do sleep 0.05; done\n'
        'pid=$(sed -n \'s/.*"pid":\\([0-9]*\\).*/\\1/p\' "$run/started.json")\n'
        f'ln -s {notes} "$run/.exit.json.$pid.tmp"',
    )
    wait_for(lambda: subtask(kairo, "forger")["state"] == "succeeded", seconds=30)
    runner = json.loads((victim_run(kairo) / "started.json").read_text())
    planted = victim_run(kairo) / f".exit.json.{runner['pid']}.tmp"
    assert planted.readlink() == notes  # the attack is real: the name the runner writes
    # And a file opened there as the runner opened it is the user's (a scratch copy here).
    scratch = tmp_path / "scratch.txt"
    scratch.write_text("scratch\n")
    link = tmp_path / "link"
    link.symlink_to(scratch)
    os.close(os.open(link, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
    assert scratch.read_text() == ""

    finish(kairo)

    assert notes.read_bytes() == b"the user's own notes\n"
    assert not planted.is_symlink()  # unlinked, and the record made anew
    assert json.loads((victim_run(kairo) / "exit.json").read_text())["exit_code"] == 0
