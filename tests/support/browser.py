"""A real headless browser for tests: the system's Chromium driven by Playwright.

CI installs Debian's ``chromium`` (``.ci/run``) and sets ``COPILOT_REQUIRE_BROWSER=1``, so a
missing browser fails the suite there instead of skipping the check. Playwright never downloads
a browser: it drives ``/usr/bin/chromium`` (or ``COPILOT_CHROMIUM``). The machine's network is
closed, so every background service of the browser is switched off.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support.sockets import short_base_dir

CHROMIUM_ARGS = [
    "--no-sandbox",  # Chromium refuses to run as root with its sandbox
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str | None:
    configured = os.environ.get("COPILOT_CHROMIUM")
    if configured:
        return configured
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _unavailable(reason: str) -> None:
    if os.environ.get("COPILOT_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} (COPILOT_REQUIRE_BROWSER=1: CI must run the browser checks)")
    pytest.skip(reason)


@contextmanager
def browser_page() -> Iterator[Any]:
    """A fresh page in headless Chromium; skips (or fails in CI) when no browser is installed."""
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415
    except ImportError:
        _unavailable("the playwright package is not installed (pip install -e '.[test]')")
    executable = chromium_path()
    if executable is None:
        _unavailable("no Chromium on PATH (apt-get install chromium)")
    # Chromium puts its singleton socket under TMPDIR and aborts when that path is too long for a
    # Unix socket: a short directory of its own, whatever TMPDIR the tests run with.
    scratch = short_base_dir()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=executable, args=CHROMIUM_ARGS, timeout=60_000, env={**os.environ, "TMPDIR": str(scratch)}
            )
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 900})
                page.set_default_timeout(30_000)
                yield page
            finally:
                browser.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
