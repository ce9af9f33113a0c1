"""The OpenAQ v3 source and its poller, against a stand-in speaking OpenAQ v3's documented
JSON (https://docs.openaq.org: `GET /v3/locations?bbox=...&limit&page` and
`GET /v3/locations/{id}/latest`), over `httpx.MockTransport`; time never passes on its own."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx
import pytest

from cleanair_core.air.observations import Observation, ObservationsWritten, Station
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.screening import HeldBack, HeldBackCounts
from cleanair_core.clock import ManualClock
from cleanair_core.errors import StoreUnavailable
from cleanair_core.geo import Point
from cleanair_core.metrics import NoMetrics, Upstream
from cleanair_core.offload import inline
from cleanair_sources.openaq import (
    OpenAQClient,
    OpenAQPoller,
    PollResult,
    _reset_seconds,
    _unit_factor,
)
from cleanair_storage.memory import MemoryStore

T = TypeVar("T")
KEY = "openaq-key-7f3a9c-do-not-log"
BASE = "https://openaq.example/v3"
NOW = datetime(2026, 5, 20, 10, 20, tzinfo=UTC)
HOUR = "2026-05-20T10:00:00Z"
BOX = (60.10, 24.85, 60.25, 25.10)  # south, west, north, east


def sensor(sensor_id: int, name: str, units: str) -> dict[str, Any]:
    return {
        "id": sensor_id,
        "name": f"{name} {units}",
        "parameter": {"id": sensor_id % 100, "name": name, "units": units, "displayName": name},
    }


def location(
    location_id: int, sensors: list[dict[str, Any]], last: str | None = HOUR
) -> dict[str, Any]:
    found: dict[str, Any] = {
        "id": location_id,
        "name": f"Station {location_id}",
        "locality": "Helsinki",
        "timezone": "Europe/Helsinki",
        "isMobile": False,
        "isMonitor": True,
        "coordinates": {"latitude": 60.16, "longitude": round(24.9 + location_id / 100, 2)},
        "sensors": sensors,
    }
    if last is not None:
        found["datetimeLast"] = {"utc": last, "local": last.replace("Z", "+03:00")}
    return found


def value(sensor_id: int, location_id: int, measured: float, utc: str = HOUR) -> dict[str, Any]:
    return {
        "datetime": {"utc": utc, "local": utc.replace("Z", "+03:00")},
        "value": measured,
        "coordinates": {"latitude": 60.16, "longitude": 24.93},
        "sensorsId": sensor_id,
        "locationsId": location_id,
    }


def page(results: list[Any], number: int = 1, limit: int = 1000) -> dict[str, Any]:
    meta = {"name": "openaq-api", "website": "/", "page": number, "limit": limit, "found": ">2"}
    return {"meta": meta, "results": results}


class StandIn:
    """OpenAQ v3 as documented: `locations` pages and each location's `latest` results.
    `fail` answers every request with a response (or raises) instead, while it is set."""

    def __init__(
        self,
        locations: list[dict[str, Any]],
        latest: dict[int, list[Any]],
        headers: dict[str, str] | None = None,
    ) -> None:
        self.locations = locations
        self.latest = latest
        self.headers = headers or {}
        self.fail: Callable[[httpx.Request], httpx.Response] | None = None
        self.requests: list[httpx.Request] = []
        #: Requests left of the key's limit, told in `x-ratelimit-remaining`, when set.
        self.remaining: int | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.fail is not None:
            return self.fail(request)
        if self.remaining is not None:
            self.remaining -= 1
            self.headers["x-ratelimit-remaining"] = str(self.remaining)
        path = request.url.path.removeprefix("/v3")
        if path == "/locations":
            limit, number = int(request.url.params["limit"]), int(request.url.params["page"])
            chunk = self.locations[(number - 1) * limit : number * limit]
            return httpx.Response(200, json=page(chunk, number, limit), headers=self.headers)
        location_id = int(path.split("/")[2])
        return httpx.Response(
            200, json=page(self.latest.get(location_id, [])), headers=self.headers
        )

    def paths(self) -> list[str]:
        return [request.url.path for request in self.requests]


class Recorded(NoMetrics):
    def __init__(self) -> None:
        self.requests: list[tuple[Upstream, bool]] = []
        self.stored: list[tuple[Upstream, int]] = []
        self.held_back: list[tuple[Upstream, str, int]] = []

    def upstream_request(self, upstream: Upstream, seconds: float, *, failed: bool) -> None:
        self.requests.append((upstream, failed))

    def observations_stored(self, upstream: Upstream, count: int) -> None:
        self.stored.append((upstream, count))

    def observations_held_back(self, upstream: Upstream, reason: str, count: int) -> None:
        self.held_back.append((upstream, reason, count))


class Ticks:
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Offloaded:
    """An offload that runs the work here and counts it: every store write must go through."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, work: Callable[[], T], /) -> T:
        self.calls += 1
        return work()


