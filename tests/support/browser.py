"""A real browser for tests: Debian's headless Chromium driven by Selenium through chromedriver.

- :func:`chromium_unavailable_reason` installs ``chromium`` and ``chromium-driver`` with apt-get
  when they are missing and this is root (as :mod:`tests.support.zookeeper` does for ZooKeeper),
  and says why not otherwise; :func:`skip_unless_chromium` turns that into a visible skip.
- :func:`headless_chromium` opens one browser (a window of the given size, its console log kept
  at every level) and quits it, whatever happened, when the context exits.
- :func:`console_errors` reads the browser's log since the last read: SEVERE entries are console
  errors, uncaught exceptions and failed loads.

Selenium calls block: async tests run them on a thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.apt import apt_install

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PAGE_LOAD_TIMEOUT_S = 30.0


def _chromium_installed() -> bool:
    return CHROMIUM.exists() and CHROMEDRIVER.exists()


def chromium_unavailable_reason() -> str | None:
    """None when a headless Chromium can run here (installing Debian's packages if need be), else why not."""
    if _chromium_installed():
        return None
    if os.geteuid() == 0 and shutil.which("apt-get"):
        apt_install(["chromium", "chromium-driver"], _chromium_installed, recommends=False)
        if _chromium_installed():
            return None
        return f"Chromium: `apt-get install chromium chromium-driver` did not provide {CHROMIUM} and {CHROMEDRIVER}"
    return f"Chromium: {CHROMIUM} or {CHROMEDRIVER} is missing (install Debian's chromium and chromium-driver, as root)"


def skip_unless_chromium() -> None:
    """``pytest.skip`` (visible, with the reason) when no headless Chromium can run here."""
    reason = chromium_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


@contextlib.contextmanager
def headless_chromium(width: int = 1280, height: int = 800) -> Iterator[Any]:
    """A headless Chromium (a ``selenium.webdriver.Chrome``) with a ``width`` × ``height`` window."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # root, and no user namespaces in CI's sandbox
        "--disable-gpu",
        "--disable-dev-shm-usage",  # a small /dev/shm must not crash the renderer
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    try:
        driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT_S)
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[str]:
    """The SEVERE entries of the browser's log since the last call (console errors, exceptions, failed loads)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
