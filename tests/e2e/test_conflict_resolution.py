"""`resolve_conflicts: agent` with the real Claude Code against the scripted model server:
two subtasks collide with a third merged before them; one agent resolves its conflict
keeping both sides and is merged, the other drops the merged side's lines without a word
and is refused, its resolution kept and shown. What a reviewer reads of it is what git
did: each merge's diffstat is its merge commit's against its first parent, the resolving
agent is told its first attempt was accepted and whose merged work its merge met, and
the dropped lines shown are those the result lacks."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from tests.e2e import python_project as shop
from tests.e2e.conftest import Kairo, git
from tests.e2e.test_real_agents import claude, project, run_plan, views  # noqa: F401
from tests.model_server import Reply, edit, read, serve, write

pytestmark = pytest.mark.slow

CONFLICTS = "Merge conflicts to resolve"


def added(function: str, body: str) -> str:
    return f"\n\ndef {function}(n):\n    return {body}\n"


A, B = shop.module("a"), shop.module("b")
DEFINED_A, DEFINED_B = shop.define("a", "price_a"), shop.define("b", "price_b")
DISCOUNT_A, DISCOUNT_B = added("discount_a", "n - 1"), added("discount_b", "n - 1")
# fee_b's body is discount_b's: a line of the hunk fee drops that its result still holds
TAX_A, FEE_B = added("tax_a", "n + 1"), added("fee_b", "n - 1")


def appends(*edits: tuple[str, str, str]) -> list[Reply]:
    """Read the files, append to each, say so."""
    return [
        Reply(tools=tuple(read(path) for path, _, _ in edits)),
        Reply(tools=tuple(edit(path, old, old + new) for path, old, new in edits)),
        Reply(text="Added."),
    ]


def resolves(path: str, content: str) -> list[Reply]:
    """Read the conflicted file, write the resolution whole, say so."""
    return [
        Reply(tools=(read(path),)),
        Reply(tools=(write(path, content),)),
        Reply(text="Resolved."),
    ]


def test_an_agent_resolution_keeping_both_sides_merges_and_one_dropping_a_side_is_refused(
    project: Kairo,  # noqa: F811
    repo: Path,
    claude: Path,  # noqa: F811
) -> None:
    body_a, body_b = "    return n * 2\n", "    return n * 3\n"
    scripts = [
        shop.script_for(
            "discount", *shop.turns(appends((A, body_a, DISCOUNT_A), (B, body_b, DISCOUNT_B)))
        ),
        shop.script_for(
            "tax",
            *shop.turns(resolves(A, DEFINED_A + DISCOUNT_A + TAX_A), since=CONFLICTS),
            *shop.turns(appends((A, body_a, TAX_A))),
        ),
        shop.script_for(
            "fee",  # keeps its own lines only: discount_b is dropped, and not explained
            *shop.turns(resolves(B, DEFINED_B + FEE_B), since=CONFLICTS),
            *shop.turns(appends((B, body_b, FEE_B))),
        ),
    ]
    text = (
        "version: 1\nname: resolving\nmax_parallel: 3\n"
        f"verify: {json.dumps(shop.SUITE)}\nresolve_conflicts: agent\n"
        f"agent: {{kind: claude-code, binary: {claude}}}\nsubtasks:\n"
        + "".join(
            f"  - id: {sid}\n    prompt: {json.dumps(prompt)}\n"
            for sid, prompt in (
                ("discount", "Add discount_a and discount_b."),
                ("tax", "Add tax_a."),
                ("fee", "Add fee_b."),
            )
        )
    )
    with serve(*scripts) as server:
        done = run_plan(project, server, text)

    report = project.json("report")
    assert done.returncode == 1, report
    found = views(project)
    assert {sid: v["state"] for sid, v in found.items()} == {
        "discount": "merged",
        "tax": "merged",
        "fee": "failed",
    }, project.run("report").stdout
    branch = project.json("status")["integration_branch"]
    assert git(repo, "show", f"{branch}:{A}") == DEFINED_A + DISCOUNT_A + TAX_A
    assert git(repo, "show", f"{branch}:{B}") == DEFINED_B + DISCOUNT_B  # fee's never merged

    # tax: one resolution, a merge commit of its branch and the integration head, accepted
    tax, fee = found["tax"]["resolutions"], found["fee"]["resolutions"]
    assert [(r["outcome"], r["conflicts"][0]["with"]) for r in tax] == [("accepted", ["discount"])]
    parents = git(repo, "log", "-1", "--format=%P", tax[0]["commit"]).split()
    assert parents[1] == tax[0]["merged_in"] and len(parents) == 2
    assert "+def discount_a(n):" not in tax[0]["diff"] and "+def tax_a(n):" in tax[0]["diff"]
    # what its agent was told: the path, with whom, what discount changed there
    told = next(
        e.conversation for e in server.exchanges("tax") if CONFLICTS in e.conversation.last_text
    )
    assert f"### {A} (content), collides with: discount" in told.last_text
    assert "+def discount_a(n):" in told.last_text
    assert "KAIRO-DROPPED-HUNKS.md" in told.last_text

    # fee: refused for what it dropped, its resolution kept on its branch and shown
    assert found["fee"]["reason"].startswith("resolution_dropped_changes: "), found["fee"]
    assert f"theirs {B}:" in found["fee"]["reason"]
    assert [r["outcome"] for r in fee] == ["refused"]
    # only the line the result lacks: fee_b's `return n - 1` is the very line discount_b had
    assert fee[0]["dropped"][0]["lines"] == ["def discount_b(n):"]
    assert "-def discount_b(n):" in fee[0]["diff"]
    assert git(repo, "rev-parse", found["fee"]["branch"]).strip() == fee[0]["commit"]
    assert report["resolutions"] == tax + fee
    markdown = project.run("report", "--markdown").stdout
    assert "## Conflict resolutions" in markdown and "(not explained)" in markdown

    # Each merge is credited with what git did: its merge commit against its first parent.
    # tax's branch holds discount's work too (its resolution merged the integration
    # branch in), and only tax_a is new on the integration branch.
    logged = [json.loads(line) for line in project.run("events", "--json").stdout.splitlines()]
    merged_events = {
        e["payload"]["subtask_id"]: e["payload"]
        for e in logged
        if e["event_type"] == "subtask_merged"
    }
    run_root = Path(report["run_root"])
    written_md = (run_root / "report.md").read_text(encoding="utf-8")
    written_html = (run_root / "report.html").read_text(encoding="utf-8")
    for item in report["merged"]:
        merge = item["merge_commit"]
        stat = git(repo, "diff", "--stat", f"{merge}^1", merge).splitlines()[-1].strip()
        paths = git(repo, "diff", "--name-only", f"{merge}^1", merge).split()
        assert (item["diffstat"], item["changed_paths"]) == (stat, paths), item["id"]
        assert merged_events[item["id"]]["diffstat"] == stat
        assert f"**{item['id']}**: {stat}" in markdown and f"**{item['id']}**: {stat}" in written_md
        assert f"<td>{html.escape(stat)}</td>" in written_html
    (tax_merged,) = [item for item in report["merged"] if item["id"] == "tax"]
    assert (tax_merged["diffstat"], tax_merged["changed_paths"]) == (
        "1 file changed, 4 insertions(+)",
        [A],
    )

    # The resolving agent is told its first attempt was accepted and whose merged work its
    # merge conflicted with, not that it was refused.
    prompt = (run_root / "tax" / "2" / "prompt.txt").read_text(encoding="utf-8")
    assert (
        f"- Attempt 1 was accepted; its merge into the integration branch conflicted with "
        f"discount ({A})." in prompt
    ), prompt
    assert "not accepted" not in prompt

    # The HTML report has the resolutions in a section of their own; the Conflicts table
    # holds no resolved conflict (none is left: fee failed, tax merged).
    page = project.run("report", "--html").stdout
    section = page[page.index('<section id="resolutions">') :]
    section = section[: section.index("</section>")]
    assert 'data-subtask="tax" data-attempt="2" data-outcome="accepted"' in section
    assert 'data-subtask="fee" data-attempt="2" data-outcome="refused"' in section
    assert f"theirs {A}" not in section and f"theirs {B}:" in section
    assert "<code>def discount_b(n):</code>" in section
    assert 'id="count-conflicted" data-count="0"' in page
    assert '<table class="conflicts">' not in page
