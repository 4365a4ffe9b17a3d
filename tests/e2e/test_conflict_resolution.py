"""`resolve_conflicts: agent` with the real Claude Code against the scripted model server:
two subtasks collide with a third merged before them; one agent resolves its conflict
keeping both sides and is merged, the other drops the merged side's lines without a word
and is refused, its resolution kept and shown."""

from __future__ import annotations

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
TAX_A, FEE_B = added("tax_a", "n + 1"), added("fee_b", "n + 2")


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
    assert fee[0]["dropped"][0]["lines"] == ["def discount_b(n):", "    return n - 1"]
    assert "-def discount_b(n):" in fee[0]["diff"]
    assert git(repo, "rev-parse", found["fee"]["branch"]).strip() == fee[0]["commit"]
    assert report["resolutions"] == tax + fee
    markdown = project.run("report", "--markdown").stdout
    assert "## Conflict resolutions" in markdown and "(not explained)" in markdown
