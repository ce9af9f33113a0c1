"""The explorer's "Alert me" panel and alert feed in a real browser (issue 32), against a real
`cleanair serve` with the shipped Helsinki network: a place alert is created from the point on
the map and listed, its webhook secret shown once (copied, and gone on reload), deleted; a trip
alert takes the route, the Leaving time and the days; a 422's errors are shown next to their
fields; 401, 403 and 429 are told in words and nothing the service sends is parsed as HTML;
the feed polls every 30 s (a fake clock in the page) while the page is visible, keeps its
cursor and shows an event the test records in the server's own database, newest first; and
the panel fits a 390-pixel phone.

`make test-browser` runs these (`make test` leaves them out: they need Chromium).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, Route, expect

from cleanair_core.alerts.events import AlertEvent, EventKind
from cleanair_core.alerts.messages import event_message
from cleanair_core.alerts.outbox import NewEvent
from cleanair_storage.sqlite.store import SqliteStore
from support.browser_pages import Visit, guarded_page
from support.servers import Server, pair, running_server, server_env

pytestmark = pytest.mark.browser

SUBSCRIPTIONS = "/ext/v1/alerts/subscriptions"
EVENTS = "/ext/v1/alerts/events"
#: Helsinki railway station and the south end of the Esplanadi (as in test_explore_page.py),
#: and Kaivopuisto's edge, a point to forecast.
START = (60.1699, 24.9384)
END = (60.1645, 24.9525)
PLACE = (60.1660, 24.9450)
HOSTILE = '<img src=x onerror="window.pwned=1">'
#: A folder to keep the screenshots in for a person to look at (else they go to tmp_path).
SCREENSHOT_DIR = os.environ.get("CLEANAIR_SCREENSHOT_DIR")


#: Wraps the page's fetch to list the query of every feed poll as it is sent.
COUNT_FEED_POLLS = """
(() => {
  const send = window.fetch.bind(window);
  window.feedPolls = [];
  window.fetch = (input, init) => {
    const url = String(input);
    if (url.includes("/ext/v1/alerts/events?")) window.feedPolls.push(url.split("?")[1]);
    return send(input, init);
  };
})();
"""


@dataclass
class Running:
    server: Server
    env: dict[str, str]
    database: Path

    def token(self, user: str) -> str:
        """A token of a new (premium) user: no subscriptions, an empty feed."""
        return pair(self.env, self.server.base, user)["Authorization"].removeprefix("Bearer ")

    def subscriptions(self, token: str) -> list[dict[str, Any]]:
        listed = httpx.get(
            f"{self.server.base}{SUBSCRIPTIONS}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert listed.status_code == 200, listed.text
        found: list[dict[str, Any]] = listed.json()["subscriptions"]
        return found

    def record_event(self, user: str, subscription_id: str, category: int) -> str:
        """An observed alert for the subscription, recorded in the server's database as an
        evaluation would; its message."""
        store = SqliteStore(self.database)
        try:
            subscription = store.get_subscription(uuid.UUID(subscription_id), user)
            assert subscription is not None
            now = datetime.now(UTC)
            event = AlertEvent(
                id=uuid.uuid4(),
                kind=EventKind.ALERT,
                subscription_id=subscription.id,
                category=category,
                decided_at=now,
                due_at=now,
                hour=now.replace(minute=0, second=0, microsecond=0),
                episode=1,
            )
            payload = event_message(subscription, event)
            store.record_alert_events(
                [
                    NewEvent(
                        event_id=event.id,
                        owner=user,
                        subscription_id=subscription.id,
                        payload=payload,
                        created_at=now,
                    )
                ]
            )
        finally:
            store.close()
        message: str = json.loads(payload)["data"]["message"]
        return message

    def record_plain_events(self, user: str, subscription_id: str, messages: list[str]) -> None:
        """Events with these messages (and advice), made up rather than evaluated."""
        store = SqliteStore(self.database)
        try:
            now = datetime.now(UTC)
            store.record_alert_events(
                [
                    NewEvent(
                        event_id=uuid.uuid4(),
                        owner=user,
                        subscription_id=uuid.UUID(subscription_id),
                        payload=json.dumps(
                            {
                                "type": "air.alert",
                                "timestamp": now.isoformat(),
                                "data": {"message": m, "advice": m, "category_name": m},
                            }
                        ),
                        created_at=now,
                    )
                    for m in messages
                ]
            )
        finally:
            store.close()


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("alerts-server")
    # Every test's fresh browser asks for the map's tiles again, all from one address.
    env = server_env(
        tmp, CLEANAIR_DEFAULT_NETWORK="true", CLEANAIR_EXPLORE_REQUESTS_PER_MINUTE="100000"
    )
    with running_server(env, tmp / "server.log") as server:
        yield Running(server, dict(env), Path(env["CLEANAIR_DATABASE"]))


def open_explorer(
    browser: Browser, running: Running, width: int = 1400, height: int = 1000
) -> Visit:
    context = browser.new_context(
        viewport={"width": width, "height": height}, timezone_id="Europe/Helsinki"
    )
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    # A refused call is logged as a failed load, which the tests cause on purpose.
    visit = guarded_page(context, running.server.base, lambda text: "Failed to load" in text)
    return visit


def load(visit: Visit, running: Running) -> None:
    visit.page.goto(f"{running.server.base}/explore")
    expect(visit.page.locator("#map path.road").first).to_be_attached()


@pytest.fixture
def visit(browser: Browser, running: Running) -> Iterator[Visit]:
    visit = open_explorer(browser, running)
    load(visit, running)
    try:
        yield visit
    finally:
        visit.page.context.close()
    assert visit.foreign == []
    assert visit.errors == []


def click_at(page: Page, lat: float, lon: float) -> None:
    at = page.evaluate("([lat, lon]) => window.cleanairExplore.screenPoint(lat, lon)", [lat, lon])
    page.mouse.click(at["x"], at["y"])


def pick_place(page: Page) -> None:
    page.check('input[name="pick"][value="forecast"]')
    page.locator("#map").scroll_into_view_if_needed()
    click_at(page, *PLACE)
    expect(page.locator("#alert-about")).to_have_text("At 60.16600, 24.94500.")


def sent_body(page: Page, action: Any) -> dict[str, Any]:
    with page.expect_request(
        lambda r: r.url.endswith(SUBSCRIPTIONS) and r.method == "POST"
    ) as sent:
        action()
    body: dict[str, Any] = json.loads(sent.value.post_data or "{}")
    return body


def create_answered(page: Page) -> int:
    """Click Create; the status the subscription's POST was answered with."""
    with page.expect_response(
        lambda r: r.url.endswith(SUBSCRIPTIONS) and r.request.method == "POST"
    ) as answered:
        page.click("#alert-create")
    return answered.value.status


