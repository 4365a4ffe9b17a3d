"""`make bench`'s report_html_1024: the time Debian's chromium takes to render the HTML
report (`report --html`) of a 1,024-subtask execution.

The execution is synthesized in process (tests/world/big_log.py: the real event models,
folded by the real fold, no agent run); the page is rendered by the real code, written
to a file and loaded from it, as a reviewer opens it. A run is one `driver.get` of the
file (which returns at the load event) and a read of the page's height (which waits for
its layout), in a browser started once and warmed up on the same page.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def page_of_a_thousand(directory: Path, subtasks: int) -> tuple[Path, float]:
    """The page written in `directory`, and the seconds its rendering took in process."""
    from orchestrator.core.report_html import html_page
    from orchestrator.core.status import status_document
    from tests.world.big_log import big_execution

    state, logged = big_execution(subtasks)
    began = time.perf_counter()
    document = status_document(
        state, status=state.status, version=1, head_seq=state.seq, head_hash=""
    )
    html = html_page(state, logged, document, now=logged[-1].at)
    rendered = time.perf_counter() - began
    page = directory / f"report-{subtasks}.html"
    page.write_text(html, encoding="utf-8")
    return page, rendered


def browser_render_s(page: Path, *, runs: int, warmup: int) -> tuple[list[float], int]:
    """Each measured run's seconds, and how many console messages the page left (0)."""
    from tests.browser import chromium, console, missing

    reason = missing()
    if reason is not None:
        raise RuntimeError(reason)
    times = []
    messages = 0
    with chromium() as driver:
        for i in range(warmup + runs):
            driver.get("about:blank")
            began = time.perf_counter()
            driver.get(page.as_uri())
            height: Any = driver.execute_script("return document.body.scrollHeight")
            elapsed = time.perf_counter() - began
            assert int(height) > 0
            messages += len(console(driver))
            if i >= warmup:
                times.append(elapsed)
    return times, messages