class Setup:
    def __init__(
        self,
        stand_in: StandIn,
        *,
        store: MemoryStore | None = None,
        page_limit: int = 1000,
        jitter: float = 0.0,
    ) -> None:
        self.stand_in = stand_in
        self.store = store or MemoryStore()
        self.metrics = Recorded()
        self.ticks = Ticks()
        self.clock = ManualClock(NOW)
        self.offload = Offloaded()
        self.client = OpenAQClient(
            httpx.AsyncClient(transport=httpx.MockTransport(stand_in)),
            KEY,
            BASE,
            timeout=2.0,
            metrics=self.metrics,
            monotonic=self.ticks,
            wall=lambda: NOW.timestamp(),
            page_limit=page_limit,
        )
        self.poller = OpenAQPoller(
            self.client,
            self.store,
            [BOX],
            self.offload,
            interval=900,
            backoff=60,
            max_backoff=3600,
            clock=self.clock,
            monotonic=self.ticks,
            jitter=lambda: jitter,
            metrics=self.metrics,
        )

    def poll(self) -> PollResult:
        return asyncio.run(self.poller.poll_once())

    def stored(self) -> list[Observation]:
        return self.store.observations_between(NOW - timedelta(days=1), NOW)


PM25, NO2_PPM, O3_PPB, TEMP = 101, 102, 103, 104


def helsinki() -> StandIn:
    one = location(1, [sensor(PM25, "pm25", "µg/m³"), sensor(NO2_PPM, "no2", "ppm")])
    two = location(2, [sensor(O3_PPB, "o3", "ppb"), sensor(TEMP, "temperature", "c")], last=None)
    latest = {
        1: [value(PM25, 1, 7.5), value(NO2_PPM, 1, 0.0106)],
        2: [value(O3_PPB, 2, 30.0), value(TEMP, 2, 14.2)],
    }
    return StandIn([one, two], latest)


def test_a_poll_stores_the_stations_and_their_hourly_values_in_micrograms() -> None:
    setup = Setup(helsinki())
    result = setup.poll()

    assert result.failure is None
    assert result.next_in == 900
    assert result.stations == 2
    assert result.written == ObservationsWritten(added=3)
    assert setup.store.list_stations() == [
        Station("openaq:1", "Station 1", Point(60.16, 24.91)),
        Station("openaq:2", "Station 2", Point(60.16, 24.92)),
    ]
    hour_end = datetime(2026, 5, 20, 10, tzinfo=UTC)
    values = {(o.station_id, o.pollutant): o.value for o in setup.stored()}
    assert all(o.hour_end == hour_end for o in setup.stored())
    assert values[("openaq:1", Pollutant.PM25)] == 7.5
    # ppm and ppb at 25 °C: µg/m³ = ppb * M / 24.45
    assert values[("openaq:1", Pollutant.NO2)] == pytest.approx(10.6 * 46.0055 / 24.45)
    assert values[("openaq:2", Pollutant.O3)] == pytest.approx(30.0 * 47.9982 / 24.45)
    assert len(values) == 3  # the temperature is not ours
    assert result.skipped.unknown_parameter == 1
    assert setup.offload.calls == 2  # stations, then observations
    assert setup.metrics.stored == [(Upstream.OPENAQ, 3)]
    assert setup.metrics.requests == [(Upstream.OPENAQ, False)] * 3