def test_a_place_alert_is_created_listed_its_secret_shown_once_and_deleted(
    visit: Visit, running: Running, tmp_path: Path
) -> None:
    page = visit.page
    token = running.token("placealerts")
    page.fill("#token", token)
    expect(page.locator("#alert-list-status")).to_have_text("None yet.")
    pick_place(page)
    # The browser's zone by default; the index's own category names.
    expect(page.locator("#alert-timezone")).to_have_value("Europe/Helsinki")
    page.select_option("#alert-index", "eu_eaqi_2024")
    options = page.locator("#alert-threshold option")
    expect(options).to_have_text(
        ["Good", "Fair", "Moderate", "Poor", "Very poor", "Extremely poor"]
    )
    page.select_option("#alert-threshold", label="Poor")
    page.select_option("#alert-audience", "sensitive")
    page.check("#alert-quiet")
    page.fill("#alert-quiet-start", "22:30")
    page.fill("#alert-quiet-end", "06:45")
    page.fill("#alert-webhook", "https://hooks.example.com/cleanair?token=receiver-token")
    body = sent_body(page, lambda: page.click("#alert-create"))
    assert body == {
        "target": {
            "type": "place",
            "lat": pytest.approx(PLACE[0], abs=1e-4),
            "lon": pytest.approx(PLACE[1], abs=1e-4),
        },
        "index": "eu_eaqi_2024",
        "threshold": 3,
        "direction": "worse",
        "audience": "sensitive",
        "kind": {"type": "observed"},
        "timezone": "Europe/Helsinki",
        "quiet_hours": {"start": "22:30", "end": "06:45"},
        "webhook_url": "https://hooks.example.com/cleanair?token=receiver-token",
    }
    # The secret once, with a plain warning, and a button copying it.
    expect(page.locator("#alert-status")).to_have_text("Alert created: it is listed below.")
    expect(page.locator("#alert-secret-box")).to_be_visible()
    secret = page.locator("#alert-secret").inner_text()
    assert secret.startswith("whsec_")
    expect(page.locator("#alert-secret-box .warning")).to_contain_text(
        "Shown only now: copy it to your receiver."
    )
    page.click("#alert-copy")
    expect(page.locator("#alert-copy-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == secret

    # Listed as the service holds it, the webhook by its host only.
    [held] = running.subscriptions(token)
    items = page.locator("#alert-list li")
    expect(items).to_have_count(1)
    item = items.first
    assert item.get_attribute("data-id") == held["id"]
    expect(item.locator(".alert-what")).to_have_text("Place 60.16600, 24.94500")
    expect(item.locator(".alert-rule")).to_have_text(
        "EAQI at or worse than Poor; as it happens, then an all-clear; advice for sensitive "
        "groups; times in Europe/Helsinki; quiet 22:30\u201306:45; webhook to hooks.example.com."
    )
    expect(item.locator(".alert-state")).to_have_text("Active.")
    expect(page.locator("#alert-list-status")).to_have_text("1 of at most 20.")
    shots = Path(SCREENSHOT_DIR) if SCREENSHOT_DIR else tmp_path
    page.locator("#alerts").screenshot(path=str(shots / "explore-alerts.png"))

    # Not stored anywhere the page keeps things, and not shown again after a reload.
    stored = page.evaluate(
        "JSON.stringify([Object.entries(sessionStorage), Object.entries(localStorage)])"
    )
    assert secret not in stored
    page.reload()
    expect(page.locator("#alert-list li")).to_have_count(1)
    expect(page.locator("#alert-secret-box")).to_be_hidden()
    assert secret not in page.content()

    page.click("#alert-list li .alert-delete")
    expect(page.locator("#alert-status")).to_have_text("Alert deleted.")
    expect(page.locator("#alert-list li")).to_have_count(0)
    expect(page.locator("#alert-list-status")).to_have_text("None yet.")
    assert running.subscriptions(token) == []


def test_a_trip_alert_takes_the_route_the_leaving_time_and_the_days(
    visit: Visit, running: Running
) -> None:
    page = visit.page
    token = running.token("tripalerts")
    page.fill("#token", token)
    page.check('input[name="alert-target"][value="trip"]')
    expect(page.locator("#alert-days")).to_be_visible()
    page.click("#alert-create")
    expect(page.locator("#alert-error-target")).to_have_text(
        "Pick a start and an end on the map first."
    )
    click_at(page, *START)
    click_at(page, *END)
    page.select_option("#activity", "cycling")
    page.click("#alert-create")
    expect(page.locator("#alert-error-target")).to_have_text(
        "Set the trip's usual time in Leaving, above: a trip alert is about it."
    )
    page.fill("#start-time", "2026-12-01T07:45")
    expect(page.locator("#alert-about")).to_have_text(
        "The cycling trip from A to B, leaving at 07:45 (Leaving, above)."
    )
    page.uncheck('#alert-days input[value="5"]')
    page.check('#alert-days input[value="6"]')
    page.select_option("#alert-kind", "forecast")
    expect(page.locator("#alert-send-at")).to_be_visible()
    page.select_option("#alert-target-day", "tomorrow")
    page.fill("#alert-send-at", "20:15")
    page.select_option("#alert-threshold", "2")
    body = sent_body(page, lambda: page.click("#alert-create"))
    target = body["target"]
    assert target["type"] == "trip"
    assert target["start"] == {
        "latitude": pytest.approx(START[0], abs=1e-4),
        "longitude": pytest.approx(START[1], abs=1e-4),
    }
    assert target["end"]["latitude"] == pytest.approx(END[0], abs=1e-4)
    assert (target["activity_type"], target["departure"], target["days"]) == (
        "cycling",
        "07:45",
        [1, 2, 3, 4, 6],
    )
    assert body["index"] is None
    assert body["kind"] == {"type": "forecast", "target_day": "tomorrow", "send_at": "20:15"}
    assert body["webhook_url"] is None
    expect(page.locator("#alert-error-target")).to_be_hidden()
    expect(page.locator("#alert-status")).to_have_text("Alert created: it is listed below.")
    # No webhook, no secret.
    expect(page.locator("#alert-secret-box")).to_be_hidden()
    item = page.locator("#alert-list li")
    expect(item).to_have_count(1)
    expect(item.locator(".alert-what")).to_have_text(
        "Trip 60.16990, 24.93840 → 60.16450, 24.95250, cycling at 07:45, Mon, Tue, Wed, Thu, Sat"
    )
    expect(item.locator(".alert-rule")).to_contain_text(
        "the place's own index at or worse than Moderate (EAQI), Unhealthy for Sensitive "
        "Groups (US AQI), High (DAQI); the forecast for tomorrow, sent at 20:15"
    )
    expect(item.locator(".alert-rule")).to_contain_text("feed only.")
    [held] = running.subscriptions(token)
    assert held["target"]["days"] == [1, 2, 3, 4, 6]


def test_a_422_is_shown_next_to_the_fields_it_names_without_the_values(
    visit: Visit, running: Running
) -> None:
    page = visit.page
    token = running.token("refusedalerts")
    page.fill("#token", token)
    page.click("#alert-create")
    expect(page.locator("#alert-error-target")).to_have_text(
        "Pick a forecast point (or a start) on the map first."
    )
    pick_place(page)
    page.fill("#alert-timezone", "Mars/Olympus_Mons")
    page.fill("#alert-webhook", "http://hooks.example.com/x?token=hunter2")
    assert create_answered(page) == 422
    expect(page.locator("#alert-error-timezone")).to_have_text(
        "The time zone must be an IANA timezone name, e.g. Europe/Paris."
    )
    expect(page.locator("#alert-error-webhook_url")).to_have_text("The webhook URL must use https.")
    expect(page.locator("#alert-error")).to_have_text(
        "The alert was not created (422). Fix the fields marked."
    )
    # Next to their fields: each error right under its control.
    for field, error in [
        ("#alert-timezone", "#alert-error-timezone"),
        ("#alert-webhook", "#alert-error-webhook_url"),
    ]:
        control = page.locator(field).bounding_box()
        shown = page.locator(error).bounding_box()
        assert control is not None
        assert shown is not None
        assert 0 <= shown["y"] - (control["y"] + control["height"]) <= 12
    for other in ("target", "threshold", "index", "quiet_hours", "send_at"):
        expect(page.locator(f"#alert-error-{other}")).to_be_hidden()
    assert "hunter2" not in page.locator("#alerts").inner_text()
    expect(page.locator("#alert-list li")).to_have_count(0)

    # Put right, it is created and the marks go.
    page.fill("#alert-timezone", "Europe/Helsinki")
    page.fill("#alert-webhook", "")
    page.click("#alert-create")
    expect(page.locator("#alert-list li")).to_have_count(1)
    expect(page.locator("#alert-error-timezone")).to_be_hidden()
    expect(page.locator("#alert-error-webhook_url")).to_be_hidden()
    expect(page.locator("#alert-error")).to_be_hidden()


@pytest.mark.parametrize(
    ("status", "shown"),
    [
        (401, f"The token was not accepted (401): {HOSTILE}. Pair again or paste a valid token."),
        (403, f"This token may not manage alerts (403): {HOSTILE}. Alerts need a connection"),
        (429, f"Too many requests (429): {HOSTILE}. Try again in 42 s."),
    ],
)
def test_refusals_are_told_in_words_and_nothing_sent_is_markup(
    visit: Visit, running: Running, status: int, shown: str
) -> None:
    """Answers hard to bring about from a browser are made up in it; the words are tested,
    and the service's `detail` (here markup) is shown as text."""
    page = visit.page

    def refuse(route: Route) -> None:
        route.fulfill(
            status=status,
            headers={"Retry-After": "42"},
            content_type="application/json",
            body=json.dumps({"detail": HOSTILE}),
        )

    page.route(f"**{SUBSCRIPTIONS}", refuse)
    page.route(f"**{EVENTS}*", refuse)
    page.fill("#token", "ca_tst_" + "A" * 43)
    expect(page.locator("#alert-error")).to_contain_text(shown)
    if status == 429:
        expect(page.locator("#feed-status")).to_have_text(
            "Polling too fast: the next check in 42 s."
        )
    else:
        expect(page.locator("#feed-error")).to_contain_text(shown)
    pick_place(page)
    page.click("#alert-create")
    expect(page.locator("#alert-error")).to_contain_text(shown)
    expect(page.locator("#alerts img, #alert-feed-panel img")).to_have_count(0)
    assert page.evaluate("window.pwned") is None


def test_the_feed_polls_every_30_s_while_visible_keeps_its_cursor_and_shows_events(
    browser: Browser, running: Running, tmp_path: Path
) -> None:
    user = "feedreader"
    token = running.token(user)
    created = httpx.post(
        f"{running.server.base}{SUBSCRIPTIONS}",
        headers={"Authorization": f"Bearer {token}"},
        json={
            "target": {"type": "place", "lat": PLACE[0], "lon": PLACE[1]},
            "index": "eu_eaqi_2024",
            "threshold": 3,
            "kind": {"type": "observed"},
            "timezone": "Europe/Helsinki",
        },
        timeout=10,
    )
    assert created.status_code == 201, created.text
    subscription_id = created.json()["subscription"]["id"]
    visit = open_explorer(browser, running)
    page = visit.page
    # Counted in the page as each poll is sent, in the timer that sends it: a count read
    # right after the clock moved is exact (a request event reaches the test later).
    page.add_init_script(COUNT_FEED_POLLS)

    def asked() -> list[str]:
        sent: list[str] = page.evaluate("window.feedPolls")
        return sent

    try:
        page.clock.install()
        load(visit, running)
        # From here the page's time moves only as the test says.
        page.clock.pause_at(datetime.now(UTC) + timedelta(seconds=5))
        expect(page.locator("#feed-status")).to_have_text(
            "Pair or paste a token to see your alerts' events."
        )
        assert asked() == []
        page.fill("#token", token)
        page.clock.run_for(400)  # the token field rests
        expect(page.locator("#feed-status")).to_contain_text(
            "No alerts yet: events appear here as they are decided"
        )
        assert asked() == ["after=0&limit=100"]

        message = running.record_event(user, subscription_id, category=4)
        page.clock.run_for(29_000)
        assert len(asked()) == 1  # not before 30 s
        page.clock.run_for(1_500)
        expect(page.locator("#feed li")).to_have_count(1)
        assert asked() == ["after=0&limit=100"] * 2
        first = page.locator("#feed li").first
        expect(first.locator(".feed-type")).to_have_text("Alert")
        expect(first.locator(".feed-category")).to_have_text("Very poor")
        expect(first.locator(".feed-message")).to_have_text(message)
        assert "Very poor" in message
        expect(first.locator(".feed-advice")).to_contain_text("Advice: ")
        expect(page.locator("#feed-status")).to_contain_text("1 event, newest first; checked at")

        # Hidden, the page asks nothing; visible again after the wait, it asks at once.
        page.evaluate(
            "() => { Object.defineProperty(document, 'hidden', {value: true, configurable: true});"
            " document.dispatchEvent(new Event('visibilitychange')); }"
        )
        # Words that are markup: the page must show them as text.
        running.record_plain_events(user, subscription_id, [HOSTILE])
        page.clock.run_for(120_000)
        assert len(asked()) == 2
        page.evaluate(
            "() => { Object.defineProperty(document, 'hidden', {value: false, configurable: true});"
            " document.dispatchEvent(new Event('visibilitychange')); }"
        )
        page.clock.run_for(100)
        expect(page.locator("#feed li")).to_have_count(2)
        # From the cursor kept: only what came after the first event.
        assert asked()[2:] == ["after=1&limit=100"]
        newest = page.locator("#feed li").first
        assert newest.get_attribute("data-cursor") == "2"
        expect(newest.locator(".feed-message")).to_have_text(HOSTILE)
        expect(newest.locator(".feed-advice")).to_have_text(f"Advice: {HOSTILE}")
        expect(page.locator("#feed img")).to_have_count(0)
        assert page.evaluate("window.pwned") is None
        expect(page.locator("#feed li").nth(1).locator(".feed-message")).to_have_text(message)

        # A backlog past a page: read on at once (as plan polls go), then the usual wait.
        running.record_plain_events(user, subscription_id, [f"n{n}" for n in range(150)])
        page.clock.run_for(30_000)
        expect(page.locator("#feed li")).to_have_count(102)
        assert asked()[3:] == ["after=2&limit=100"]
        page.clock.run_for(1_100)
        expect(page.locator("#feed li")).to_have_count(152)
        assert asked()[3:] == ["after=2&limit=100", "after=102&limit=100"]
        expect(page.locator("#feed li").first.locator(".feed-message")).to_have_text("n149")
        page.clock.run_for(29_000)
        assert len(asked()) == 5
        shots = Path(SCREENSHOT_DIR) if SCREENSHOT_DIR else tmp_path
        page.locator("#alert-feed-panel").screenshot(path=str(shots / "explore-alert-feed.png"))
    finally:
        page.context.close()
    assert visit.foreign == []
    assert visit.errors == []


@pytest.fixture
def paused(browser: Browser, running: Running) -> Iterator[Visit]:
    """The explorer whose timers move only as the test says (`page.clock.run_for`)."""
    visit = open_explorer(browser, running)
    try:
        visit.page.clock.install()
        load(visit, running)
        visit.page.clock.pause_at(datetime.now(UTC) + timedelta(seconds=5))
        yield visit
    finally:
        visit.page.context.close()
    assert visit.foreign == []
    assert visit.errors == []


def test_a_secret_made_while_the_token_settles_stays_and_another_token_hides_it(
    paused: Visit, running: Running
) -> None:
    page = paused.page
    # The creation's answer comes before the token field's rest (300 ms), as on a quick
    # machine.
    page.fill("#token", running.token("settling"))
    pick_place(page)
    page.fill("#alert-webhook", "https://hooks.example.com/cleanair")
    page.click("#alert-create")
    expect(page.locator("#alert-secret-box")).to_be_visible()
    page.clock.run_for(1_000)  # the token's change settles after the creation
    expect(page.locator("#alert-secret-box")).to_be_visible()
    expect(page.locator("#alert-secret")).to_contain_text("whsec_")
    page.fill("#token", running.token("someone-else"))
    page.clock.run_for(1_000)
    expect(page.locator("#alert-secret-box")).to_be_hidden()
    expect(page.locator("#alert-secret")).to_have_text("")


def test_a_422_answered_before_the_token_rests_stays_shown(paused: Visit, running: Running) -> None:
    page = paused.page
    # The 422 comes back before the token field's rest (300 ms) ends, as on a busy machine
    # where that timer fires late.
    page.fill("#token", running.token("restless"))
    pick_place(page)
    page.fill("#alert-timezone", "Mars/Olympus_Mons")
    assert create_answered(page) == 422
    said = "The alert was not created (422). Fix the fields marked."
    expect(page.locator("#alert-error")).to_have_text(said)
    page.clock.run_for(1_000)  # past the rest: it must not wipe the answer
    expect(page.locator("#alert-error")).to_have_text(said)
    expect(page.locator("#alert-error-timezone")).to_have_text(
        "The time zone must be an IANA timezone name, e.g. Europe/Paris."
    )
    # The token still took effect: its (empty) list was asked for.
    expect(page.locator("#alert-list-status")).to_have_text("None yet.")


def test_the_panel_fits_a_phone(browser: Browser, running: Running, tmp_path: Path) -> None:
    visit = open_explorer(browser, running, 390, 844)
    page = visit.page
    try:
        load(visit, running)
        page.fill("#token", running.token("phonealerts"))
        pick_place(page)
        page.fill("#alert-webhook", "https://hooks.example.com/cleanair")
        page.click("#alert-create")
        expect(page.locator("#alert-secret-box")).to_be_visible()
        expect(page.locator("#alert-list li")).to_have_count(1)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        for selector in (
            "#alert-index",
            "#alert-threshold",
            "#alert-webhook",
            "#alert-timezone",
            "#alert-create",
            "#alert-secret",
            "#alert-copy",
            "#alert-list li",
            "#alert-list .alert-delete",
            "#feed-status",
        ):
            box = page.locator(selector).first.bounding_box()
            assert box is not None, selector
            assert box["x"] >= 0, selector
            assert box["x"] + box["width"] <= 390, selector
        # One column: each label over its control.
        label = page.locator('label[for="alert-webhook"]').bounding_box()
        field = page.locator("#alert-webhook").bounding_box()
        assert label is not None
        assert field is not None
        assert label["y"] + label["height"] <= field["y"]
        shots = Path(SCREENSHOT_DIR) if SCREENSHOT_DIR else tmp_path
        page.locator("#alert-secret-box").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "explore-alerts-phone.png"))
    finally:
        page.context.close()
    assert visit.foreign == []
    assert visit.errors == []
