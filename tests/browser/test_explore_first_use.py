"""A fresh user's first use of the route explorer (issue 31), in headless Chromium against a
real `cleanair serve` with the shipped Helsinki network: the page pairs itself with a code the
commands it shows make (run as typed from the project folder), plans at a start time chosen on
the page, says at night or when no cleaner route exists why and offers the morning rush hour,
marks the start and end with lettered pins, and fits a 390-pixel phone.

`make test-browser` runs these (`make test` leaves them out: they need Chromium).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from support.browser_pages import Visit, guarded_page
from support.servers import Server, running_server, server_env

pytestmark = pytest.mark.browser

#: Where `make install` puts `.venv`: the commands the pages show run from here.
PROJECT = Path(__file__).resolve().parents[2]
#: Helsinki railway station and the south end of the Esplanadi (as in test_explore_page.py).
START = (60.1699, 24.9384)
END = (60.1645, 24.9525)
PLAN_WITHIN_MS = 90_000
HELSINKI = ZoneInfo("Europe/Helsinki")
#: A plan's id in the answers made up in the browser.
REQUEST_ID = "0b7e0a8e-4d1e-4f3e-9c39-9b1b1f8f2f11"
#: A token of the right form, for plans answered in the browser.
MADE_UP_TOKEN = "ca_tst_" + "A" * 43


@dataclass
class Running:
    server: Server
    env: dict[str, str]


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("first-use-server")
    env = server_env(
        tmp,
        CLEANAIR_DEFAULT_NETWORK="true",
        CLEANAIR_PLAN_WORKERS="1",
        CLEANAIR_EXPLORE_REQUESTS_PER_MINUTE="100000",
    )
    with running_server(env, tmp / "server.log") as server:
        yield Running(server, dict(env))


def open_explorer(browser: Browser, running: Running, width: int, height: int) -> Visit:
    """/explore in a fresh context of `width` x `height` pixels in Helsinki's time zone, with
    only the server reachable."""
    context = browser.new_context(
        viewport={"width": width, "height": height}, timezone_id="Europe/Helsinki"
    )
    # A refused call is logged as a failed load, which the tests cause on purpose.
    visit = guarded_page(context, running.server.base, lambda text: "Failed to load" in text)
    visit.page.goto(f"{running.server.base}/explore")
    expect(visit.page.locator("#map path.road").first).to_be_attached()
    return visit


@pytest.fixture
def visit(browser: Browser, running: Running) -> Iterator[Visit]:
    visit = open_explorer(browser, running, 1400, 900)
    try:
        yield visit
    finally:
        visit.page.context.close()
    assert visit.foreign == []
    assert visit.errors == []


def click_at(page: Page, lat: float, lon: float) -> None:
    at = page.evaluate("([lat, lon]) => window.cleanairExplore.screenPoint(lat, lon)", [lat, lon])
    page.mouse.click(at["x"], at["y"])


def shell(command: str, env: Mapping[str, str]) -> str:
    """`command` as a person types it in a terminal in the project folder; its output."""
    done = subprocess.run(
        ["bash", "-eu", "-c", command],
        cwd=PROJECT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_page_pairs_itself_with_the_code_its_commands_make_and_then_plans_and_scores(
    visit: Visit, running: Running
) -> None:
    page = visit.page
    shown = page.locator("#pairing-how code")
    commands = [shown.nth(i).inner_text() for i in range(shown.count())]
    assert commands == [
        "make install",
        ".venv/bin/cleanair users add NAME",
        ".venv/bin/cleanair pairing-code NAME",
    ]
    shell(commands[1].replace("NAME", "newcomer"), running.env)
    code = shell(commands[2].replace("NAME", "newcomer"), running.env).strip()

    with page.expect_request("**/v1/connections/token") as sent:
        page.fill("#pairing-code", code)
        page.click("#pair")
    assert json.loads(sent.value.post_data or "") == {"code": code, "name": "explorer"}
    assert "authorization" not in sent.value.headers
    expect(page.locator("#pairing-status")).to_contain_text('connection "explorer"')
    expect(page.locator("#pairing-error")).to_be_hidden()
    expect(page.locator("#credits")).to_have_text("Credits left: 1000 this month, 100 today.")
    token = page.input_value("#token")
    assert token.startswith("ca_tst_")
    expect(page.locator("#pairing-code")).to_have_value("")
    # Kept exactly as a pasted token is: this tab's session storage, nowhere in the page.
    assert page.evaluate("() => sessionStorage.getItem('cleanair.explore.token')") == token
    assert page.evaluate("() => localStorage.length") == 0
    assert token not in page.content()

    # The page plans with it, leaving tomorrow at 08:00 (the start time's control).
    tomorrow = datetime.now(HELSINKI).date() + timedelta(days=1)
    leaving = datetime(tomorrow.year, tomorrow.month, tomorrow.day, 8, tzinfo=HELSINKI)
    page.fill("#start-time", f"{tomorrow.isoformat()}T08:00")
    click_at(page, *START)
    click_at(page, *END)
    with page.expect_request(lambda r: r.url.endswith("/v1/routes") and r.method == "POST") as plan:
        page.click("#plan")
    assert plan.value.headers["authorization"] == f"Bearer {token}"
    asked = json.loads(plan.value.post_data or "")
    assert datetime.fromisoformat(asked["start_time"]) == leaving
    routes = page.locator("#routes li")
    expect(routes.first).to_be_visible(timeout=PLAN_WITHIN_MS)
    expect(page.locator("#status")).to_have_text(
        f"Planned: {routes.count()} route(s), leaving tomorrow at 08:00."
    )
    # And scores the start with it.
    with page.expect_request("**/v1/airquality/score") as scored:
        page.click("#score")
    assert scored.value.headers["authorization"] == f"Bearer {token}"
    expect(page.locator("#score-result")).to_contain_text("Clean Air Score now: ")
    expect(page.locator("#credits")).to_have_text("Credits left: 974 this month, 74 today.")


@pytest.mark.parametrize(
    ("typed", "status", "shown"),
    [
        ("000000", 401, "The code was not accepted (401): "),
        ("12345", 422, "That is not a pairing code (422): "),
    ],
)
def test_a_refused_code_is_explained_with_the_services_words(
    visit: Visit, typed: str, status: int, shown: str
) -> None:
    """The real server's refusals: a code nobody made, and one digit short."""
    page = visit.page
    with page.expect_response("**/v1/connections/token") as answered:
        page.fill("#pairing-code", typed)
        page.click("#pair")
    assert answered.value.status == status
    detail = answered.value.json()["detail"]
    expect(page.locator("#pairing-error")).to_contain_text(f"{shown}{detail}")
    expect(page.locator("#token")).to_have_value("")
    expect(page.locator("#pair")).to_be_enabled()