def test_requests_carry_the_key_header_and_the_documented_query() -> None:
    stand_in = helsinki()
    Setup(stand_in).poll()
    listing, *latest = stand_in.requests
    assert all(request.headers["X-API-Key"] == KEY for request in stand_in.requests)
    assert "key" not in str(listing.url).lower()
    assert listing.url.path == "/v3/locations"
    # bbox is minimum longitude, minimum latitude, maximum longitude, maximum latitude
    assert dict(listing.url.params) == {
        "bbox": "24.85,60.1,25.1,60.25",
        "limit": "1000",
        "page": "1",
    }
    assert [request.url.path for request in latest] == [
        "/v3/locations/1/latest",
        "/v3/locations/2/latest",
    ]
    assert listing.extensions["timeout"]["read"] == 2.0


def test_locations_are_read_page_after_page() -> None:
    locations = [location(i, [sensor(1000 + i, "pm25", "µg/m³")]) for i in range(1, 6)]
    latest = {i: [value(1000 + i, i, float(i))] for i in range(1, 6)}
    stand_in = StandIn(locations, latest)
    setup = Setup(stand_in, page_limit=2)
    result = setup.poll()
    assert result.stations == 5
    pages = [r.url.params["page"] for r in stand_in.requests if r.url.path == "/v3/locations"]
    assert pages == ["1", "2", "3"]  # the third is short: the last
    assert len(setup.stored()) == 5


def test_off_hour_old_future_and_malformed_values_are_skipped_and_counted() -> None:
    sensors = [sensor(PM25, "pm25", "µg/m³"), sensor(NO2_PPM, "no2", "ppb")]
    latest: list[Any] = [
        value(PM25, 1, 5.0, "2026-05-20T09:30:00Z"),  # off the hour
        value(PM25, 1, 5.0, "2026-05-20T06:00:00Z"),  # older than three hours
        value(PM25, 1, 5.0, "2026-05-20T11:00:00Z"),  # not yet ended: held back
        {"datetime": {"utc": HOUR}, "value": "7", "sensorsId": PM25},  # a string
        {"datetime": {"utc": "yesterday"}, "value": 7, "sensorsId": PM25},
        {"datetime": {"utc": HOUR}, "value": 7},  # no sensor
        {"datetime": {"utc": HOUR}, "value": -1.0, "sensorsId": PM25},  # negative
        "not an object",
        value(NO2_PPM, 1, 12.0, "2026-05-20T08:00:00+00:00"),  # kept
    ]
    setup = Setup(StandIn([location(1, sensors)], {1: latest}))
    result = setup.poll()
    assert result.failure is None
    assert result.skipped.off_hour == 1
    assert result.skipped.too_old == 1
    assert result.skipped.malformed == 5
    assert result.held_back == HeldBackCounts(over_bound=0, future=1)
    (kept,) = setup.stored()
    assert kept.pollutant is Pollutant.NO2
    assert kept.hour_end == datetime(2026, 5, 20, 8, tzinfo=UTC)


