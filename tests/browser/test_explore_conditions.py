"""The explorer's conditions panel in a real browser: clicking a forecast point asks
`POST /ext/v1/airquality/conditions` and shows its indexes on their colours, their advice, the
source in words and the age; errors leave the page working (issue 24).

Two servers with the shipped Helsinki network: one with the embedded model alone, one whose
database holds a station's observation of the latest hour, imported with the real CLI before
the server starts (so it fuses it from its first answer, with nothing to wait for).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from support.browser_pages import Visit, guarded_page
from support.servers import Server, cli, pair, running_server, server_env

pytestmark = pytest.mark.browser

PATH = "/ext/v1/airquality/conditions"
#: Kaivopuisto's edge of the shipped extract, as in test_explore_page.py.
POINT = (60.1660, 24.9450)
#: A station at Helsinki railway station (as in tests/e2e/test_fused_air.py).
STATION = (60.1699, 24.9384)
SCREENSHOT_DIR = os.environ.get("CLEANAIR_SCREENSHOT_DIR")
#: The shipped network's country (Finland) reports the EEA's index.
EAQI = "eu_eaqi_2024"


@dataclass
class Running:
    server: Server
    env: dict[str, str]

    def token(self, user: str) -> str:
        """A token of a new user: a full credit pool, whatever other tests spent."""
        return pair(self.env, self.server.base, user)["Authorization"].removeprefix("Bearer ")


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("conditions-plain")
    env = server_env(tmp, CLEANAIR_DEFAULT_NETWORK="true")
    with running_server(env, tmp / "server.log") as server:
        yield Running(server, dict(env))


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("conditions-measured")
    env = server_env(tmp, CLEANAIR_DEFAULT_NETWORK="true")
    # The hour that ended last: the newest an observation can be, so it corrects "now".
    hour_end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    archive = tmp / "stations.csv"
    archive.write_text(
        "location_id,sensors_id,location,datetime,lat,lon,parameter,units,value\n"
        f"7,70,Kaivokatu,{hour_end.isoformat()},{STATION[0]},{STATION[1]},no2,µg/m³,35.0\n"
    )
    imported = cli(env, "stations", "import", str(archive))
    assert imported.returncode == 0, imported.stderr
    with running_server(env, tmp / "server.log") as server:
        yield Running(server, dict(env))


def open_explorer(browser: Browser, running: Running) -> Iterator[Visit]:
    context = browser.new_context(
        viewport={"width": 1400, "height": 1000}, timezone_id="Europe/Helsinki"
    )
    # An API error status is logged as a failed load, which the tests cause on purpose.
    visit = guarded_page(context, running.server.base, lambda text: "Failed to load" in text)
    visit.page.goto(f"{running.server.base}/explore")
    expect(visit.page.locator("#map path.road").first).to_be_attached()
    try:
        yield visit
    finally:
        context.close()
    assert visit.foreign == []
    assert visit.errors == []


@pytest.fixture
def visit(browser: Browser, plain: Running) -> Iterator[Visit]:
    yield from open_explorer(browser, plain)


@pytest.fixture
def measured_visit(browser: Browser, measured: Running) -> Iterator[Visit]:
    yield from open_explorer(browser, measured)


def click_forecast_point(page: Page, lat: float, lon: float) -> None:
    page.check('input[name="pick"][value="forecast"]')
    at = page.evaluate("([lat, lon]) => window.cleanairExplore.screenPoint(lat, lon)", [lat, lon])
    page.mouse.click(at["x"], at["y"])


def conditions_after_click(page: Page) -> dict[str, Any]:
    """Click the point and return the service's answer the page got."""
    with page.expect_response(lambda r: r.url.endswith(PATH)) as answered:
        click_forecast_point(page, *POINT)
    response = answered.value
    assert response.status == 200, response.text()
    body: dict[str, Any] = response.json()
    return body


def rgb(hex_colour: str) -> tuple[int, int, int]:
    value = hex_colour.lstrip("#")
    red, green, blue = (int(value[i : i + 2], 16) for i in (0, 2, 4))
    return red, green, blue


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """WCAG 2 contrast ratio."""

    def luminance(colour: tuple[int, int, int]) -> float:
        def linear(channel: int) -> float:
            c = channel / 255
            return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

        r, g, b_ = (linear(c) for c in colour)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b_

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def computed_rgb(page: Page, selector: str, prop: str) -> tuple[int, int, int]:
    value = page.eval_on_selector(selector, f"(e) => getComputedStyle(e).{prop}")
    match = re.fullmatch(r"rgba?\((\d+), (\d+), (\d+)(?:, [\d.]+)?\)", value)
    assert match, value
    red, green, blue = (int(group) for group in match.groups())
    return red, green, blue