def test_too_many_pairing_attempts_say_when_to_try_again(visit: Visit) -> None:
    """The per-address limit takes ten attempts a minute to reach, and other tests pair from
    this address too: the answer is made up in the browser."""
    page = visit.page
    page.route(
        "**/v1/connections/token",
        lambda route: route.fulfill(
            status=429,
            headers={"Retry-After": "42"},
            content_type="application/json",
            body=json.dumps({"detail": "Too many requests"}),
        ),
    )
    page.fill("#pairing-code", "123456")
    page.click("#pair")
    expect(page.locator("#pairing-error")).to_have_text(
        "Too many pairing attempts (429): Too many requests. Try again in 42 s."
    )


def only_the_direct_route(
    page: Page, asked: list[dict[str, Any]], *, cleaner: bool = False
) -> None:
    """Plans answered in the browser with the direct route alone (which plans end so depends
    on the air of the hour), or with a cleaner one too; each submission's body goes to
    `asked`."""
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
    detour = {
        **direct,
        "distance": 1100.0,
        "distance_delta": 80,
        "dose_delta_pct": -6.0,
        "goal": {"title": "Quieter streets", "description": "Away from the traffic."},
    }
    result = {
        "activity_type": "walking",
        "routes": [direct, detour] if cleaner else [direct],
        "original_distance": 1020.0,
        "original_clean_air_score": 81,
        "original_dose": 0.21,
        "best_route_index": 0,
    }

    def submitted(route: Route) -> None:
        asked.append(json.loads(route.request.post_data or ""))
        route.fulfill(
            status=202, content_type="application/json", body=json.dumps({"request_id": REQUEST_ID})
        )

    page.route("**/v1/routes", submitted)
    page.route(
        f"**/v1/routes/{REQUEST_ID}",
        lambda route: route.fulfill(
            status=200,
            content_type="application/json",
            body=json.dumps({"status": "completed", "result": result}),
        ),
    )


