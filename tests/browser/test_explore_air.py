"""The explorer's air layer in a real browser (issue 33): a chosen layer's heatmap tiles
(`GET /ext/v1/airquality/tiles/...`, fetched with the token) are drawn under the streets at
their place on the map, with a legend in the very colours the tiles hold; a step of the time
slider fetches the next hour's tiles and changes the picture; the colour-blind palette
changes tiles and legend; play walks the hours; the best departure's hour is marked; and
"off", the default, asks for and draws nothing.

One server with the shipped Helsinki network and the embedded model (its air changes hour
by hour with the traffic cycle, so hours differ without any station data).
"""

from __future__ import annotations

import io
import itertools
import math
import os
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit
from zoneinfo import ZoneInfo

import pytest
from PIL import Image, ImageChops
from playwright.sync_api import Browser, Page, Response, expect

from support.browser_pages import Visit, guarded_page
from support.servers import Server, pair, running_server, server_env

pytestmark = pytest.mark.browser

TILES = "/ext/v1/airquality/tiles/"
#: Helsinki railway station: inside the shipped network, where the map opens.
STATION = (60.1699, 24.9384)
SCREENSHOT_DIR = os.environ.get("CLEANAIR_SCREENSHOT_DIR")
#: A pixel whose grey differs by more than this counts as changed: two pictures of one view
#: are drawn alike to the pixel, and neighbouring steps of a palette, 60 % opaque, differ
#: by about ten.
CHANNEL_TOLERANCE = 6


@dataclass
class Running:
    server: Server
    env: dict[str, str]

    def token(self, user: str) -> str:
        return pair(self.env, self.server.base, user)["Authorization"].removeprefix("Bearer ")


@dataclass
class AirVisit:
    visit: Visit
    #: Every tile response the page got, in order.
    tiles: list[Response] = field(default_factory=list)

    @property
    def page(self) -> Page:
        return self.visit.page


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("explore-air")
    # Plans are made in the background; every test's fresh browser asks for the street
    # tiles again from one address, whose limit must not be what fails.
    env = server_env(
        tmp,
        CLEANAIR_DEFAULT_NETWORK="true",
        CLEANAIR_PLAN_WORKERS="1",
        CLEANAIR_EXPLORE_REQUESTS_PER_MINUTE="100000",
    )
    with running_server(env, tmp / "server.log") as server:
        yield Running(server, dict(env))


@pytest.fixture(scope="module")
def config(running: Running) -> dict[str, Any]:
    """The air layers as the server gives them to the page."""
    import json

    with urllib.request.urlopen(f"{running.server.base}/explore/air-layers", timeout=30) as got:
        answer: dict[str, Any] = json.loads(got.read())
    return answer


@pytest.fixture
def air(browser: Browser, running: Running) -> Iterator[AirVisit]:
    yield from open_air(browser, running)


@pytest.fixture
def clocked_air(browser: Browser, running: Running) -> Iterator[AirVisit]:
    """The page with Playwright's fake clock installed: it runs as the real one until a test
    pauses it, then moves only as the test says."""
    yield from open_air(browser, running, fake_clock=True)


def open_air(browser: Browser, running: Running, *, fake_clock: bool = False) -> Iterator[AirVisit]:
    context = browser.new_context(
        viewport={"width": 1400, "height": 1000}, timezone_id="Europe/Helsinki"
    )
    visit = guarded_page(context, running.server.base)
    seen = AirVisit(visit)
    visit.page.on("response", lambda r: seen.tiles.append(r) if TILES in r.url else None)
    if fake_clock:
        visit.page.clock.install()
    visit.page.goto(f"{running.server.base}/explore")
    expect(visit.page.locator("#map path.road").first).to_be_attached()
    expect(visit.page.locator("#air-layer-choice option")).to_have_count(9)
    try:
        yield seen
    finally:
        context.close()
    assert visit.foreign == []
    assert visit.errors == []


def palette(config: dict[str, Any], layer: str, name: str) -> list[str]:
    [found] = [entry for entry in config["layers"] if entry["name"] == layer]
    return [step["colour"] for step in found[name]]


