"""A plan of many subtasks keeps a usable tmux session: ended panes are closed, the windows
stay bounded by max_parallel, and each attempt's output stays in its run directory."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from orchestrator.tmux.packing import windows_needed
from tests.e2e.conftest import Kairo

pytestmark = pytest.mark.slow

SUBTASKS = 40
MAX_PARALLEL = 8
GRACE_S = 1


def _agent_windows(kairo: Kairo, session: str) -> int:
    listed = kairo.tmux("list-windows", "-t", f"={session}", "-F", "#{window_name}").stdout
    return sum(name.startswith("agents-") for name in listed.split())


def test_forty_subtasks_keep_their_windows_bounded_and_their_output(
    kairo: Kairo, repo: Path
) -> None:
    kairo.env["KAIRO_PANE_GRACE"] = str(GRACE_S)
    ids = [f"t{i:02d}" for i in range(SUBTASKS)]
    plan = kairo.write_plan(
        f"version: 1\nname: many\nmax_parallel: {MAX_PARALLEL}\n"
        "agent: {kind: shell, run: 'echo said by $KAIRO_SUBTASK_ID; sleep 0.3; "
        "echo x > $KAIRO_SUBTASK_ID.txt'}\n"
        "subtasks:\n" + "".join(f"  - id: {sid}\n" for sid in ids)
    )
    started = kairo.run("start", str(plan), "--detach")
    assert started.returncode == 0, started.stderr
    status = kairo.json("status")
    session = status["tmux_session"]

    # Sampled all along the run: never more agents windows than max_parallel's.
    bound = windows_needed(MAX_PARALLEL, 4)
    samples: list[int] = []
    deadline = time.monotonic() + 300
    checked = time.monotonic()
    while status["status"] == "RUNNING":
        assert time.monotonic() < deadline, "the run did not end"
        samples.append(_agent_windows(kairo, session))
        assert samples[-1] <= bound, f"{samples[-1]} agents windows, more than {bound}"
        time.sleep(0.05)
        if time.monotonic() - checked > 1:
            status, checked = kairo.json("status"), time.monotonic()
    assert status["status"] == "COMPLETED"
    assert max(samples) >= 2  # it did sample the run, not only its end

    # Every attempt had a pane; the panes of those that ended a grace period before the
    # end are closed: what is left fits the bound's windows.
    events = [json.loads(line) for line in kairo.run("events", "--json").stdout.splitlines()]
    opened = [e["payload"]["pane_id"] for e in events if e["event_type"] == "attempt_pane_opened"]
    assert len(set(opened)) == SUBTASKS
    listed = kairo.tmux("list-panes", "-s", "-t", f"={session}", "-F", "#{pane_id}").stdout
    left = set(opened) & set(listed.split())
    assert len(left) <= bound * 4 < SUBTASKS

    # The report names each attempt's output file, which holds what its agent printed.
    report = kairo.json("report")
    for sid in ids:
        (attempt,) = report["attempts"][sid]
        assert f"said by {sid}" in Path(attempt["output"]).read_text(encoding="utf-8")
    markdown = kairo.run("report").stdout
    assert f"{report['run_root']}/<subtask>/<attempt>/output.log" in markdown


def test_an_ended_pane_closes_after_the_grace_period_while_others_run(
    kairo: Kairo, repo: Path
) -> None:
    kairo.env["KAIRO_PANE_GRACE"] = "3"
    plan = kairo.write_plan(
        "version: 1\nname: grace\n"
        "agent: {kind: shell, run: 'echo x > $KAIRO_SUBTASK_ID.txt; "
        "if [ $KAIRO_SUBTASK_ID = slow ]; then sleep 30; fi'}\n"
        "subtasks:\n  - id: quick\n  - id: slow\n"
    )
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    session = kairo.json("status")["tmux_session"]

    def titles() -> list[str]:
        listed = kairo.tmux("list-panes", "-s", "-t", f"={session}", "-F", "#{@kairo_title}")
        return [title for title in listed.stdout.splitlines() if " · " in title]

    deadline = time.monotonic() + 120
    # seen once its agent ended (it is not closed at once) ...
    while not {"quick · succeeded", "quick · merged"} & set(titles()):
        assert time.monotonic() < deadline, titles()
        time.sleep(0.05)
    # ... then closed, while the other agent's pane stays
    while any(title.startswith("quick") for title in titles()):
        assert time.monotonic() < deadline, titles()
        time.sleep(0.05)
    assert titles() == ["slow · running"]
    assert kairo.json("status")["status"] == "RUNNING"


def test_the_live_view_pages_with_its_keys(kairo: Kairo, repo: Path) -> None:
    ids = [f"p{i:02d}" for i in range(20)]
    plan = kairo.write_plan(
        "version: 1\nname: pages\nmax_parallel: 2\n"
        "agent: {kind: shell, run: 'sleep 20; echo x > $KAIRO_SUBTASK_ID.txt'}\n"
        "subtasks:\n" + "".join(f"  - id: {sid}\n" for sid in ids)
    )
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    view = f"={kairo.json('status')['tmux_session']}:supervisor"
    # a window of 14 lines, a pane of 13 under its border: 6 subtasks a page (cli/watch.py
    # keeps 7 lines for the rest)
    assert kairo.tmux("resize-window", "-t", view, "-y", "14").returncode == 0

    def shows(text: str) -> str:
        deadline = time.monotonic() + 60
        while text not in (screen := kairo.tmux("capture-pane", "-p", "-t", view).stdout):
            assert time.monotonic() < deadline, f"the live view never showed {text!r}:\n{screen}"
            time.sleep(0.1)
        return screen

    screen = shows("20 subtasks: 18 pending, 2 running  page 1/4 (n or space: next, p: previous)")
    lines = screen.splitlines()
    rows = lines[next(i for i, line in enumerate(lines) if line.startswith("subtask")) + 1 :]
    assert [row.split()[1] for row in rows[:3]] == ["running", "running", "pending"]
    kairo.tmux("send-keys", "-t", view, "n")
    assert shows("page 2/4")
    kairo.tmux("send-keys", "-t", view, "n", "n", "n")  # no further than the last page
    assert shows("page 4/4")
    kairo.tmux("send-keys", "-t", view, "p")
    assert shows("page 3/4")
    assert kairo.json("status")["status"] == "RUNNING"  # all of it while agents ran
