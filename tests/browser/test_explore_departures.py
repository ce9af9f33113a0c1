"""The explorer's departure chart in a real browser: for the trip picked on the map it asks
`POST /ext/v1/routes/departures`, polls like a plan, and charts each departure's dose with the
best one and the window as good as it marked; errors are explained and leave the page working
(issue 24)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, Page, Response, Route, expect

from support.browser_pages import Visit, guarded_page
from support.servers import Server, pair, running_server, server_env

pytestmark = pytest.mark.browser

PATH = "/ext/v1/routes/departures"
#: Helsinki railway station and the south end of the Esplanadi (as in test_explore_page.py).
START = (60.1699, 24.9384)
END = (60.1645, 24.9525)
#: A few plans on two busy cores; the page polls once a second.
PLANNED_WITHIN_MS = 120_000
SCREENSHOT_DIR = os.environ.get("CLEANAIR_SCREENSHOT_DIR")
HELSINKI = ZoneInfo("Europe/Helsinki")


@dataclass
class Running:
    server: Server
    env: dict[str, str]

    def token(self, user: str) -> str:
        """A token of a new user: a full credit pool, whatever other tests spent."""
        return pair(self.env, self.server.base, user)["Authorization"].removeprefix("Bearer ")


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("departures-server")
    env = server_env(tmp, CLEANAIR_DEFAULT_NETWORK="true", CLEANAIR_PLAN_WORKERS="1")
    with running_server(env, tmp / "server.log") as server:
        yield Running(server, dict(env))


@dataclass
class DeparturesVisit:
    visit: Visit
    #: Every departures poll the page made: when it went out, and the answers' bodies.
    polls: list[float]
    answers: list[dict[str, Any]]


@pytest.fixture
def visit(browser: Browser, running: Running) -> Iterator[DeparturesVisit]:
    context = browser.new_context(
        viewport={"width": 1400, "height": 1000}, timezone_id="Europe/Helsinki"
    )
    # An API error status is logged as a failed load, which the tests cause on purpose.
    visit = guarded_page(context, running.server.base, lambda text: "Failed to load" in text)
    seen = DeparturesVisit(visit, [], [])

    def record_poll(request: Any) -> None:
        if request.method == "GET" and f"{PATH}/" in request.url:
            seen.polls.append(time.monotonic())

    def record_answer(response: Response) -> None:
        if response.request.method == "GET" and f"{PATH}/" in response.url and response.ok:
            seen.answers.append(response.json())

    visit.page.on("request", record_poll)
    visit.page.on("response", record_answer)
    visit.page.goto(f"{running.server.base}/explore")
    expect(visit.page.locator("#map path.road").first).to_be_attached()
    try:
        yield seen
    finally:
        context.close()
    assert visit.foreign == []
    assert visit.errors == []


def click_at(page: Page, lat: float, lon: float) -> None:
    at = page.evaluate("([lat, lon]) => window.cleanairExplore.screenPoint(lat, lon)", [lat, lon])
    page.mouse.click(at["x"], at["y"])


def pick_trip(page: Page, token: str) -> None:
    page.fill("#token", token)
    click_at(page, *START)
    click_at(page, *END)
    expect(page.locator("#end-point")).to_have_text("60.16450, 24.95250")


def clock(iso: str) -> str:
    return datetime.fromisoformat(iso).astimezone(HELSINKI).strftime("%H:%M")


def at_words(iso: str) -> str:
    """As the page says a start time: its day too when that is not today (a window from late
    evening runs past midnight)."""
    at = datetime.fromisoformat(iso).astimezone(HELSINKI)
    days = (at.date() - datetime.now(HELSINKI).date()).days
    return f"at {at:%H:%M}" if days == 0 else f"tomorrow at {at:%H:%M}"


def test_the_chart_shows_every_departures_dose_and_marks_the_best(
    visit: DeparturesVisit, running: Running, tmp_path: Path
) -> None:
    page = visit.visit.page
    # Nothing asked yet: no empty chart box, no legend of nothing.
    expect(page.locator("#departures-chart")).to_be_hidden()
    expect(page.locator("#departures-legend")).to_be_hidden()
    pick_trip(page, running.token("chart"))
    page.select_option("#departures-hours", "3")
    page.select_option("#departures-step", "60")
    with page.expect_request(lambda r: r.url.endswith(PATH) and r.method == "POST") as sent:
        page.click("#departures")
    asked = json.loads(sent.value.post_data or "{}")
    assert asked["activity_type"] == "walking"
    assert asked["step_minutes"] == 60
    span = datetime.fromisoformat(asked["latest"]) - datetime.fromisoformat(asked["earliest"])
    assert span.total_seconds() == 3 * 3600

    expect(page.locator("#departures-status")).to_have_text(
        "Planned 4 departures.", timeout=PLANNED_WITHIN_MS
    )
    result = visit.answers[-1]["result"]
    departures, best = result["departures"], result["best"]
    bars = page.locator("#departures-chart rect.departure")
    expect(bars).to_have_count(sum(d["dose"] is not None for d in departures))
    # The best bar is the service's best departure, and the tallest bar its largest dose.
    marked = page.locator("#departures-chart rect.departure.best")
    expect(marked).to_have_count(1)
    assert marked.get_attribute("data-start") == best["start_time"]
    heights = {
        bars.nth(i).get_attribute("data-start"): float(bars.nth(i).get_attribute("height") or 0)
        for i in range(bars.count())
    }
    doses = {d["start_time"]: d["dose"] for d in departures}
    assert max(heights, key=heights.__getitem__) == max(doses, key=doses.__getitem__)
    assert min(heights, key=heights.__getitem__) == best["start_time"]
    expect(page.locator("#departures-chart rect.best-window")).to_have_count(1)
    expect(page.locator("#departures-chart line.baseline")).to_have_count(1)
    expect(page.locator("#departures-chart")).to_be_visible()
    expect(page.locator("#departures-legend")).to_be_visible()
    expect(page.locator("#departures-best")).to_contain_text(
        f"Best: leave {at_words(best['start_time'])}"
    )
    expect(page.locator("#departures-best")).to_contain_text("As good (within 3 %)")
    expect(page.locator("#departures-error")).to_be_hidden()
    expect(page.locator("#departures")).to_be_enabled()
    expect(page.locator("#credits")).to_have_text("Credits left: 975 this month, 75 today.")
    # Within the polling limit plans share: at most one poll a second.
    assert all(b - a >= 1.0 for a, b in zip(visit.polls, visit.polls[1:], strict=False))
    shot = Path(SCREENSHOT_DIR) if SCREENSHOT_DIR else tmp_path
    page.locator("#when").screenshot(path=str(shot / "explore-departures.png"))


def test_a_trip_must_be_picked_first(visit: DeparturesVisit, running: Running) -> None:
    page = visit.visit.page
    page.click("#departures")
    expect(page.locator("#departures-error")).to_have_text("Paste a token first.")
    page.fill("#token", running.token("nopoints"))
    page.click("#departures")
    expect(page.locator("#departures-error")).to_have_text("Pick a start and an end on the map.")


@pytest.mark.parametrize(
    ("status", "detail", "shown"),
    [
        (400, "Start and end are over 15 km apart", "Refused (400): Start and end are over 15"),
        (403, "Premium required", "This token may not do that (403): Premium required."),
        (429, "Daily credits exhausted", "no credits left (429): Daily credits exhausted. Try"),
    ],
)
def test_a_refused_submission_is_explained(
    visit: DeparturesVisit, running: Running, status: int, detail: str, shown: str
) -> None:
    """Answers hard to bring about from a browser are made up in it; the words are tested."""
    page = visit.visit.page
    page.route(
        f"**{PATH}",
        lambda route: route.fulfill(
            status=status,
            headers={"Retry-After": "60"},
            content_type="application/json",
            body=json.dumps({"detail": detail}),
        ),
    )
    pick_trip(page, running.token(f"refused{status}"))
    page.click("#departures")
    expect(page.locator("#departures-error")).to_contain_text(shown)
    expect(page.locator("#departures")).to_be_enabled()


def test_a_failed_plan_and_a_rate_limited_poll_are_explained(
    visit: DeparturesVisit, running: Running
) -> None:
    """The first poll is told to wait 3 s; the next says the plan failed."""
    page = visit.visit.page
    answered: list[int] = []

    def made_up(route: Route) -> None:
        answered.append(len(answered))
        if len(answered) == 1:
            route.fulfill(
                status=429,
                headers={"Retry-After": "3"},
                content_type="application/json",
                body=json.dumps({"detail": "Rate limit exceeded"}),
            )
        else:
            body = {"status": "failed", "result": None, "error": "No street network covers it"}
            route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page.route(f"**{PATH}/*", made_up)
    pick_trip(page, running.token("failing"))
    page.click("#departures")
    expect(page.locator("#departures-status")).to_have_text("Polling too fast: waiting in 3 s.")
    expect(page.locator("#departures-error")).to_have_text(
        "The departures could not be planned: No street network covers it."
    )
    assert visit.polls[1] - visit.polls[0] >= 2.95
    expect(page.locator("#departures")).to_be_enabled()


def test_start_times_not_today_say_their_day_in_the_words_and_on_the_chart(
    visit: DeparturesVisit, running: Running
) -> None:
    """At 23:30 in Helsinki, a window of departures running past midnight to the day after
    (answered in the browser): "02:27 ... 02:27" never leaves the day to guess."""
    page = visit.visit.page
    page.clock.set_fixed_time(datetime(2026, 1, 15, 21, 30, tzinfo=UTC))  # 23:30 in Helsinki
    request_id = "5f0c1c7e-8d9b-4b9e-a3a2-0d1f2e3c4b5a"
    # Every hour of the longest window, 24 hours from 23:30: the least dose tomorrow 01:30.
    first = datetime(2026, 1, 15, 21, 30, tzinfo=UTC)
    doses = [0.4, 0.3, 0.1] + [0.35] * 22
    departures = [
        {
            "start_time": (first + timedelta(hours=i)).isoformat(),
            "dose": dose,
            "clean_air_score": 70.0,
            "distance": 1020.0,
        }
        for i, dose in enumerate(doses)
    ]
    result = {
        "departures": departures,
        "best": departures[2],
        "baseline_dose": 0.4,
        "dose_saved_pct": 75.0,
    }
    page.route(
        f"**{PATH}",
        lambda route: route.fulfill(
            status=202, content_type="application/json", body=json.dumps({"request_id": request_id})
        ),
    )
    page.route(
        f"**{PATH}/{request_id}",
        lambda route: route.fulfill(
            status=200,
            content_type="application/json",
            body=json.dumps({"status": "completed", "result": result}),
        ),
    )
    pick_trip(page, "ca_tst_" + "A" * 43)
    page.click("#departures")
    expect(page.locator("#departures-best")).to_have_text(
        "Best: leave tomorrow at 01:30: 75 % less inhaled than leaving now by the direct route. "
        "As good (within 3 %): leaving tomorrow at 01:30."
    )
    # Under the times, each day where it starts: today's first, then tomorrow's.
    expect(page.locator("#departures-chart text.day")).to_have_text(["today", "tomorrow"])
    labels = page.locator("#departures-chart text:not(.day):not(.title)")
    expect(labels.last).to_have_text("23:30")  # tomorrow's, under the day's word
    title = page.locator("#departures-chart rect.departure").nth(2).locator("title")
    expect(title).to_contain_text("tomorrow 01:30: dose 0.100")
