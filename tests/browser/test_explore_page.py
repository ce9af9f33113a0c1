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
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from playwright.sync_api import (
    Browser,
    Page,
    Request,
    Route,
    expect,
)

from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE, DEFAULT_NETWORK_NAME
from cleanair_sources.osm_import import import_network
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
    env: dict[str, str]

    def fresh_token(self, user: str) -> str:
        """A token of a new user: a full credit pool, whatever other tests spent."""
        return pair(self.env, self.server.base, user)["Authorization"].removeprefix("Bearer ")


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Explorer]:
    """One server for the module: it imports the shipped network and plans in the
    background."""
    tmp = tmp_path_factory.mktemp("explore-server")
    # Every test's fresh browser asks for the map's tiles again, all from one address: the
    # per-address limit (tests/cleanair_http/test_explore_tiles.py) must not be what fails.
    env = server_env(
        tmp,
        CLEANAIR_DEFAULT_NETWORK="true",
        CLEANAIR_PLAN_WORKERS="1",
        CLEANAIR_EXPLORE_REQUESTS_PER_MINUTE="100000",
    )
    with running_server(env, tmp / "server.log") as server:
        header = pair(env, server.base)
        yield Explorer(server, header["Authorization"].removeprefix("Bearer "), dict(env))


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
    token = explorer.fresh_token("planner")
    page.fill("#token", token)
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
    expect(page.locator("#baseline")).to_contain_text("relative dose ")
    expect(page.locator("section:has(#plan) .legend").last).to_have_text(
        re.compile(r"relative inhaled dose \(1 = an hour of light effort at WHO\s+guideline air\)")
    )
    expect(page.locator("#error")).to_be_hidden()
    # The plan's 25 credits are shown gone: 1000 a month, 100 a day to start with.
    expect(page.locator("#credits")).to_have_text("Credits left: 975 this month, 75 today.")
    expect(page.locator("#air-source")).to_contain_text(
        "Air: the embedded air-quality model (modelled offline, not measured), "
        "not corrected by any station now; as of "
    )
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
    # The click shows the point's conditions (1 credit): seen before the next call's count.
    expect(page.locator("#credits")).to_have_text("Credits left: 974 this month, 74 today.")
    page.click("#forecast")
    expect(page.locator("#chart polyline.series").first).to_be_attached()
    expect(page.locator("#forecast-status")).to_contain_text("Forecast for ")
    expect(page.locator("#chart .title")).to_contain_text("clean_air_score")
    expect(page.locator("#forecast-error")).to_be_hidden()
    expect(page.locator("#credits")).to_have_text("Credits left: 972 this month, 72 today.")
    page.click("#score")
    expect(page.locator("#score-result")).to_have_text(
        re.compile(r"Clean Air Score now: \d+ of 100 at 60\.16600, 24\.94500\.")
    )
    expect(page.locator("#credits")).to_have_text("Credits left: 971 this month, 71 today.")

    # The token stays in this tab's session storage, nowhere else in the page.
    stored = page.evaluate("() => sessionStorage.getItem('cleanair.explore.token')")
    assert stored == token
    assert token not in page.content()

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


def test_each_action_says_its_cost_and_how_to_get_a_token(visit: Visit) -> None:
    page = visit.page
    expect(page.locator("#plan + .cost")).to_have_text("25 credits")
    expect(page.locator("#forecast + .cost")).to_have_text("2 credits")
    expect(page.locator("#score + .cost")).to_have_text("1 credit")
    # The commands as they run in the project folder (test_explore_first_use.py runs them).
    how = page.locator("#pairing-how")
    expect(how).to_be_visible()
    expect(how).to_contain_text(".venv/bin/cleanair users add NAME")
    expect(how).to_contain_text(".venv/bin/cleanair pairing-code NAME")
    help_text = page.locator("#token-help")
    page.click("#token-help summary")
    expect(help_text).to_contain_text("POST /v1/connections/token")
    expect(help_text.locator("a")).to_have_attribute("href", "/#walkthrough")


def test_a_spent_daily_pool_says_when_it_comes_back(visit: Visit, explorer: Explorer) -> None:
    """Retry-After 29,107 s at 15:54:53 UTC is midnight: the page says the time, not the
    seconds."""
    page = visit.page
    page.clock.set_fixed_time(datetime(2026, 1, 15, 15, 54, 53, tzinfo=UTC))
    page.route(
        "**/v1/routes",
        lambda route: route.fulfill(
            status=429,
            headers={"Retry-After": "29107"},
            content_type="application/json",
            body=json.dumps({"detail": "Daily credits exhausted"}),
        ),
    )
    page.fill("#token", explorer.token)
    click_at(page, *START)
    click_at(page, *END)
    page.click("#plan")
    expect(page.locator("#error")).to_contain_text(
        "Daily credits exhausted. Try again from tomorrow 00:00 UTC."
    )
    expect(page.locator("#error")).not_to_contain_text("29107")