@pytest.mark.parametrize(
    ("now", "start_time", "advice", "offered", "leaving", "control", "at"),
    [
        # 04:30 in Helsinki, leaving now: that morning's 08:00.
        (
            datetime(2026, 1, 15, 2, 30, tzinfo=UTC),
            "",
            "Leaving at 04:30, at night, traffic is light, so the air differs little from street "
            "to street and no detour pays; streets differ most at the morning rush hour.",
            "08:00",
            "at 08:00",
            "2026-01-15T08:00",
            datetime(2026, 1, 15, 6, tzinfo=UTC),
        ),
        # Noon, leaving at 23:00: the next morning's.
        (
            datetime(2026, 1, 15, 10, tzinfo=UTC),
            "2026-01-15T23:00",
            "Leaving at 23:00, at night, traffic is light",
            "tomorrow 08:00",
            "tomorrow at 08:00",
            "2026-01-16T08:00",
            datetime(2026, 1, 16, 6, tzinfo=UTC),
        ),
        # Leaving two days on at 02:00: that day's, named by its weekday and date.
        (
            datetime(2026, 1, 15, 10, tzinfo=UTC),
            "2026-01-17T02:00",
            "Leaving on Sat 17 Jan at 02:00, at night, traffic is light",
            "Sat 17 Jan 08:00",
            "on Sat 17 Jan at 08:00",
            "2026-01-17T08:00",
            datetime(2026, 1, 17, 6, tzinfo=UTC),
        ),
    ],
)
def test_at_night_the_page_says_why_and_offers_the_morning_rush_hour(
    visit: Visit,
    now: datetime,
    start_time: str,
    advice: str,
    offered: str,
    leaving: str,
    control: str,
    at: datetime,
) -> None:
    page = visit.page
    page.clock.set_fixed_time(now)
    asked: list[dict[str, Any]] = []
    only_the_direct_route(page, asked)
    page.fill("#token", MADE_UP_TOKEN)
    page.fill("#start-time", start_time)
    click_at(page, *START)
    click_at(page, *END)
    page.click("#plan")
    expect(page.locator("#verdict")).to_have_text(
        "The direct route is the cleanest: no route up to 25 % longer has less dose."
    )
    expect(page.locator("#advice-text")).to_contain_text(advice)
    button = page.locator("#try-busy")
    expect(button).to_have_text(f"Plan for {offered} (25 credits)")
    assert ("start_time" in asked[0]) == bool(start_time)

    button.click()
    expect(page.locator("#start-time")).to_have_value(control)
    expect(page.locator("#status")).to_have_text(
        f"Planned: 1 route(s), leaving {leaving}.", timeout=PLAN_WITHIN_MS
    )
    assert len(asked) == 2
    assert datetime.fromisoformat(asked[1]["start_time"]) == at
    # At the rush hour itself there is no busier hour to offer.
    expect(page.locator("#advice-text")).to_have_text(
        "Even at the morning rush hour the air differs too little between the streets of this "
        "trip for a detour to pay."
    )
    expect(button).to_be_hidden()


def test_by_day_only_the_direct_route_says_why_and_offers_the_rush_hour(visit: Visit) -> None:
    page = visit.page
    page.clock.set_fixed_time(datetime(2026, 1, 15, 10, tzinfo=UTC))  # noon in Helsinki
    asked: list[dict[str, Any]] = []
    only_the_direct_route(page, asked)
    page.fill("#token", MADE_UP_TOKEN)
    click_at(page, *START)
    click_at(page, *END)
    page.click("#plan")
    expect(page.locator("#advice-text")).to_have_text(
        "Leaving at 12:00, the air differs too little between the streets of this trip for a "
        "detour to pay; streets differ most at the morning rush hour."
    )
    expect(page.locator("#try-busy")).to_have_text("Plan for tomorrow 08:00 (25 credits)")


