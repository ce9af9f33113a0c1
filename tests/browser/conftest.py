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
    assert chromium, "the browser tests need Debian's chromium package (see .ci/run)"
    with sync_playwright() as playwright:
        yield playwright.chromium.launch(executable_path=chromium)
