"""`report --html` in a real browser: what the page shows is what `status --json` says.

Debian's chromium loads the page `kairo-orch report --html` wrote, from a file, as a
reviewer would open it from a pull request; the test reads the DOM and compares it with
`status --json`, finds nothing on the console (no error, no request the page's
Content-Security-Policy refused), and saves a screenshot beside the page in its temp dir.
Completed, failed-and-retried executions and one whose conflict an agent resolved come from
the golden logs (tests/golden); a resumed one from a real run whose supervisor is killed
with -9.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator import kairo_dir
from orchestrator.store.sqlite import SqliteStore
from tests.browser import chromium, console, require_browser
from tests.e2e.conftest import Kairo, git, shared_with_agents
from tests.golden import logs

pytestmark = pytest.mark.slow

EVIL = "<img src=http://127.0.0.1:9/x.png><script>document.title='pwned'</script>"


def page_of(kairo: Kairo, execution_id: str, where: Path) -> Path:
    done = kairo.run("report", "--html", execution_id)
    assert done.returncode == 0, done.stderr
    where.write_text(done.stdout, encoding="utf-8")
    return where


def shown(driver: Any, page: Path, screenshot: Path) -> dict[str, Any]:
    """The page loaded, what its DOM shows, its console's messages; a screenshot taken."""
    from selenium.webdriver.common.by import By

    driver.get(page.as_uri())
    rows = driver.find_elements(By.CSS_SELECTOR, "#timeline .row")
    seen = {
        "title": driver.title,
        "status": driver.find_element(By.ID, "status").get_attribute("data-status"),
        "rows": {
            row.get_attribute("data-subtask"): {
                "state": row.get_attribute("data-state"),
                "bars": len(row.find_elements(By.CSS_SELECTOR, ".k-agent")),
            }
            for row in rows
        },
        "tokens": {
            tr.get_attribute("data-subtask"): int(tr.get_attribute("data-tokens"))
            for tr in driver.find_elements(By.CSS_SELECTOR, "#usage tr[data-subtask]")
        },
        "total": int(driver.find_element(By.ID, "usage-total").get_attribute("data-tokens")),
        "counts": {
            key: int(driver.find_element(By.ID, f"count-{key}").get_attribute("data-count"))
            for key in ("merged", "conflicted", "failed", "skipped", "stopped")
        },
        "conflicts": [
            [td.text for td in tr.find_elements(By.TAG_NAME, "td")][:4]
            for tr in driver.find_elements(By.CSS_SELECTOR, "#conflicts table.conflicts tbody tr")
        ],
        "resolutions": [
            {
                "subtask": div.get_attribute("data-subtask"),
                "attempt": int(div.get_attribute("data-attempt")),
                "outcome": div.get_attribute("data-outcome"),
                "heading": div.find_element(By.TAG_NAME, "h3").text,
                "with": [
                    [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                    for tr in div.find_elements(By.CSS_SELECTOR, "table tbody tr")
                ],
                "shown": div.is_displayed(),
            }
            for div in driver.find_elements(By.CSS_SELECTOR, "#resolutions .resolution")
        ],
        "reasons": {
            div.get_attribute("data-subtask"): div.find_element(By.CLASS_NAME, "reason").text
            for div in driver.find_elements(By.CSS_SELECTOR, "#failures .failure")
        },
        "merges": [
            tr.get_attribute("data-subtask")
            for tr in driver.find_elements(By.CSS_SELECTOR, "#merges tr[data-subtask]")
        ],
        "gaps": len(driver.find_elements(By.CSS_SELECTOR, "#timeline .lane .gap")),
        "tails": [pre.text for pre in driver.find_elements(By.CSS_SELECTOR, "#failures pre")],
        "images": len(driver.find_elements(By.TAG_NAME, "img")),
        "scripts": len(driver.find_elements(By.TAG_NAME, "script")),
        "console": console(driver),
    }
    assert driver.save_screenshot(str(screenshot))
    return seen


def assert_matches_status(seen: dict[str, Any], status: dict[str, Any]) -> None:
    subtasks = status["subtasks"]
    assert seen["status"] == status["status"]
    assert seen["console"] == []
    assert seen["images"] == 0 and seen["scripts"] == 0
    assert seen["rows"] == {s["id"]: {"state": s["state"], "bars": s["attempts"]} for s in subtasks}
    assert seen["tokens"] == {s["id"]: s["tokens"] for s in subtasks}
    assert seen["total"] == sum(s["tokens"] for s in subtasks)
    for key, count in seen["counts"].items():
        assert count == sum(s["state"] == key for s in subtasks), key
    # The conflicts of the subtasks the header counts conflicted; a resolved one is among
    # the resolutions.
    assert seen["conflicts"] == [
        [s["id"], c["path"], c["kind"], ", ".join(c["with"]) or "the base"]
        for s in subtasks
        if s["state"] == "conflicted"
        for c in s["conflicts"]
    ]
    assert seen["resolutions"] == [
        {
            "subtask": s["id"],
            "attempt": r["attempt"],
            "outcome": r["outcome"],
            "heading": f"{s['id']} attempt {r['attempt']}: {r['outcome']}"
            + (f": {r['reason']}" if r["reason"] else ""),
            "with": [
                [c["path"], c["kind"], ", ".join(c["with"]) or "merged work"]
                for c in r["conflicts"]
            ],
            "shown": True,
        }
        for s in subtasks
        for r in s.get("resolutions", ())
    ]
    assert seen["reasons"] == {
        s["id"]: s["reason"] for s in subtasks if s["state"] in ("failed", "skipped", "stopped")
    }
    assert sorted(seen["merges"]) == sorted(s["id"] for s in subtasks if s["state"] == "merged")


def load_golden(name: str, repo: Path) -> str:
    """The golden log `name` put into the repository's own store: its execution's id."""
    database = kairo_dir.default_store(repo / ".git")
    database.parent.mkdir(parents=True, exist_ok=True)
    SqliteStore(database).close()
    return logs.load(logs.HERE / name, database).execution_id


@pytest.mark.parametrize(
    "name", ["completed", "conflicts_and_retries", "reasons_v2", "merge_queue"]
)
def test_a_recorded_execution_s_page_shows_what_status_says(
    name: str, kairo: Kairo, tmp_path: Path
) -> None:
    require_browser()
    execution_id = load_golden(name, kairo.repo)
    status = kairo.json("status", execution_id)
    page = page_of(kairo, execution_id, tmp_path / f"{name}.html")

    with chromium() as driver:
        seen = shown(driver, page, tmp_path / f"{name}.png")

    assert_matches_status(seen, status)
    assert seen["gaps"] == 0
    if name != "completed":  # sent back, then accepted or failed: each attempt a bar
        assert any(row["bars"] > 1 for row in seen["rows"].values())
    if name == "merge_queue":  # c's conflict with a, resolved by its agent and merged
        assert seen["counts"]["conflicted"] == 0 and seen["conflicts"] == []
        assert [(r["subtask"], r["outcome"], r["with"]) for r in seen["resolutions"]] == [
            ("c", "accepted", [["shared.txt", "add/add", "a"]])
        ]


RESUMED = """\
version: 1
name: resumed
agent: {{kind: shell, run: "true"}}
subtasks:
  - id: left
    agent: {{run: 'echo left > left.txt; if [ "$KAIRO_ATTEMPT" = 1 ]; then {hold}; fi'}}
  - id: right
    agent: {{run: 'echo right > right.txt; if [ "$KAIRO_ATTEMPT" = 1 ]; then {hold}; fi'}}
  - id: evil
    depends_on: [left]
    limits: {{max_attempts: 2}}
    agent: {{run: 'cat {evil}; exit 3'}}
"""


def test_a_resumed_execution_s_page_shows_the_gap_and_escapes_what_agents_printed(
    kairo: Kairo, repo: Path, tmp_path: Path
) -> None:
    require_browser()
    shared = tmp_path / "shared"  # with the agents: what they print, what they wait on
    shared.mkdir()
    release = shared / "release"
    hold = f"while [ ! -e {release} ]; do sleep 0.05; done"
    evil = shared / "evil.txt"
    evil.write_text(EVIL + "\n", encoding="utf-8")
    plan = kairo.write_plan(RESUMED.format(hold=hold, evil=evil) + shared_with_agents(shared))
    assert kairo.run("start", str(plan), "--detach").returncode == 0
    runs = Path(git(repo, "rev-parse", "--absolute-git-dir").strip()) / "kairo" / "runs"
    deadline = time.monotonic() + 30
    while len(list(runs.glob("*/*/*/started.json"))) < 2:
        assert time.monotonic() < deadline, "the agents never started"
        time.sleep(0.05)
    os.kill(kairo.json("status")["supervisor_pid"], signal.SIGKILL)
    while kairo.json("status")["status"] != "PAUSED":
        assert time.monotonic() < deadline, "the execution never paused"
        time.sleep(0.05)
    paused = kairo.json("status")
    paused_page = page_of(kairo, paused["execution_id"], tmp_path / "paused.html")
    time.sleep(1.0)  # a gap worth seeing
    release.touch()
    resumed = kairo.run("resume", "--wait")
    assert resumed.returncode == 1, resumed.stderr  # `evil` failed
    status = kairo.json("status")
    page = page_of(kairo, status["execution_id"], tmp_path / "resumed.html")
    written = runs / status["execution_id"] / "report.html"  # at the execution's end

    with chromium() as driver:
        before = shown(driver, paused_page, tmp_path / "paused.png")
        seen = shown(driver, page, tmp_path / "resumed.png")
        at_the_end = shown(driver, written, tmp_path / "written.png")

    assert_matches_status(before, paused)
    assert before["status"] == "PAUSED" and before["gaps"] == 0
    assert_matches_status(seen, status)
    assert_matches_status(at_the_end, status)
    assert seen["gaps"] == at_the_end["gaps"] == 1
    assert seen["title"] != "pwned"
    assert any(EVIL in tail for tail in seen["tails"])  # shown as text, never as markup
    assert status["subtasks"][2]["state"] == "failed"
    json.dumps(seen)  # plain data: a failure's message shows it whole
