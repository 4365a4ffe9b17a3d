"""A real browser for the tests of the HTML report: Debian's chromium, driven by Selenium
through Debian's chromedriver (the two come from one package, so their versions match).

`make install` installs them where apt-get is (scripts/install-system-packages.sh). Where
either is missing the tests that need them skip, saying so; CI sets
`KAIRO_TEST_REQUIRE_BROWSER=1`, and there they fail instead.

Chromium runs headless, as root with --no-sandbox, with a profile of its own and every
background request (updates, sync, QUIC probes) off: this machine has no network, and a
page of the report must need none.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("KAIRO_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("KAIRO_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
REQUIRED = os.environ.get("KAIRO_TEST_REQUIRE_BROWSER") == "1"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)


def missing() -> str | None:
    """Why there is no browser to test with, or None."""
    for program in (CHROMIUM, CHROMEDRIVER):
        if not Path(program).exists():
            return f"{program} is not installed (`make install` installs chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (`make install` installs the dev extras)"
    return None


def require_browser() -> None:
    reason = missing()
    if reason is None:
        return
    if REQUIRED:
        pytest.fail(f"{reason}, and KAIRO_TEST_REQUIRE_BROWSER=1 requires it")
    pytest.skip(f"{reason}; CI runs these tests (KAIRO_TEST_REQUIRE_BROWSER=1)")


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium under Selenium, its console's messages kept (`console(driver)`)."""
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="kairo-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console(driver: Any) -> list[dict[str, Any]]:
    """What the page said on the console since the last call (errors, CSP violations)."""
    return list(driver.get_log("browser"))
