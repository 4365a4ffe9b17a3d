"""A pytest plugin that counts the attacks by reproduction and sandbox, for `make attack`.

Each attack test names its reproduction with `@pytest.mark.reproduces("35.1")` (the issue
and the item of its list; a module of a new reproduction needs nothing more to be
counted). Its sandbox is the one its `mode` fixture gives (tests/attack/sandboxes.py),
bwrap for a test of the sandbox itself (the `sandboxed` fixture), local otherwise. The
count is of tests, by outcome."""

from __future__ import annotations

from collections import defaultdict

import pytest

_OUTCOMES: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
        return
    reproduction, sandbox = "unnamed", "local"
    for keyword in report.keywords:
        if keyword.startswith("reproduces:"):
            reproduction = keyword.removeprefix("reproduces:")
        elif keyword.startswith("sandbox:"):
            sandbox = keyword.removeprefix("sandbox:")
    outcome = "defended" if report.outcome == "passed" else report.outcome
    _OUTCOMES[reproduction, sandbox][outcome] += 1


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The marker's argument and the sandbox as keywords, which a TestReport carries and a
    # marker or a fixture's parameter does not.
    for item in items:
        for marker in item.iter_markers("reproduces"):
            item.keywords[f"reproduces:{marker.args[0]}"] = True
        item.keywords[f"sandbox:{_sandbox(item)}"] = True


def _sandbox(item: pytest.Item) -> str:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "mode" in callspec.params:
        return str(callspec.params["mode"].sandbox)
    fixtures = getattr(item, "fixturenames", ())
    return "bwrap" if "sandboxed" in fixtures or "bwrap_runs" in fixtures else "local"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    write = terminalreporter.write_line
    write("")
    write(f"{'reproduction':<14}{'sandbox':<9}{'attacks':>8}{'defended':>10}{'not':>6}")
    for reproduction, sandbox in sorted(_OUTCOMES, key=_in_order):
        counts = _OUTCOMES[reproduction, sandbox]
        total = sum(counts.values())
        defended = counts.get("defended", 0)
        write(f"{reproduction:<14}{sandbox:<9}{total:>8}{defended:>10}{total - defended:>6}")


def _in_order(key: tuple[str, str]) -> tuple[list[int], str, bool]:
    """35.2 before 35.10, each reproduction's local count before its sandbox's."""
    reproduction, sandbox = key
    numbers = [int(part) for part in reproduction.split(".") if part.isdigit()]
    return numbers, reproduction, sandbox != "local"