def test_earlier_routes_stay_when_a_later_plan_fails(visit: Visit, explorer: Explorer) -> None:
    page = visit.page
    page.fill("#token", explorer.fresh_token("again"))
    click_at(page, *START)
    click_at(page, *END)
    page.click("#plan")
    routes = page.locator("#routes li")
    expect(routes.first).to_be_visible(timeout=PLAN_WITHIN_MS)
    count = routes.count()
    page.route(
        "**/v1/routes",
        lambda route: route.fulfill(
            status=503,
            content_type="application/json",
            body=json.dumps({"detail": "Service unavailable"}),
        ),
    )
    page.click("#plan")
    expect(page.locator("#error")).to_contain_text(
        "A data source is unavailable (503): Service unavailable. Nothing was charged. "
        "The routes shown are from the previous plan."
    )
    expect(routes).to_have_count(count)
    expect(page.locator("#map g.route")).to_have_count(count)


def test_a_plan_with_only_the_direct_route_says_why(visit: Visit, explorer: Explorer) -> None:
    """The planner keeps no alternative when none up to 25 % longer has less dose: made up
    in the browser, as which plans end so depends on the air of the hour."""
    page = visit.page
    request_id = "0b7e0a8e-4d1e-4f3e-9c39-9b1b1f8f2f11"
    direct = {
        "waypoints": [list(START), list(END)],
        "measures": {"clean_air_score": [80, 82]},
        "summary": {"clean_air_score": {"score": 81, "colour": "#3a3", "description": "Good"}},
        "distance": 1020.0,
        "distance_delta": 0,
        "clean_air_score_delta_pct": 0.0,
        "dose_delta_pct": 0.0,
        "duration": 780.0,
        "goal": {"title": "Direct route", "description": "The shortest route."},
    }
    result = {
        "activity_type": "walking",
        "routes": [direct],
        "original_distance": 1020.0,
        "original_clean_air_score": 81,
        "original_dose": 0.21,
        "best_route_index": 0,
    }
    page.route(
        "**/v1/routes",
        lambda route: route.fulfill(
            status=202, content_type="application/json", body=json.dumps({"request_id": request_id})
        ),
    )
    page.route(
        f"**/v1/routes/{request_id}",
        lambda route: route.fulfill(
            status=200,
            content_type="application/json",
            body=json.dumps({"status": "completed", "result": result}),
        ),
    )
    page.fill("#token", explorer.token)
    click_at(page, *START)
    click_at(page, *END)
    page.click("#plan")
    expect(page.locator("#verdict")).to_have_text(
        "The direct route is the cleanest: no route up to 25 % longer has less dose."
    )
    expect(page.locator("#routes li")).to_have_count(1)
    expect(page.locator("#baseline")).to_contain_text("relative dose 0.21")


def named_point(street: str) -> tuple[float, float]:
    """The middle of the first edge of `street` in the shipped network."""
    helsinki = import_network(DEFAULT_NETWORK_FILE, DEFAULT_NETWORK_NAME)
    assert helsinki.edge_name is not None
    edge = helsinki.edge_name.tolist().index(helsinki.street_names.index(street))
    a, b = helsinki.node(int(helsinki.edge_from[edge])), helsinki.node(int(helsinki.edge_to[edge]))
    return (a.lat + b.lat) / 2, (a.lon + b.lon) / 2


def test_pointing_at_a_street_shows_its_name(visit: Visit) -> None:
    page = visit.page
    lat, lon = named_point("Mannerheimintie")
    at = page.evaluate("([lat, lon]) => window.cleanairExplore.screenPoint(lat, lon)", [lat, lon])
    page.mouse.move(at["x"], at["y"])
    expect(page.locator("#street-name")).to_be_visible()
    expect(page.locator("#street-name")).to_have_text("Mannerheimintie")
    if SCREENSHOT_DIR:
        Path(SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOT_DIR) / "street-name.png"))
    # Far from every street (the map's corner, outside the network), no name.
    box = page.locator("#map").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + 3, box["y"] + 3)
    expect(page.locator("#street-name")).to_be_hidden()


def test_the_shipped_network_is_shown_first(visit: Visit, explorer: Explorer) -> None:
    """With another network listed first (names sort), the page still opens on Helsinki."""
    page = visit.page
    other = {
        "name": "aachen",
        "bounds": [50.77, 6.08, 50.78, 6.09],
        "nodes": 2,
        "edges": 1,
        "tiles": "/explore/networks/aachen/tiles/0123456789abcdef01234567/{z}/{x}/{y}",
        "max_zoom": 19,
        "max_tile_edges": 20000,
    }

    def with_another(route: Route) -> None:
        served = route.fetch()
        body = served.json()
        body["networks"].insert(0, other)
        route.fulfill(response=served, body=json.dumps(body))

    page.route("**/explore/networks", with_another)
    page.reload()
    expect(page.locator("#network-choice")).to_be_visible()
    expect(page.locator("#network")).to_have_value("helsinki")
    expect(page.locator("#network-info")).to_contain_text("helsinki: ")


