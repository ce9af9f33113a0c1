"""The API docs in a real browser with no internet: headless Chromium (the machine's
`chromium`) driven by Playwright against a real `cleanair serve` process may reach the
server and nothing else, and Swagger UI still draws every operation and schema.

`make test-browser` runs these (`make test` leaves them out: they need Chromium).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from support.browser_pages import Visit, guarded_page
from support.servers import Server, running_server, server_env

pytestmark = pytest.mark.browser

SUMMARIES = (
    "Redeem a pairing code",
    "Read the credit pool",
    "Score a point",
    "Forecast a day",
    "Enrich a route",
    "Submit a route plan",
    "Poll a route plan",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("docs-server")
    with running_server(server_env(tmp), tmp / "server.log") as running:
        yield running


@pytest.fixture
def visit(browser: Browser, server: Server) -> Iterator[Visit]:
    context = browser.new_context()
    yield guarded_page(context, server.base)
    context.close()


@pytest.mark.parametrize("path", ["/schema", "/schema/swagger"])
def test_swagger_ui_draws_the_api_offline(visit: Visit, server: Server, path: str) -> None:
    page = visit.page
    page.goto(server.base + path)

    for summary in SUMMARIES:
        expect(page.locator(".opblock-summary-description", has_text=summary)).to_be_visible()
    # The schemas section lists the contract's components, the plan status enum among them.
    expect(page.locator(".models")).to_contain_text("PlanRouteStatus")
    expect(page.locator(".btn.authorize")).to_be_visible()
    # The page's own styles applied: Swagger UI's stylesheet sets the operation colours.
    post = page.locator(".opblock-post").first
    assert post.evaluate("e => getComputedStyle(e).borderColor") != "rgb(0, 0, 0)"
    assert visit.foreign == []
    assert visit.errors == []
