"""The route explorer in a real browser: headless Chromium (the machine's `chromium`) driven by
Playwright against a real `cleanair serve` process with the shipped Helsinki network.

A person pastes a token, clicks a start and an end on the drawn network, plans, and sees the
alternatives drawn with their goal, distance, duration and dose; then charts a point's
forecast. API errors show readably. The browser may reach the server and nothing else: every
other request is blocked and recorded, and none may be attempted.

`make test-browser` runs these (`make test` leaves them out: they need Chromium).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import (
    Browser,
    Page,
    Request,
    Route,
    expect,
)

from support.browser_pages import Visit, guarded_page
from support.servers import Server, pair, running_server, server_env

pytestmark = pytest.mark.browser

#: Helsinki railway station and the south end of the Esplanadi (as in tests/e2e).
START = (60.1699, 24.9384)
END = (60.1645, 24.9525)
#: Kaivopuisto's edge of the shipped extract: a point to forecast.
FORECAST = (60.1660, 24.9450)
#: A plan takes a few seconds on two busy cores; the page polls once a second.
PLAN_WITHIN_MS = 90_000
#: A folder to keep the screenshot in for a person to look at (it is otherwise in tmp_path).
SCREENSHOT_DIR = os.environ.get("CLEANAIR_SCREENSHOT_DIR")


@dataclass
class Explorer:
    server: Server
    token: str


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Explorer]:
    """One server for the module: it imports the shipped network and plans in the
    background."""
    tmp = tmp_path_factory.mktemp("explore-server")
    env = server_env(tmp, CLEANAIR_DEFAULT_NETWORK="true", CLEANAIR_PLAN_WORKERS="1")
    with running_server(env, tmp / "server.log") as server:
        header = pair(env, server.base)
        yield Explorer(server, header["Authorization"].removeprefix("Bearer "))


@pytest.fixture
def visit(browser: Browser, explorer: Explorer) -> Iterator[Visit]:
    """A fresh browser context on /explore, in Helsinki's time zone, with only the server
    reachable."""
    context = browser.new_context(
        viewport={"width": 1400, "height": 900}, timezone_id="Europe/Helsinki"
    )
    # An API error status is logged as a failed load, which the tests cause on purpose;
    # any other console error (a Content-Security-Policy violation, say) is the page's fault.
    visit = guarded_page(
        context, explorer.server.base, lambda text: "Failed to load resource" in text
    )
    page = visit.page

    def record_poll(request: Request) -> None:
        if request.method == "GET" and "/v1/routes/" in request.url:
            visit.polls.append(time.monotonic())

    page.on("request", record_poll)
    page.goto(f"{explorer.server.base}/explore")
    # The network is drawn: the page knows where every point is.
    expect(page.locator("#map path.road").first).to_be_attached()
    try:
        yield visit
    finally:
        context.close()
    assert visit.foreign == []
    assert visit.errors == []


def click_at(page: Page, lat: float, lon: float) -> None:
    at = page.evaluate("([lat, lon]) => window.cleanairExplore.screenPoint(lat, lon)", [lat, lon])
    page.mouse.click(at["x"], at["y"])


def test_a_plan_is_drawn_and_described_and_a_forecast_charted(
    visit: Visit, explorer: Explorer, tmp_path: Path
) -> None:
    page = visit.page
    page.fill("#token", explorer.token)
    click_at(page, *START)
    click_at(page, *END)
    expect(page.locator("#start-point")).to_have_text("60.16990, 24.93840")
    expect(page.locator("#end-point")).to_have_text("60.16450, 24.95250")
    page.select_option("#activity", "walking")
    page.click("#plan")

    routes = page.locator("#routes li")
    expect(routes.first).to_be_visible(timeout=PLAN_WITHIN_MS)
    count = routes.count()
    assert 1 <= count <= 4
    expect(page.locator("#map g.route")).to_have_count(count)
    expect(page.locator("#map g.route.selected line").first).to_be_attached()
    expect(page.locator("#status")).to_have_text(f"Planned: {count} route(s).")
    for index in range(count):
        item = routes.nth(index)
        expect(item.locator(".goal")).not_to_be_empty()
        expect(item.locator(".description")).not_to_be_empty()
        expect(item.locator(".distance")).to_contain_text("Distance ")
        expect(item.locator(".duration")).to_contain_text(" min")
        expect(item.locator(".dose")).to_contain_text("Dose ")
    expect(page.locator("#baseline")).to_contain_text("Direct route ")
    expect(page.locator("#error")).to_be_hidden()
    # Within the contract's 60 polls a minute.
    assert visit.polls
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(visit.polls))

    # Another alternative can be chosen from the list, and is drawn on top.
    routes.nth(count - 1).click()
    expect(page.locator(f'#map g.route.selected[data-index="{count - 1}"]')).to_have_count(1)

    # Zooming in about the cursor shrinks the view and the scale bar's distance.
    scale = page.locator("#scale .label")
    before = (page.get_attribute("#map", "viewBox"), scale.text_content())
    at = page.evaluate("([lat, lon]) => window.cleanairExplore.screenPoint(lat, lon)", START)
    page.mouse.move(at["x"], at["y"])
    for _ in range(3):
        page.mouse.wheel(0, -100)
    expect(scale).not_to_have_text(before[1] or "")
    assert page.get_attribute("#map", "viewBox") != before[0]
    page.click("#reset-view")
    expect(scale).to_have_text(before[1] or "")

    page.check('input[name="pick"][value="forecast"]')
    click_at(page, *FORECAST)
    expect(page.locator("#forecast-point")).to_have_text("60.16600, 24.94500")
    page.click("#forecast")
    expect(page.locator("#chart polyline.series").first).to_be_attached()
    expect(page.locator("#forecast-status")).to_contain_text("Forecast for ")
    expect(page.locator("#chart .title")).to_contain_text("clean_air_score")
    expect(page.locator("#forecast-error")).to_be_hidden()

    # The token stays in this tab's session storage, nowhere else in the page.
    stored = page.evaluate("() => sessionStorage.getItem('cleanair.explore.token')")
    assert stored == explorer.token
    assert explorer.token not in page.content()

    shot = tmp_path / "explore.png"
    page.screenshot(path=str(shot), full_page=True)
    if SCREENSHOT_DIR:
        Path(SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(SCREENSHOT_DIR) / shot.name)


def test_a_refused_token_is_explained(visit: Visit) -> None:
    page = visit.page
    page.fill("#token", "ca_tst_" + "A" * 43)
    click_at(page, *START)
    click_at(page, *END)
    page.click("#plan")
    expect(page.locator("#error")).to_contain_text("The token was not accepted (401)")
    page.click("#forecast")
    expect(page.locator("#forecast-error")).to_contain_text("(401)")


def test_a_plan_the_service_refuses_is_explained(visit: Visit, explorer: Explorer) -> None:
    """A plan outside every network is accepted, then rejected by the planner: the page says
    so rather than waiting forever."""
    page = visit.page
    page.fill("#token", explorer.token)
    # Both ends just outside the network's south-west corner, still on the drawn map.
    page.click("#reset-view")
    click_at(page, 60.1638, 24.9345)
    click_at(page, 60.1639, 24.9347)
    page.click("#plan")
    expect(page.locator("#error")).to_contain_text(
        "The plan was rejected: ", timeout=PLAN_WITHIN_MS
    )
    expect(page.locator("#routes li")).to_have_count(0)


def test_the_token_is_kept_for_the_tab_until_forgotten(visit: Visit, explorer: Explorer) -> None:
    page = visit.page
    page.fill("#token", explorer.token)
    page.reload()
    expect(page.locator("#token")).to_have_value(explorer.token)
    page.click("#forget-token")
    expect(page.locator("#token")).to_have_value("")
    assert page.evaluate("() => sessionStorage.length") == 0


def test_a_rate_limited_poll_waits_as_long_as_retry_after_asks(
    visit: Visit, explorer: Explorer
) -> None:
    """The first poll answers 429 with Retry-After: 3 (made up in the browser, as the real
    limit takes a minute of polls to reach); the next comes no sooner."""
    page = visit.page
    limited: list[str] = []

    def first_poll_limited(route: Route) -> None:
        if route.request.method == "GET" and not limited:
            limited.append(route.request.url)
            route.fulfill(
                status=429,
                headers={"Retry-After": "3"},
                content_type="application/json",
                body=json.dumps({"detail": "Too many requests"}),
            )
        else:
            route.continue_()

    page.route("**/v1/routes/*", first_poll_limited)
    page.fill("#token", explorer.token)
    click_at(page, *START)
    click_at(page, *END)
    page.click("#plan")
    expect(page.locator("#status")).to_contain_text("Polling too fast: waiting 3 s.")
    expect(page.locator("#routes li").first).to_be_visible(timeout=PLAN_WITHIN_MS)
    assert limited
    # The page waits the 3 s after the 429's answer; the times are when the test saw each
    # request go out, so allow their own jitter.
    assert visit.polls[1] - visit.polls[0] >= 2.95


@pytest.mark.parametrize(
    ("status", "detail", "shown"),
    [
        (403, "Premium required", "This token may not do that (403): Premium required."),
        (422, "Request validation failed", "The request was not valid (422): Request valid"),
        (429, "Daily credits exhausted", "no credits left (429): Daily credits exhausted. Try"),
    ],
)
def test_a_refused_submission_is_explained(
    visit: Visit, explorer: Explorer, status: int, detail: str, shown: str
) -> None:
    """Answers the real server gives only in states hard to set up from a browser test are
    made up in the browser; the page's words for each are what is tested."""
    page = visit.page
    page.route(
        "**/v1/routes",
        lambda route: route.fulfill(
            status=status,
            headers={"Retry-After": "60"},
            content_type="application/json",
            body=json.dumps({"detail": detail}),
        ),
    )
    page.fill("#token", explorer.token)
    click_at(page, *START)
    click_at(page, *END)
    page.click("#plan")
    expect(page.locator("#error")).to_contain_text(shown)
    expect(page.locator("#plan")).to_be_enabled()