def test_the_start_and_end_are_lettered_pins(visit: Visit) -> None:
    page = visit.page
    click_at(page, *START)
    click_at(page, *END)
    for kind, letter in (("start", "A"), ("end", "B")):
        pin = page.locator(f"#marker-layer g.marker.{kind}")
        expect(pin.locator("text")).to_have_text(letter)
        expect(pin.locator("text")).to_be_visible()
        box = pin.locator("text").bounding_box()
        assert box is not None
        assert box["height"] >= 9  # big enough to read
        expect(page.locator(f".points .pin.{kind}")).to_have_text(letter)
    # Nothing round like the radio buttons beside them.
    expect(page.locator("#marker-layer circle")).to_have_count(0)
    # The pin's tip is on the point: the start's drawn where it was clicked. Both read in
    # one turn of the page's script: read apart, a map still settling moved one of them
    # between the reads (2.8 px once).
    tip, at = page.evaluate(
        """([lat, lon]) => {
            const box = document
                .querySelector("#marker-layer g.marker.start path")
                .getBoundingClientRect();
            const at = window.cleanairExplore.screenPoint(lat, lon);
            return [{x: box.x, y: box.y, width: box.width, height: box.height}, at];
        }""",
        START,
    )
    assert abs(tip["x"] + tip["width"] / 2 - at["x"]) <= 2
    assert abs(tip["y"] + tip["height"] - at["y"]) <= 3  # the white outline: 1 px beyond


def test_a_phone_shows_a_two_line_header_and_the_whole_scale_label(
    browser: Browser, running: Running
) -> None:
    visit = open_explorer(browser, running, 390, 844)
    page = visit.page
    try:
        header = page.locator("header").bounding_box()
        title = page.locator("header h1")
        title_box = title.bounding_box()
        assert header is not None
        assert title_box is not None
        font = float(title.evaluate("e => parseFloat(getComputedStyle(e).fontSize)"))
        # The title on one line, and the header two lines high at most.
        assert title_box["height"] < 2 * font
        assert header["height"] <= 64
        expect(page.locator("header a.home")).to_be_in_viewport(ratio=1)
        # The scale's label wholly inside the map and under nothing (the legend was on it).
        expect(page.locator("#scale .label")).to_have_text("500 m")
        label = page.locator("#scale .label").bounding_box()
        legend = page.locator("#map-legend").bounding_box()
        frame = page.locator("#map-frame").bounding_box()
        assert label is not None
        assert legend is not None
        assert frame is not None
        assert frame["x"] <= label["x"]
        assert label["x"] + label["width"] <= frame["x"] + frame["width"]
        assert label["y"] + label["height"] <= frame["y"] + frame["height"]
        apart = (
            label["x"] + label["width"] <= legend["x"]
            or legend["y"] + legend["height"] <= label["y"]
            or label["y"] + label["height"] <= legend["y"]
        )
        assert apart, (label, legend)
    finally:
        page.context.close()
    assert visit.foreign == []
    assert visit.errors == []


def test_at_night_with_a_cleaner_route_the_page_still_says_streets_differ_less(
    visit: Visit,
) -> None:
    page = visit.page
    page.clock.set_fixed_time(datetime(2026, 1, 15, 21, 15, tzinfo=UTC))  # 23:15 in Helsinki
    asked: list[dict[str, Any]] = []
    only_the_direct_route(page, asked, cleaner=True)
    page.fill("#token", MADE_UP_TOKEN)
    click_at(page, *START)
    click_at(page, *END)
    page.click("#plan")
    expect(page.locator("#routes li")).to_have_count(2)
    expect(page.locator("#verdict")).to_be_hidden()
    expect(page.locator("#advice-text")).to_have_text(
        "Leaving at 23:15, at night, traffic is light, so the air differs less from street to "
        "street than by day; streets differ most at the morning rush hour."
    )
    expect(page.locator("#try-busy")).to_have_text("Plan for tomorrow 08:00 (25 credits)")


def test_by_day_with_a_cleaner_route_there_is_no_advice(visit: Visit) -> None:
    page = visit.page
    page.clock.set_fixed_time(datetime(2026, 1, 15, 10, tzinfo=UTC))  # noon in Helsinki
    asked: list[dict[str, Any]] = []
    only_the_direct_route(page, asked, cleaner=True)
    page.fill("#token", MADE_UP_TOKEN)
    click_at(page, *START)
    click_at(page, *END)
    page.click("#plan")
    expect(page.locator("#routes li")).to_have_count(2)
    expect(page.locator("#advice")).to_be_attached()
    expect(page.locator("#advice")).to_be_hidden()
