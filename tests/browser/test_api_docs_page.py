"""The API docs in a real browser with no internet: headless Chromium (the machine's
`chromium`) driven by Playwright against a real `cleanair serve` process may reach the
server and nothing else, and Swagger UI still draws every operation and schema.

`make test-browser` runs these (`make test` leaves them out: they need Chromium).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Route, expect, sync_playwright

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


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium = shutil.which("chromium")
    assert chromium, "the browser tests need Debian's chromium package (see .ci/run)"
    with sync_playwright() as playwright:
        yield playwright.chromium.launch(executable_path=chromium)


@dataclass
class Visit:
    page: Page
    #: Requests to anywhere but the server: blocked, and there must be none.
    foreign: list[str] = field(default_factory=list)
    #: Uncaught script errors and console errors.
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def visit(browser: Browser, server: Server) -> Iterator[Visit]:
    context = browser.new_context()
    own = urlsplit(server.base).netloc
    visit = Visit(context.new_page())

    def only_the_server(route: Route) -> None:
        if urlsplit(route.request.url).netloc == own:
            route.continue_()
        else:
            visit.foreign.append(route.request.url)
            route.abort()

    def record_error(message: ConsoleMessage) -> None:
        if message.type == "error":
            visit.errors.append(message.text)

    context.route("**/*", only_the_server)
    visit.page.on("pageerror", lambda error: visit.errors.append(str(error)))
    visit.page.on("console", record_error)
    yield visit
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