def test_values_over_their_bound_or_in_the_future_are_held_back_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sensor's 1e300 or a reading dated ahead is neither stored nor fused; the rest of the
    round is stored, and the operator hears the counts (never a value or the key)."""
    caplog.set_level(logging.INFO)
    sensors = [sensor(PM25, "pm25", "µg/m³"), sensor(NO2_PPM, "no2", "ppm")]
    latest: list[Any] = [
        value(PM25, 1, 1e300),  # over PM2.5's bound
        value(NO2_PPM, 1, 5.0),  # 5 ppm: about 9,400 µg/m³, over NO2's bound
        value(PM25, 1, 7.5, "2026-05-20T11:00:00Z"),  # ends 40 minutes from now
        value(NO2_PPM, 1, 0.0106, "2026-05-20T09:00:00Z"),  # kept
    ]
    setup = Setup(StandIn([location(1, sensors)], {1: latest}))
    result = setup.poll()
    assert result.failure is None
    assert result.held_back == HeldBackCounts(over_bound=2, future=1)
    assert result.written == ObservationsWritten(added=1)
    [kept] = setup.store.observations_between(NOW - timedelta(days=1), NOW + timedelta(days=1))
    assert (kept.pollutant, kept.hour_end) == (Pollutant.NO2, datetime(2026, 5, 20, 9, tzinfo=UTC))
    assert setup.metrics.held_back == [
        (Upstream.OPENAQ, HeldBack.OVER_BOUND, 2),
        (Upstream.OPENAQ, HeldBack.FUTURE, 1),
    ]
    [warning] = [r for r in caplog.records if "held back" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert (warning.__dict__["over_bound"], warning.__dict__["future"]) == (2, 1)
    assert warning.__dict__["upstream"] == "openaq"
    assert "1e+300" not in repr(warning.__dict__)
    assert KEY not in repr(warning.__dict__)


def test_a_round_with_nothing_held_back_says_nothing_of_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    setup = Setup(helsinki())
    assert setup.poll().held_back == HeldBackCounts()
    assert setup.metrics.held_back == []
    assert not [r for r in caplog.records if "held back" in r.getMessage()]


def test_unknown_parameters_units_and_malformed_locations_never_fail_the_poll() -> None:
    locations: list[Any] = [
        location(1, [sensor(1, "co", "ppm"), sensor(2, "pm25", "ppm"), sensor(3, "no2", "mg/m3")]),
        {"id": "seven", "coordinates": {}, "sensors": []},
        {"id": 8, "coordinates": {"latitude": 95, "longitude": 0}, "sensors": []},
        location(9, [{"id": 9}, sensor(4, "pm10", "ug/m3")]),
        42,
    ]
    setup = Setup(StandIn(locations, {9: [value(4, 9, 20.0)]}))
    result = setup.poll()
    assert result.failure is None
    assert result.skipped.unknown_parameter == 1
    assert result.skipped.unknown_unit == 2  # PM in ppm; mg/m3
    assert result.skipped.malformed == 4
    assert [s.id for s in setup.store.list_stations()] == ["openaq:9"]
    assert [o.value for o in setup.stored()] == [20.0]


def test_locations_that_stopped_reporting_are_not_asked_for_values() -> None:
    dead = location(3, [sensor(PM25, "pm25", "µg/m³")], last="2025-01-01T00:00:00Z")
    stand_in = StandIn([dead], {3: [value(PM25, 3, 9.0)]})
    Setup(stand_in).poll()
    assert stand_in.paths() == ["/v3/locations"]


def test_the_locations_are_listed_again_only_once_a_day() -> None:
    stand_in = helsinki()
    setup = Setup(stand_in)
    setup.poll()
    setup.ticks.now += 900
    second = setup.poll()
    assert second.stations == 0  # not listed again
    assert stand_in.paths().count("/v3/locations") == 1
    assert second.written == ObservationsWritten(unchanged=3)
    assert setup.metrics.stored[-1] == (Upstream.OPENAQ, 0)
    setup.ticks.now += 86400
    assert setup.poll().stations == 2
    assert stand_in.paths().count("/v3/locations") == 2


def failing(setup: Setup, respond: Callable[[httpx.Request], httpx.Response]) -> PollResult:
    setup.stand_in.fail = respond
    return setup.poll()


def raising(error: Exception) -> Callable[[httpx.Request], httpx.Response]:
    def respond(_: httpx.Request) -> httpx.Response:
        raise error

    return respond


@pytest.mark.parametrize(
    ("respond", "cause"),
    [
        (lambda _: httpx.Response(500, text="oops"), "HTTP 500"),
        (lambda _: httpx.Response(200, content=b"{not json"), "response is not JSON"),
        (lambda _: httpx.Response(200, json=[1, 2]), "unexpected response shape"),
        (lambda _: httpx.Response(200, json={"meta": {}}), "unexpected response shape"),
        (raising(httpx.ReadTimeout("slow")), "timeout"),
        (raising(httpx.ConnectError("refused")), "ConnectError"),
    ],
)
def test_an_outage_is_a_failed_poll_that_backs_off_and_never_raises(
    respond: Callable[[httpx.Request], httpx.Response], cause: str
) -> None:
    setup = Setup(helsinki())
    result = failing(setup, respond)
    assert result.failure == cause
    assert result.next_in == 60
    assert setup.store.list_stations() == []
    assert setup.metrics.requests == [(Upstream.OPENAQ, True)]


def test_backoff_doubles_with_jitter_up_to_its_cap_and_resets_on_success() -> None:
    setup = Setup(helsinki(), jitter=1.0)  # the most jitter: half the wait
    setup.stand_in.fail = lambda _: httpx.Response(503)
    waits = [setup.poll().next_in for _ in range(8)]
    assert waits == [30, 60, 120, 240, 480, 960, 1800, 1800]
    setup.stand_in.fail = None
    assert setup.poll().next_in == 900
    setup.stand_in.fail = lambda _: httpx.Response(503)
    assert setup.poll().next_in == 30


def test_a_location_that_always_fails_does_not_stop_the_others_being_polled() -> None:
    stand_in = helsinki()

    def one_is_gone(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v3/locations/1/latest":
            return httpx.Response(404, json={"detail": "Not found"})
        stand_in.fail = None
        response = stand_in(request)
        stand_in.fail = one_is_gone
        return response

    setup = Setup(stand_in)
    stand_in.fail = one_is_gone
    results = [setup.poll() for _ in range(3)]
    assert results[0].failure == "HTTP 404"
    assert [o.station_id for o in setup.stored()] == ["openaq:2"]  # asked after the failure
    assert stand_in.paths().count("/v3/locations/2/latest") >= 1


def test_a_429_waits_for_the_rate_limit_reset() -> None:
    setup = Setup(helsinki())
    result = failing(
        setup,
        lambda _: httpx.Response(
            429, json={"detail": "Too many requests"}, headers={"x-ratelimit-reset": "240"}
        ),
    )
    assert result.failure == "HTTP 429"
    assert result.next_in == 240  # longer than the first backoff
    assert (
        failing(setup, lambda _: httpx.Response(429, headers={"retry-after": "5"})).next_in == 120
    )


def test_a_spent_limit_pauses_the_round_until_its_reset_and_it_goes_on_from_there(
    caplog: pytest.LogCaptureFixture,
) -> None:
    locations = [location(i, [sensor(1000 + i, "pm25", "µg/m³")]) for i in range(1, 4)]
    stand_in = StandIn(locations, {i: [value(1000 + i, i, float(i))] for i in range(1, 4)})
    stand_in.headers = {"x-ratelimit-reset": "45"}
    setup = Setup(stand_in)

    stand_in.remaining = 2  # the listing and one location
    first = setup.poll()
    assert stand_in.paths() == ["/v3/locations", "/v3/locations/1/latest"]
    assert (first.failure, first.next_in, first.written.added) == (None, 45, 1)
    setup.ticks.now += 45
    stand_in.remaining = 60
    second = setup.poll()
    assert stand_in.paths()[2:] == ["/v3/locations/2/latest", "/v3/locations/3/latest"]
    assert (second.failure, second.next_in, second.written.added) == (None, 900, 2)
    setup.ticks.now += 900
    setup.poll()
    assert stand_in.paths()[4:] == [f"/v3/locations/{i}/latest" for i in range(1, 4)]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # no failure


def test_a_limit_spent_by_the_listing_stores_the_stations_and_waits() -> None:
    stand_in = helsinki()
    stand_in.headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "45"}
    setup = Setup(stand_in)
    result = setup.poll()
    assert stand_in.paths() == ["/v3/locations"]
    assert (result.failure, result.stations, result.next_in) == (None, 2, 45)
    setup.ticks.now += 45
    stand_in.headers = {"x-ratelimit-remaining": "10", "x-ratelimit-reset": "45"}
    assert setup.poll().failure is None
    assert len(setup.stored()) == 3


@pytest.mark.parametrize(("reset", "wait"), [("2000", 2000), ("300", 900)])
def test_a_round_that_spends_the_limit_waits_at_least_until_its_reset(
    reset: str, wait: float
) -> None:
    stand_in = helsinki()
    stand_in.headers = {"x-ratelimit-reset": reset}
    stand_in.remaining = 3  # the listing and both locations: spent by the last answer
    result = Setup(stand_in).poll()
    assert (result.failure, result.written.added) == (None, 3)
    assert result.next_in == wait


def test_the_reset_header_is_seconds_or_a_timestamp() -> None:
    wall = NOW.timestamp()
    assert _reset_seconds("58", wall) == 58
    assert _reset_seconds(str(int(wall) + 30), wall) == 30
    assert _reset_seconds(str(int(wall) - 30), wall) == 0
    assert _reset_seconds("soon", wall) is None
    assert _reset_seconds(None, wall) is None


def test_units_convert_at_25_degrees() -> None:
    assert _unit_factor(Pollutant.PM25, "µg/m³") == 1.0
    assert _unit_factor(Pollutant.PM25, "μg/m³") == 1.0  # the Greek mu
    assert _unit_factor(Pollutant.NO2, "ppb") == pytest.approx(1.8816, abs=1e-4)
    assert _unit_factor(Pollutant.O3, "ppm") == pytest.approx(1963.1, abs=0.1)
    assert _unit_factor(Pollutant.PM10, "ppb") is None
    assert _unit_factor(Pollutant.O3, "particles/cm³") is None


class BrokenStore(MemoryStore):
    def put_observations(self, observations: Iterable[Observation]) -> ObservationsWritten:
        raise StoreUnavailable


def test_a_database_outage_is_a_failed_poll_too() -> None:
    setup = Setup(helsinki(), store=BrokenStore())
    result = setup.poll()
    assert result.failure == "the database is unavailable"
    assert result.next_in == 60


def test_failures_and_recovery_are_logged_once_each_without_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    setup = Setup(helsinki())
    failing(setup, lambda _: httpx.Response(401, json={"detail": f"bad key {KEY}"}))
    failing(setup, raising(httpx.ConnectError(f"cannot reach {BASE}?key={KEY}")))
    setup.stand_in.fail = None
    setup.poll()
    setup.poll()

    ours = [r for r in caplog.records if r.name.startswith("cleanair")]
    warnings = [r for r in ours if r.levelno == logging.WARNING]
    assert [r.__dict__["cause"] for r in warnings] == ["HTTP 401", "ConnectError"]
    assert all(r.__dict__["upstream"] == "openaq" for r in warnings)
    assert all("OpenAQ" in r.getMessage() for r in warnings)
    recovered = [r for r in ours if "recovered" in r.getMessage()]
    assert len(recovered) == 1
    assert recovered[0].__dict__["failed_polls"] == 2
    for record in caplog.records:  # httpx's own lines included
        assert KEY not in record.getMessage()
        assert KEY not in repr(record.__dict__)
    assert KEY not in repr(setup.client)


def test_run_polls_and_sleeps_as_each_round_says_until_cancelled() -> None:
    setup = Setup(helsinki())
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        setup.ticks.now += seconds
        if len(slept) == 1:
            setup.stand_in.fail = lambda _: httpx.Response(502)
        if len(slept) == 3:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(setup.poller.run(sleep))
    assert slept == [900, 60, 120]


def test_the_inline_offload_works_too() -> None:
    # The poller takes any `Offload`: an embedder without an event loop to protect passes
    # `inline`.
    stand_in = helsinki()
    store = MemoryStore()
    client = OpenAQClient(httpx.AsyncClient(transport=httpx.MockTransport(stand_in)), KEY, BASE)
    poller = OpenAQPoller(client, store, [BOX], inline, clock=ManualClock(NOW))
    assert asyncio.run(poller.poll_once()).written.added == 3
