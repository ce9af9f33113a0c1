"""The machine's headless Chromium, shared by the browser tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Debian's `chromium`: Playwright's own browser download cannot work here."""
    chromium = shutil.which("chromium")
    # One line saying what to do (`make test-browser` does it itself as root).
    assert chromium, "the browser tests need Chromium: run 'sudo apt-get install -y chromium'"
    with sync_playwright() as playwright:
        yield playwright.chromium.launch(executable_path=chromium)