def test_clicking_a_point_shows_its_index_advice_source_and_age(
    visit: Visit, plain: Running, tmp_path: Path
) -> None:
    page = visit.page
    page.fill("#token", plain.token("looker"))
    panel = page.locator("#conditions")
    expect(panel.locator("h3 .cost")).to_have_text("1 credit")
    body = conditions_after_click(page)

    [index] = body["indexes"]
    assert index["code"] == EAQI
    card = panel.locator(f'.conditions-index[data-code="{EAQI}"]')
    expect(card).to_be_visible()
    expect(card.locator(".index-name")).to_have_text(index["name"])
    expect(card.locator(".index-name")).to_contain_text("European Air Quality Index")
    expect(card.locator(".swatch")).to_have_text(f"{index['value']} · {index['category']}")
    swatch = f'#conditions .conditions-index[data-code="{EAQI}"] .swatch'
    background = computed_rgb(page, swatch, "backgroundColor")
    assert background == rgb(index["colour"])
    assert contrast(background, computed_rgb(page, swatch, "color")) >= 4.5
    dominant = index["dominant_pollutant"]
    averaging = index["concentrations"][dominant]["averaging"]
    expect(card.locator(".dominant")).to_contain_text("Dominant pollutant: ")
    expect(card.locator(".dominant")).to_contain_text(
        {"1h": "1-hour mean", "8h": "8-hour mean", "24h": "24-hour mean", "nowcast": "NowCast"}[
            averaging
        ]
    )
    expect(card.locator(".advice .general")).to_have_text(index["health"]["general"])
    expect(card.locator(".advice .sensitive")).to_have_text(index["health"]["sensitive"])
    assert index["health"]["general"]

    assert body["provenance"]["source"] == "embedded-model"
    expect(panel.locator(".conditions-source")).to_have_text(
        "Source: the embedded model (modelled, not measured)."
    )
    hour = datetime.fromisoformat(body["provenance"]["data_time"]).astimezone(UTC)
    expect(panel.locator(".conditions-age")).to_have_text(
        re.compile(rf"Values for {hour:%H:%M} UTC, (just now|\d+ min ago)\.")
    )
    worst, best = body["clean_air_score_interval90"]
    band = "" if worst == best else f" (90 %: {worst} to {best})"
    expect(panel.locator(".conditions-score")).to_have_text(
        f"At 60.16600, 24.94500: Clean Air Score {body['clean_air_score']} of 100{band}."
    )
    # Each concentration with its interval (the digits are the browser's rounding).
    expect(panel.locator(".conditions-pollutants")).to_have_text(
        re.compile(r"Concentrations, µg/m³: .*NO₂ \d+\.\d \(90 %: \d+\.\d to \d+\.\d\)")
    )
    # The call's credit is shown gone: 1000 a month, 100 a day to start with.
    expect(page.locator("#credits")).to_have_text("Credits left: 999 this month, 99 today.")
    expect(panel.locator(".conditions-error")).to_be_hidden()

    shot = tmp_path / "explore-conditions.png"
    page.screenshot(path=str(shot), full_page=True)
    if SCREENSHOT_DIR:
        Path(SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(SCREENSHOT_DIR) / shot.name)


def test_station_observations_are_named_in_the_source(
    measured_visit: Visit, measured: Running
) -> None:
    page = measured_visit.page
    page.fill("#token", measured.token("measured"))
    body = conditions_after_click(page)
    provenance = body["provenance"]
    assert provenance["source"] == "embedded-model+stations"
    [station] = provenance["stations"]
    distance = station["distance_m"]
    shown = f"{distance / 1000:.1f} km" if distance >= 1000 else f"{round(distance)} m"
    weight = round(abs(station["weight"]) * 100)
    expect(page.locator("#conditions .conditions-source")).to_have_text(
        "Source: the embedded model (modelled, not measured), corrected by 1 station: "
        f"Kaivokatu ({shown}, weight {weight} %)."
    )
    if SCREENSHOT_DIR:
        page.screenshot(path=str(Path(SCREENSHOT_DIR) / "explore-conditions-stations.png"))


def test_an_error_answer_is_explained_and_the_page_keeps_working(
    visit: Visit, plain: Running
) -> None:
    page = visit.page
    page.route(
        f"**{PATH}",
        lambda route: route.fulfill(
            status=503,
            content_type="application/json",
            body=json.dumps({"detail": "Service unavailable"}),
        ),
    )
    page.fill("#token", plain.token("unlucky"))
    click_forecast_point(page, *POINT)
    error = page.locator("#conditions .conditions-error")
    expect(error).to_have_text(
        "A data source is unavailable (503): Service unavailable. Nothing was charged."
    )
    expect(page.locator("#conditions .conditions-result")).to_be_hidden()
    # The rest of the page still answers, and so does the panel once the service does.
    page.click("#score")
    expect(page.locator("#score-result")).to_contain_text("Clean Air Score now: ")
    page.unroute(f"**{PATH}")
    conditions_after_click(page)
    expect(error).to_be_hidden()
    expect(page.locator(f'#conditions .conditions-index[data-code="{EAQI}"]')).to_be_visible()


def test_a_refused_token_is_explained(visit: Visit) -> None:
    page = visit.page
    page.fill("#token", "ca_tst_" + "A" * 43)
    click_forecast_point(page, *POINT)
    expect(page.locator("#conditions .conditions-error")).to_contain_text(
        "The token was not accepted (401)"
    )


def test_a_spent_pool_says_when_it_comes_back(visit: Visit, plain: Running) -> None:
    """Retry-After 29,107 s at 15:54:53 UTC is midnight, worded as the rest of the page does."""
    page = visit.page
    page.clock.set_fixed_time(datetime(2026, 1, 15, 15, 54, 53, tzinfo=UTC))
    page.route(
        f"**{PATH}",
        lambda route: route.fulfill(
            status=429,
            headers={"Retry-After": "29107"},
            content_type="application/json",
            body=json.dumps({"detail": "Daily credits exhausted"}),
        ),
    )
    page.fill("#token", plain.token("spent"))
    click_forecast_point(page, *POINT)
    expect(page.locator("#conditions .conditions-error")).to_have_text(
        "Too many requests or no credits left (429): Daily credits exhausted. "
        "Try again from tomorrow 00:00 UTC."
    )


def test_without_a_token_nothing_is_asked(visit: Visit) -> None:
    page = visit.page
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if PATH in request.url else None)
    click_forecast_point(page, *POINT)
    expect(page.locator("#forecast-point")).to_have_text("60.16600, 24.94500")
    expect(page.locator("#conditions .conditions-status")).to_have_text(
        "Paste a token to see the conditions at the point."
    )
    assert asked == []
