"""The landing page at `/` in a real browser with no internet: it says what the service is,
its links lead to the explorer, the API docs, health and the walkthrough on the page, and it
loads nothing from any other host.

`make test-browser` runs these (`make test` leaves them out: they need Chromium).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from support.browser_pages import Visit, guarded_page
from support.servers import Server, running_server, server_env

pytestmark = pytest.mark.browser

#: A folder to keep the screenshot in for a person to look at (as in test_explore_page).
SCREENSHOT_DIR = os.environ.get("CLEANAIR_SCREENSHOT_DIR")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("home-server")
    with running_server(server_env(tmp), tmp / "server.log") as running:
        yield running


@pytest.fixture
def visit(browser: Browser, server: Server) -> Iterator[Visit]:
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    # /readyz is 503 on this quick server (no network loaded): a failed load, on purpose.
    visit = guarded_page(context, server.base, lambda text: "Failed to load resource" in text)
    try:
        yield visit
    finally:
        context.close()
    assert visit.foreign == []
    assert visit.errors == []


def test_the_landing_page_says_what_the_service_is_and_links_the_rest(
    visit: Visit, server: Server, tmp_path: Path
) -> None:
    page = visit.page
    page.goto(server.base + "/")
    expect(page).to_have_title("cleanair")
    expect(page.locator(".lead")).to_contain_text("plans cleaner walking, running and cycling")
    # The stylesheet applied (its own, from this server).
    assert page.locator("pre").first.evaluate("e => getComputedStyle(e).borderStyle") == "solid"

    page.click("#link-walkthrough")
    expect(page.locator("#walkthrough")).to_be_in_viewport()
    expect(page.locator("#walkthrough")).to_contain_text("cleanair pairing-code alice")
    shot = tmp_path / "home.png"
    page.screenshot(path=str(shot), full_page=True)
    if SCREENSHOT_DIR:
        Path(SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(SCREENSHOT_DIR) / shot.name)

    page.click("#link-explore")
    expect(page).to_have_url(server.base + "/explore")
    expect(page.locator("h1")).to_have_text("cleanair route explorer")
    page.click("a.home")
    page.click("#link-docs")
    expect(page.locator(".btn.authorize")).to_be_visible()
    page.go_back()
    page.click("#link-health")
    expect(page.locator("body")).to_contain_text('"status"')
