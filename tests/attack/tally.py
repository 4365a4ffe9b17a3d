"""A pytest plugin that counts the attacks by reproduction, for `make attack`.

Each attack test names its reproduction with `@pytest.mark.reproduces("35.1")` (the issue
and the item of its list); the count is of tests, by outcome."""

from __future__ import annotations

from collections import defaultdict

import pytest

_OUTCOMES: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
        return
    reproduction = "unnamed"
    for keyword in report.keywords:
        if keyword.startswith("reproduces:"):
            reproduction = keyword.removeprefix("reproduces:")
    outcome = "defended" if report.outcome == "passed" else report.outcome
    _OUTCOMES[reproduction][outcome] += 1


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The marker's argument as a keyword, which a TestReport carries and a marker does not.
    for item in items:
        for marker in item.iter_markers("reproduces"):
            item.keywords[f"reproduces:{marker.args[0]}"] = True


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    write = terminalreporter.write_line
    write("")
    write(f"{'reproduction':<14}{'attacks':>8}{'defended':>10}{'not':>6}")
    for reproduction in sorted(_OUTCOMES):
        counts = _OUTCOMES[reproduction]
        total = sum(counts.values())
        defended = counts.get("defended", 0)
        write(f"{reproduction:<14}{total:>8}{defended:>10}{total - defended:>6}")
