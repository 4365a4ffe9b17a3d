"""The Markdown report (a pull request's body) of an execution whose agents planted text
everywhere they could: escape sequences, bidi overrides, raw HTML and comments, fences and
backticks, bytes that are not UTF-8. A CommonMark parser that allows raw HTML reads none
of it as markup, and nothing of it is hidden or reaches a terminal."""

from __future__ import annotations

import json
import re
from dataclasses import replace

from markdown_it import MarkdownIt

from orchestrator.core import events as ev
from orchestrator.core.report import build_report, to_markdown
from orchestrator.core.report_html import html_page
from orchestrator.core.state import fold
from orchestrator.core.status import status_document
from orchestrator.core.timeline import LoggedEvent
from tests.world.big_log import big_execution

PLANTED = (
    "\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2J\x9b2J <!-- hidden --> <img src=http://x/p.png>"
    " &#x202e; \u202edesrever\u202c\u200b ``` `x` [a](http://evil) bad\udcff.txt"
)
RAW = re.compile("[\x1b\x9b\x07\u202a-\u202e\u2066-\u2069\u200b\ud800-\udfff]")


def planted(item: LoggedEvent) -> LoggedEvent:
    event = item.event
    match event:
        case ev.VerifyFinished() | ev.AttemptExited():
            update = {"output_tail": f"{PLANTED}\n```\n{PLANTED}"}
        case ev.AttemptJudged(reason=reason) if reason is not None:
            update = {"reason": reason.model_copy(update={"detail": PLANTED})}
        case ev.SubtaskConflicted(conflicts=conflicts):
            paths = tuple(c.model_copy(update={"path": PLANTED}) for c in conflicts)
            update = {"conflicts": paths}
        case _:
            return item
    return replace(item, event=event.model_copy(update=update))


def test_nothing_an_agent_planted_is_markup_hidden_or_raw_in_the_reports() -> None:
    state, logged = big_execution(8, max_parallel=2)  # s0003 conflicts, s0005 fails
    logged = [planted(item) for item in logged]
    state = fold(state.execution_id, (item.event for item in logged))
    markdown = to_markdown(build_report(state, "FAILED"))
    document = status_document(state, status="FAILED", version=1, head_seq=1, head_hash="h")
    page = html_page(state, logged, document, now=logged[-1].at)

    # `status --json` keeps it whole, escaped by JSON itself (ASCII, a surrogate as \udcff).
    loaded = json.loads(json.dumps(document).encode("ascii"))
    assert PLANTED in [c["path"] for item in loaded["subtasks"] for c in item["conflicts"]]
    for text in (markdown, page):
        text.encode("utf-8")  # no lone surrogate: it would not print
        assert RAW.findall(text) == []
        assert r"\x1b]52;c;cm0gLXJmIH4K\x07" in text and r"bad\xff.txt" in text
    tokens = MarkdownIt("commonmark", {"html": True}).parse(markdown)
    inline = [child for token in tokens for child in token.children or ()]
    assert [t for t in [*tokens, *inline] if t.type.startswith(("html", "image", "link"))] == []
    (tail,) = [t.content for t in tokens if t.type == "fence" and "desrever" in t.content]
    assert tail.count(r"\u202edesrever") == 2 and "\n```\n" in tail  # whole, unclosed
    (path,) = {t.content for t in inline if t.type == "code_inline" and "evil" in t.content}
    assert path.startswith(r"\x1b]52;c;") and path.endswith(r"bad\xff.txt")