def test_water_and_parks_are_drawn_under_the_streets_with_a_legend(visit: Visit) -> None:
    page = visit.page
    water = page.locator("#map path.area.water")
    parks = page.locator("#map path.area.parks")
    expect(water.first).to_be_attached()
    expect(parks.first).to_be_attached()
    # One path per kind and tile holds every ring of it there, each a closed figure.
    for locator in (water, parks):
        drawn = locator.first.get_attribute("d") or ""
        assert drawn.count("Z") >= 1
        assert drawn.count("M") == drawn.count("Z")
    rings = [(path.get_attribute("d") or "").count("Z") for path in parks.all()]
    assert sum(rings) >= 50
    # Under the streets: their layer is drawn before the streets', and filled, not outlined.
    order = page.evaluate(
        """() => [...document.querySelectorAll('#network-layer path')]
                 .map((p) => p.classList.contains('area') ? 'area' : 'road')"""
    )
    assert order.index("road") > order.index("area")
    assert "area" not in order[order.index("road") :]
    fills = page.evaluate(
        """() => ['water', 'parks'].map((kind) =>
             getComputedStyle(document.querySelector(`#map path.area.${kind}`)).fill)"""
    )
    assert fills == ["rgb(174, 207, 234)", "rgb(220, 239, 214)"]
    expect(page.locator("#map-legend")).to_be_visible()
    expect(page.locator("#map-legend")).to_have_text(re.compile(r"Water\s+Parks, green space"))
    if SCREENSHOT_DIR:
        Path(SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOT_DIR) / "areas.png"))


def tiles_other_than(page: Page, before: set[str]) -> None:
    """Wait until the map shows streets from tiles not all in `before`."""
    page.wait_for_function(
        """(before) => {
             const now = [...document.querySelectorAll('#road-layer > g')];
             return now.length && now.some((g) => !before.includes(g.dataset.tile));
           }""",
        arg=sorted(before),
    )


def map_tiles(page: Page) -> set[str]:
    return set(
        page.evaluate(
            """() => [...document.querySelectorAll('#road-layer > g')]
                     .map((g) => g.dataset.tile)"""
        )
    )


def test_the_streets_come_as_tiles_of_the_view_and_follow_a_pan(
    visit: Visit, explorer: Explorer
) -> None:
    """The shipped city's streets show at once, from a handful of tiles; zoomed in and
    dragged, the map asks for the tiles now in view and drops those out of it."""
    page = visit.page
    asked: list[str] = []
    page.on(
        "request", lambda request: asked.append(request.url) if "/tiles/" in request.url else None
    )
    expect(page.locator("#road-layer path.road").first).to_be_attached()
    expect(page.locator("#zoom-hint")).to_be_hidden()  # every street fits at this scale
    shown = map_tiles(page)
    assert 1 <= len(shown) <= 36
    # Zoom in about the map's middle: finer tiles, still drawn.
    box = page.locator("#map").bounding_box()
    assert box is not None
    middle = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.move(*middle)
    for _ in range(8):
        page.mouse.wheel(0, -100)
    tiles_other_than(page, shown)
    zoomed = map_tiles(page)
    page.mouse.move(*middle)
    page.mouse.down()
    page.mouse.move(middle[0] - box["width"] / 3, middle[1] - box["height"] / 4, steps=8)
    page.mouse.up()
    tiles_other_than(page, zoomed)
    # Each tile drawn was asked for (or kept from before): the pan asked for new ones.
    assert {url.removeprefix(explorer.server.base) for url in asked if "/tiles/" in url} >= (
        map_tiles(page) - zoomed
    )
    expect(page.locator("#road-layer path.road").first).to_be_attached()


def test_a_tile_leaving_streets_out_says_to_zoom_in(visit: Visit) -> None:
    page = visit.page

    def omitting(route: Route) -> None:
        served = route.fetch()
        body = served.json()
        body["omitted"] = ["path", "local"]
        route.fulfill(response=served, body=json.dumps(body))

    page.route("**/tiles/**", omitting)
    page.reload()
    expect(page.locator("#zoom-hint")).to_have_text(
        "Zoom in to see all streets (not drawn at this scale: path, local)."
    )


def test_air_moved_only_by_distant_light_stations_says_so(visit: Visit) -> None:
    """Fused with no station weighing 1 % at the point (many far ones): the notice says so
    instead of failing on an empty list of stations' hours."""
    page = visit.page

    def distant(route: Route) -> None:
        served = route.fetch()
        body = served.json()
        body.update(fused=True, stations=[], pollutants=[])
        route.fulfill(response=served, body=json.dumps(body))

    page.route("**/explore/air-source*", distant)
    page.reload()
    expect(page.locator("#air-source")).to_contain_text(
        "corrected a little by distant stations, none weighing 1 % here; as of "
    )