def tile_image(page: Page, url: str) -> Image.Image:
    """The tile at `url` (a path and query), asked with the page's token: Playwright keeps
    no body of a response the page read as a blob."""
    token = page.input_value("#token")
    base = page.evaluate("() => location.origin")
    asked = urllib.request.Request(base + url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(asked, timeout=60) as got:
        return Image.open(io.BytesIO(got.read())).convert("RGBA")


def path_of(url: str) -> str:
    return urlsplit(url)._replace(scheme="", netloc="").geturl()


def with_time(url: str, hour: datetime) -> str:
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    query["time"] = [hour.strftime("%Y-%m-%dT%H:%M:%SZ")]
    return parts._replace(query=urlencode(query, doseq=True)).geturl()


def iso(hour: datetime) -> str:
    """An hour as the page writes it (`Date.toISOString`)."""
    return hour.isoformat().replace("+00:00", ".000Z")


def station_tile_url(page: Page, layer: str) -> str:
    """The drawn tile holding the railway station (the path and query the page asked)."""
    url = page.locator("#air-layer image").first.get_attribute("data-url") or ""
    z = int(urlsplit(url).path.split("/")[-3])
    n = 2**z
    lat, lon = STATION
    x = math.floor((lon + 180) / 360 * n)
    y = math.floor((1 - math.asinh(math.tan(math.radians(lat))) / math.pi) / 2 * n)
    found = page.locator(f'#air-layer image[data-url*="/{layer}/{z}/{x}/{y}.png"]')
    expect(found).to_have_count(1)
    return found.get_attribute("data-url") or ""


def tile_colours(page: Page, url: str) -> set[str]:
    """The opaque colours, as #RRGGBB, of the tile at `url`."""
    image = tile_image(page, path_of(url))
    found: set[str] = set()
    for _, rgba in image.getcolors(maxcolors=1 << 16) or []:
        assert isinstance(rgba, tuple)  # an RGBA image's colours are tuples
        if rgba[3] == 255:
            found.add("#{:02X}{:02X}{:02X}".format(*rgba[:3]))
    return found


def drawn(page: Page, layer: str, palette_name: str = "default") -> str:
    """Wait for the layer's tiles to be drawn; the hour they show (ISO, UTC)."""
    group = page.locator(
        f'#air-layer g.air-tiles[data-layer="{layer}"][data-palette="{palette_name}"]'
    )
    expect(group).to_have_count(1, timeout=60_000)
    expect(group.locator("image").first).to_be_attached()
    hour: str = group.get_attribute("data-hour") or ""
    return hour


def tile_hours(air: AirVisit) -> set[str]:
    return {parse_qs(urlsplit(r.url).query)["time"][0] for r in air.tiles}


def map_shot(page: Page) -> Image.Image:
    return Image.open(io.BytesIO(page.locator("#map").screenshot())).convert("RGB")


def changed_share(a: Image.Image, b: Image.Image) -> float:
    """The share of pixels where some channel differs by more than the tolerance."""
    difference = (
        ImageChops.difference(a.convert("RGB"), b.convert("RGB"))
        .convert("L")
        .point(lambda v: 255 if v > CHANNEL_TOLERANCE else 0)
    )
    histogram = difference.histogram()
    return histogram[255] / (a.width * a.height)


def choose(page: Page, running: Running, user: str, layer: str) -> None:
    page.fill("#token", running.token(user))
    page.select_option("#air-layer-choice", layer)


def utc_hour(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_off_by_default_asks_for_nothing_and_off_again_draws_nothing(
    air: AirVisit, running: Running
) -> None:
    page = air.page
    page.fill("#token", running.token("nolayer"))
    expect(page.locator("#air-layer-choice")).to_have_value("")
    # The map coming to rest after a move is when the layer loads its tiles: none while off.
    box = page.locator("#map").bounding_box()
    assert box
    page.evaluate(
        "() => { window.viewed = new Promise((done) =>"
        " document.addEventListener('cleanair:view', done, { once: true })); }"
    )
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -300)
    page.evaluate("() => window.viewed")
    expect(page.locator("#air-layer image")).to_have_count(0)
    expect(page.locator("#air-legend")).to_be_hidden()
    expect(page.locator("#air-time")).to_be_hidden()
    assert air.tiles == []

    page.select_option("#air-layer-choice", "pm25")
    drawn(page, "pm25")
    page.select_option("#air-layer-choice", "")
    expect(page.locator("#air-layer image")).to_have_count(0)
    expect(page.locator("#air-legend")).to_be_hidden()


def test_a_layer_is_drawn_under_the_streets_in_place_with_its_legend(
    air: AirVisit, running: Running, config: dict[str, Any], tmp_path: Path
) -> None:
    page = air.page
    choose(page, running, "looker", "no2")
    drawn(page, "no2")
    images = page.locator("#air-layer image")
    count = images.count()
    assert 1 <= count <= 30
    assert {r.status for r in air.tiles} == {200}
    assert len(air.tiles) == count  # only the tiles in view, each once

    # The tiles cover the whole map on screen (wider than its view box on a wide screen).
    frame = page.locator("#map").bounding_box()
    boxes = [images.nth(i).bounding_box() for i in range(count)]
    assert frame
    assert all(boxes)
    assert min(b["x"] for b in boxes if b) <= frame["x"] + 1
    assert min(b["y"] for b in boxes if b) <= frame["y"] + 1
    assert max(b["x"] + b["width"] for b in boxes if b) >= frame["x"] + frame["width"] - 1
    assert max(b["y"] + b["height"] for b in boxes if b) >= frame["y"] + frame["height"] - 1

    # Under the streets and over the parks and water: the layer sits between them.
    order = page.evaluate(
        "() => [...document.getElementById('network-layer').children].map((g) => g.id)"
    )
    assert order.index("area-layer") < order.index("air-layer") < order.index("road-layer")

    # Each image is drawn at its tile's place: the railway station's tile holds it on screen.
    station_url = station_tile_url(page, "no2")
    station_tile = page.locator(f'#air-layer image[data-url="{station_url}"]')
    box = station_tile.bounding_box()
    at = page.evaluate("([lat, lon]) => window.cleanairExplore.screenPoint(lat, lon)", [*STATION])
    assert box
    assert box["x"] <= at["x"] <= box["x"] + box["width"]
    assert box["y"] <= at["y"] <= box["y"] + box["height"]
    assert 180 <= box["width"] <= 560  # about a tile's own size on screen

    # The legend lists the layer's palette, and every colour the tiles hold is one of it.
    colours = palette(config, "no2", "default")
    legend = page.locator("#air-legend li")
    expect(legend).to_have_count(len(colours))
    assert [legend.nth(i).get_attribute("data-colour") for i in range(len(colours))] == colours
    swatch = page.eval_on_selector(
        "#air-legend li .swatch", "(e) => getComputedStyle(e).backgroundColor"
    )
    red, green, blue = (int(colours[0][i : i + 2], 16) for i in (1, 3, 5))
    assert swatch == f"rgb({red}, {green}, {blue})"
    expect(page.locator("#air-legend .title")).to_contain_text("µg/m³")
    expect(legend.first).to_contain_text("µg/m³")
    held: set[str] = set()
    for response in air.tiles:
        held |= tile_colours(page, response.url)
    assert held
    assert held <= set(colours)
    assert len(held) >= 2  # the streets and the background differ

    shots = Path(SCREENSHOT_DIR) if SCREENSHOT_DIR else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    page.locator("#map-pane").screenshot(path=str(shots / "explore-air-layer.png"))


def test_a_slider_step_fetches_the_next_hour_and_changes_the_picture(
    air: AirVisit, running: Running
) -> None:
    page = air.page
    choose(page, running, "stepper", "no2")
    now_hour = utc_hour(drawn(page, "no2"))
    expect(page.locator("#air-when")).to_contain_text("now")
    # The step to show: of the next day's hours, the one after which the railway station's
    # tile changes most (the embedded model's air follows the traffic and the weather's
    # daily cycle, so some hours change more than others; the server says which).
    station_url = station_tile_url(page, "no2")
    pictures = [
        tile_image(page, with_time(station_url, now_hour + timedelta(hours=h)))
        for h in range(1, 27)
    ]
    changes = [changed_share(a, b) for a, b in itertools.pairwise(pictures)]
    offset = 1 + changes.index(max(changes))
    assert max(changes) > 0.001

    page.eval_on_selector(
        "#air-hour",
        "(e, v) => { e.value = String(v); e.dispatchEvent(new Event('input')); }",
        offset,
    )
    hour = now_hour + timedelta(hours=offset)
    expect(page.locator("#air-layer g.air-tiles")).to_have_attribute("data-hour", iso(hour))
    local = hour.astimezone(ZoneInfo("Europe/Helsinki"))
    expect(page.locator("#air-when")).to_contain_text(
        f"{local:%H:%M} (Europe/Helsinki), in {offset} h"
    )
    before = map_shot(page)
    asked = len(air.tiles)

    page.focus("#air-hour")
    page.keyboard.press("ArrowRight")
    next_hour = hour + timedelta(hours=1)
    expect(page.locator("#air-layer g.air-tiles")).to_have_attribute("data-hour", iso(next_hour))
    fetched = air.tiles[asked:]
    assert fetched
    assert {parse_qs(urlsplit(r.url).query)["time"][0] for r in fetched} == {
        next_hour.strftime("%Y-%m-%dT%H:%M:%SZ")
    }
    after = map_shot(page)
    assert changed_share(before, after) > 0.0005

    # Back a step: the kept tiles are drawn again without asking the server.
    asked = len(air.tiles)
    page.keyboard.press("ArrowLeft")
    expect(page.locator("#air-layer g.air-tiles")).to_have_attribute("data-hour", iso(hour))
    assert len(air.tiles) == asked
    assert changed_share(before, map_shot(page)) < 0.0005


def test_the_colour_blind_palette_changes_the_tiles_and_the_legend(
    air: AirVisit, running: Running, config: dict[str, Any]
) -> None:
    page = air.page
    choose(page, running, "viridis", "clean_air_score")
    drawn(page, "clean_air_score")
    before = map_shot(page)
    asked = len(air.tiles)

    page.check("#air-colorblind")
    drawn(page, "clean_air_score", "colorblind")
    fetched = air.tiles[asked:]
    assert fetched
    assert all(parse_qs(urlsplit(r.url).query)["palette"] == ["colorblind"] for r in fetched)
    colours = palette(config, "clean_air_score", "colorblind")
    held: set[str] = set()
    for response in fetched:
        held |= tile_colours(page, response.url)
    assert held
    assert held <= set(colours)
    assert not held & set(palette(config, "clean_air_score", "default"))
    legend = page.locator("#air-legend li")
    assert [legend.nth(i).get_attribute("data-colour") for i in range(legend.count())] == colours
    assert changed_share(before, map_shot(page)) > 0.2


def test_play_walks_the_hours_and_pause_stops(clocked_air: AirVisit, running: Running) -> None:
    air = clocked_air
    page = air.page
    choose(page, running, "player", "o3")
    start = utc_hour(drawn(page, "o3"))
    page.click("#air-play")
    two_on = iso(start + timedelta(hours=2))
    expect(page.locator("#air-layer g.air-tiles")).to_have_attribute(
        "data-hour", two_on, timeout=60_000
    )
    page.click("#air-play")  # pause
    value = int(page.input_value("#air-hour"))
    assert value >= 2
    asked = tile_hours(air)
    for hour in range(3):
        assert (start + timedelta(hours=hour)).strftime("%Y-%m-%dT%H:%M:%SZ") in asked
    # While playing, an hour takes at most 8 tiles (the connection's rate limit).
    by_hour: dict[str, int] = {}
    for response in air.tiles:
        when = parse_qs(urlsplit(response.url).query)["time"][0]
        by_hour[when] = by_hour.get(when, 0) + 1
    assert by_hour[(start + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")] <= 8
    expect(page.locator("#air-play")).to_have_attribute("aria-label", "Play the air hour by hour")
    # From here the page's time moves only as the test says: ten played hours' worth of
    # it fires every timer play could have left, and the slider stays.
    page.clock.pause_at(datetime.now(UTC) + timedelta(seconds=2))
    page.clock.run_for(12_000)
    expect(page.locator("#air-layer g.air-tiles")).to_have_attribute(
        "data-hour", iso(start + timedelta(hours=value))
    )
    assert int(page.input_value("#air-hour")) == value


def test_the_best_departures_hour_is_marked_and_shown_on_demand(
    air: AirVisit, running: Running
) -> None:
    page = air.page
    choose(page, running, "leaver", "clean_air_score")
    now_hour = utc_hour(drawn(page, "clean_air_score"))
    best = now_hour + timedelta(hours=5, minutes=30)
    # As departures.js announces a plan's best departure.
    page.evaluate(
        "(t) => document.dispatchEvent(new CustomEvent('cleanair:best-departure', {detail: t}))",
        best.isoformat(),
    )
    button = page.locator("#air-best")
    expect(button).to_be_visible()
    expect(button).to_contain_text("Best departure")
    expect(page.locator("#air-marks option")).to_have_attribute("value", "5")
    button.click()
    expect(page.locator("#air-hour")).to_have_value("5")
    expect(page.locator("#air-layer g.air-tiles")).to_have_attribute(
        "data-hour", iso(now_hour + timedelta(hours=5))
    )


def test_a_planned_best_departure_is_marked_on_the_slider(air: AirVisit, running: Running) -> None:
    page = air.page
    page.fill("#token", running.token("departer"))
    for lat, lon in TRIP:
        at = page.evaluate(
            "([lat, lon]) => window.cleanairExplore.screenPoint(lat, lon)", [lat, lon]
        )
        page.mouse.click(at["x"], at["y"])
    page.select_option("#departures-hours", "3")
    page.select_option("#departures-step", "60")
    page.click("#departures")
    with page.expect_response(
        lambda r: "/ext/v1/routes/departures/" in r.url and '"best"' in r.text(),
        timeout=120_000,
    ) as answered:
        pass
    best = datetime.fromisoformat(answered.value.json()["result"]["best"]["start_time"])
    page.select_option("#air-layer-choice", "clean_air_score")
    now_hour = utc_hour(drawn(page, "clean_air_score"))
    offset = int((best - now_hour).total_seconds() // 3600)
    button = page.locator("#air-best")
    expect(button).to_be_visible()
    local = best.astimezone(ZoneInfo("Europe/Helsinki"))
    expect(button).to_contain_text("Best departure: ")
    expect(button).to_contain_text(f"{local:%H:%M}")  # with its day when not today
    expect(page.locator("#air-marks option")).to_have_attribute("value", str(offset))
    button.click()
    expect(page.locator("#air-hour")).to_have_value(str(offset))
    expect(page.locator("#air-layer g.air-tiles")).to_have_attribute(
        "data-hour", iso(now_hour + timedelta(hours=offset))
    )


def test_without_a_token_the_layer_asks_for_one(air: AirVisit) -> None:
    page = air.page
    page.select_option("#air-layer-choice", "no2")
    expect(page.locator("#air-status")).to_contain_text("token")
    expect(page.locator("#air-layer image")).to_have_count(0)
    expect(page.locator("#air-legend li").first).to_be_visible()
    assert air.tiles == []


#: Counts the blob URLs the page makes and revokes (installed before the page's scripts).
COUNT_BLOBS = """
window.blobs = { made: new Set(), revoked: new Set() };
const make = URL.createObjectURL.bind(URL);
const revoke = URL.revokeObjectURL.bind(URL);
URL.createObjectURL = (blob) => { const url = make(blob); window.blobs.made.add(url); return url; };
URL.revokeObjectURL = (url) => { window.blobs.revoked.add(url); revoke(url); };
"""


def test_tiles_dropped_from_the_cache_have_their_blob_urls_revoked(
    air: AirVisit, running: Running, config: dict[str, Any]
) -> None:
    page = air.page
    page.add_init_script(COUNT_BLOBS)
    page.reload()
    expect(page.locator("#air-layer-choice option")).to_have_count(9)
    page.fill("#token", running.token("browser"))
    # Every layer in both palettes, then more hours: more tiles than the page keeps (240).
    for layer in config["layers"]:
        for palette_name in ("default", "colorblind"):
            page.set_checked("#air-colorblind", palette_name == "colorblind")
            page.select_option("#air-layer-choice", layer["name"])
            last = drawn(page, layer["name"], palette_name)
    page.focus("#air-hour")
    for step in range(1, 5):  # and the next hours
        page.keyboard.press("ArrowRight")
        expect(page.locator("#air-layer g.air-tiles")).to_have_attribute(
            "data-hour", iso(utc_hour(last) + timedelta(hours=step))
        )
    made, revoked, shown = page.evaluate(
        "() => [window.blobs.made.size, window.blobs.revoked.size,"
        " [...document.querySelectorAll('#air-layer image')].map((i) => i.getAttribute('href'))]"
    )
    assert made > 240
    assert revoked >= made - 240
    assert made - revoked <= 240
    assert not set(shown) & set(page.evaluate("() => [...window.blobs.revoked]"))


#: Helsinki railway station and the south end of the Esplanadi (as in test_explore_page.py).
TRIP = ((60.1699, 24.9384), (60.1645, 24.9525))


def test_the_planned_route_is_drawn_in_the_layers_colours_at_the_sliders_hour(
    air: AirVisit, running: Running, config: dict[str, Any], tmp_path: Path
) -> None:
    page = air.page
    page.fill("#token", running.token("walker"))
    for lat, lon in TRIP:
        at = page.evaluate(
            "([lat, lon]) => window.cleanairExplore.screenPoint(lat, lon)", [lat, lon]
        )
        page.mouse.click(at["x"], at["y"])
    page.click("#plan")
    expect(page.locator("#routes li").first).to_be_visible(timeout=90_000)
    waypoints = page.evaluate("() => window.cleanairExplore.selectedRoute().length")
    expect(page.locator("#air-route")).to_have_count(0)  # no layer, no recolouring

    page.select_option("#air-layer-choice", "no2")
    now_hour = utc_hour(drawn(page, "no2"))
    lines = page.locator("#air-route line")
    expect(lines.first).to_be_attached()
    assert lines.count() == waypoints - 1  # every segment lies on the drawn tiles
    colours = set(palette(config, "no2", "default"))
    assert {lines.nth(i).get_attribute("data-colour") for i in range(lines.count())} <= colours
    shots = Path(SCREENSHOT_DIR) if SCREENSHOT_DIR else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    page.locator("#map").screenshot(path=str(shots / "explore-air-route.png"))
    # Over the plan's own route and under the markers.
    order = page.evaluate("() => [...document.getElementById('map').children].map((g) => g.id)")
    assert order.index("route-layer") < order.index("air-route") < order.index("marker-layer")

    # A slider step repaints it from that hour's tiles; the layer off takes it away.
    page.focus("#air-hour")
    page.keyboard.press("ArrowRight")
    expect(page.locator("#air-layer g.air-tiles")).to_have_attribute(
        "data-hour", iso(now_hour + timedelta(hours=1))
    )
    expect(page.locator("#air-route line").first).to_be_attached()
    page.select_option("#air-layer-choice", "")
    expect(page.locator("#air-route")).to_have_count(0)
    expect(page.locator("#map g.route.selected line").first).to_be_attached()


def test_on_a_phone_the_controls_sit_under_a_map_of_half_the_screen(
    browser: Browser, running: Running, tmp_path: Path
) -> None:
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, timezone_id="Europe/Helsinki"
    )
    visit = guarded_page(context, running.server.base)
    page = visit.page
    try:
        page.goto(f"{running.server.base}/explore")
        expect(page.locator("#map path.road").first).to_be_attached()
        page.fill("#token", running.token("phone"))
        page.select_option("#air-layer-choice", "eu_eaqi_2024")
        drawn(page, "eu_eaqi_2024")
        frame = page.locator("#map-frame").bounding_box()
        controls = page.locator("#air").bounding_box()
        legend = page.locator("#air-legend").bounding_box()
        assert frame
        assert controls
        assert legend
        assert frame["height"] >= 0.4 * 844
        assert controls["y"] >= frame["y"] + frame["height"]  # nothing over the map
        assert legend["x"] + legend["width"] <= 390
        shots = Path(SCREENSHOT_DIR) if SCREENSHOT_DIR else tmp_path
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "explore-air-phone.png"))
    finally:
        context.close()
    assert visit.foreign == []
    assert visit.errors == []


def test_a_refused_tile_is_said_in_words_and_draws_nothing(
    browser: Browser, running: Running
) -> None:
    context = browser.new_context(
        viewport={"width": 1400, "height": 1000}, timezone_id="Europe/Helsinki"
    )
    # The refusals are logged as failed loads, which this test causes on purpose.
    visit = guarded_page(context, running.server.base, lambda text: "Failed to load" in text)
    page = visit.page
    try:
        page.goto(f"{running.server.base}/explore")
        expect(page.locator("#map path.road").first).to_be_attached()
        page.fill("#token", "ca_tst_" + "x" * 40)
        with page.expect_response(lambda r: TILES in r.url) as refused:
            page.select_option("#air-layer-choice", "pm10")
        assert refused.value.status == 401
        expect(page.locator("#air-status")).to_contain_text(
            "The air could not be drawn: The token was not accepted (401)"
        )
        expect(page.locator("#air-layer image")).to_have_count(0)
    finally:
        context.close()
    assert visit.foreign == []
    assert visit.errors == []
