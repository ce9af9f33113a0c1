"""The Open-Meteo air-quality adapter, against an in-process fake of the API.

The files in `recorded/` are NOT live captures (this machine has no internet access). They were
written by hand to follow Open-Meteo's real response format, checked against:
- the server's JSON writer (open-meteo/open-meteo `Sources/App/Helper/Writer/JsonWriter.swift`):
  key order `latitude, longitude, generationtime_ms, utc_offset_seconds, timezone,
  timezone_abbreviation, elevation, [location_id], hourly_units, hourly`; a list only when more
  than one location is asked; `location_id` (the 0-based position) written only when non-zero;
  non-finite values written as `null`;
- the CAMS grids in `CamsDomain.grid` and float32 arithmetic, which give the reported centres
  (Berlin 52.52, 13.41 -> 52.549995, 13.450001, as published test fixtures of other Open-Meteo
  clients also show);
- `SiUnit` abbreviations (`"unixtime"`, `"μg/m³"`), and the error body `{"error":true,
  "reason":...}` with HTTP 400 (open-meteo/sdk README; reason text from `ForecastapiError`).
The concentrations themselves are made-up plausible numbers; whitespace differs from the wire
format (the server writes one line).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest

from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.errors import SourceUnavailable
from cleanair_core.geo import Point
from cleanair_sources.circuit_breaker import BreakerState
from cleanair_sources.open_meteo import (
    DEFAULT_BASE_URL,
    HOURLY_VARIABLES,
    GridCell,
    OpenMeteoSource,
    snap,
)
from support.fake_open_meteo import FakeOpenMeteo as FakeUpstream

RECORDED = Path(__file__).parent / "recorded"
DAY = datetime(2026, 5, 20, tzinfo=UTC)  # the date the recorded files cover
BERLIN = Point(52.52, 13.41)  # cell 52.55, 13.45 (CAMS Europe)
BERLIN_NEAR = Point(52.53, 13.42)  # about 1.3 km away, same cell
PARIS = Point(48.85, 2.35)  # cell 48.85, 2.35
NEW_YORK = Point(40.5, -74.1)  # CAMS global point 40.4, -74.0
HOURLY = "pm10,pm2_5,nitrogen_dioxide,ozone,sulphur_dioxide"


# Fakes -----------------------------------------------------------------------------------
def recorded(name: str) -> Any:
    return json.loads((RECORDED / name).read_text(encoding="utf-8"))


def json_response(payload: Any, status: int = 200) -> httpx.Response:
    body = json.dumps(payload, ensure_ascii=False).encode()
    return httpx.Response(
        status, content=body, headers={"content-type": "application/json; charset=utf-8"}
    )


def synthesized(request: httpx.Request) -> httpx.Response:
    """Answer any request in the documented format; values encode what was asked.

    pm10 = hours since start_date 00:00, pm2_5 = requested latitude, nitrogen_dioxide =
    requested longitude, ozone = 1.0, sulphur_dioxide = null.
    """
    params = request.url.params
    lats = [float(v) for v in params["latitude"].split(",")]
    lons = [float(v) for v in params["longitude"].split(",")]
    start = datetime.fromisoformat(params["start_date"]).replace(tzinfo=UTC)
    days = (datetime.fromisoformat(params["end_date"]).replace(tzinfo=UTC) - start).days + 1
    times = [int((start + timedelta(hours=h)).timestamp()) for h in range(24 * days)]
    template = recorded("open_meteo_berlin_single.json")
    objects = []
    for index, (lat, lon) in enumerate(zip(lats, lons, strict=True)):
        obj = {key: value for key, value in template.items() if key not in ("hourly",)}
        obj["latitude"], obj["longitude"] = lat, lon
        if index:
            obj = {**obj, "location_id": index}
        obj["hourly_units"] = template["hourly_units"]
        obj["hourly"] = {
            "time": times,
            "pm10": [float(h) for h in range(len(times))],
            "pm2_5": [lat] * len(times),
            "nitrogen_dioxide": [lon] * len(times),
            "ozone": [1.0] * len(times),
            "sulphur_dioxide": [None] * len(times),
        }
        objects.append(obj)
    return json_response(objects[0] if len(objects) == 1 else objects)


Answer = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


class FakeOpenMeteo:
    """MockTransport handler: records every request and plays answers in turn.

    The last answer repeats once the others are used up.
    """

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, httpx.Response):
            return answer
        return answer(request)

    def params(self, index: int = -1) -> dict[str, str]:
        return dict(self.requests[index].url.params)


class FakeSleep:
    """Records the delays it was asked to wait; never waits."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Harness:
    def __init__(self, api: FakeOpenMeteo, **options: Any) -> None:
        self.api = api
        self.sleep = FakeSleep()
        self.clock = FakeMonotonic()
        self.client = httpx.AsyncClient(transport=httpx.MockTransport(api))
        options.setdefault("sleep", self.sleep)
        options.setdefault("monotonic", self.clock)
        self.source = OpenMeteoSource(self.client, **options)

    def ask(self, *samples: Sample) -> list[Concentrations]:
        return asyncio.run(self.source.concentrations(samples))


class MakeHarness(Protocol):
    """The `harness` fixture: a Harness whose fake API plays `answers` in turn."""

    def __call__(self, *answers: Answer, **options: Any) -> Harness: ...


@pytest.fixture
def harness() -> Iterator[MakeHarness]:
    made: list[Harness] = []

    def make(*answers: Answer, **options: Any) -> Harness:
        made.append(Harness(FakeOpenMeteo(*answers), **options))
        return made[-1]

    yield make
    for h in made:
        asyncio.run(h.client.aclose())


def at(hour: int, minute: int = 0, day: datetime = DAY) -> datetime:
    return day + timedelta(hours=hour, minutes=minute)


def expected(location: dict[str, Any], hour: int) -> Concentrations:
    """What the adapter should report for `hour` of a recorded location."""
    return {pollutant: location["hourly"][name][hour] for name, pollutant in HOURLY_VARIABLES}


ALL_NONE: Concentrations = dict.fromkeys(SCORED)


# Mapping -------------------------------------------------------------------------------------
def test_single_location_maps_variables_to_pollutants_for_the_utc_hour(
    harness: MakeHarness,
) -> None:
    h = harness(json_response(recorded("open_meteo_berlin_single.json")))

    (got,) = h.ask(Sample(BERLIN, at(10, 37)))

    # Spot values from the file, so a swapped mapping (pm10 <-> pm2_5, ...) cannot pass.
    assert got == {
        Pollutant.PM10: 19.2,
        Pollutant.PM25: 10.5,
        Pollutant.NO2: 11.7,
        Pollutant.O3: 76.7,
        Pollutant.SO2: 2.2,
    }
    assert len(h.api.requests) == 1
    request = h.api.requests[0]
    assert request.method == "GET"
    assert str(request.url.copy_with(query=None)) == DEFAULT_BASE_URL + "/v1/air-quality"
    assert h.api.params() == {
        "latitude": "52.55",
        "longitude": "13.45",
        "hourly": HOURLY,
        "timeformat": "unixtime",
        "timezone": "GMT",
        "start_date": "2026-05-20",
        "end_date": "2026-05-20",
        "domains": "auto",
    }


def test_every_hour_of_the_recorded_day_maps_to_its_own_values(harness: MakeHarness) -> None:
    berlin = recorded("open_meteo_berlin_single.json")
    h = harness(json_response(berlin))

    got = h.ask(*(Sample(BERLIN, at(hour, 59)) for hour in range(24)))

    assert got == [expected(berlin, hour) for hour in range(24)]
    assert len(h.api.requests) == 1


def test_nulls_become_none(harness: MakeHarness) -> None:
    h = harness(json_response(recorded("open_meteo_berlin_single.json")))

    late, evening = h.ask(Sample(BERLIN, at(22)), Sample(BERLIN, at(20)))

    assert late == ALL_NONE  # the file's last three hours are null (beyond the forecast)
    assert all(value is not None for value in evening.values())


def test_an_hour_missing_from_the_response_is_unknown_not_an_error(harness: MakeHarness) -> None:
    berlin = recorded("open_meteo_berlin_single.json")
    for column in berlin["hourly"].values():
        del column[5]
    h = harness(json_response(berlin))

    missing, after = h.ask(Sample(BERLIN, at(5, 30)), Sample(BERLIN, at(6)))

    assert missing == ALL_NONE
    assert after == expected(recorded("open_meteo_berlin_single.json"), 6)


def test_a_sample_hour_is_the_floor_of_its_utc_time(harness: MakeHarness) -> None:
    berlin = recorded("open_meteo_berlin_single.json")
    h = harness(json_response(berlin))
    cest = timezone(timedelta(hours=2))

    got = h.ask(
        Sample(BERLIN, datetime(2026, 5, 20, 14, 59, 59, tzinfo=cest)),  # 12:59:59 UTC
        Sample(BERLIN, datetime(2026, 5, 20, 3, 0, tzinfo=UTC)),
    )

    assert got == [expected(berlin, 12), expected(berlin, 3)]


def test_dates_cover_every_needed_utc_hour(harness: MakeHarness) -> None:
    h = harness(synthesized)
    cest = timezone(timedelta(hours=2))

    got = h.ask(
        Sample(BERLIN, at(23, 30)),
        Sample(BERLIN, datetime(2026, 5, 22, 1, 30, tzinfo=cest)),  # 2026-05-21 23:30 UTC
    )

    assert h.api.params()["start_date"] == "2026-05-20"
    assert h.api.params()["end_date"] == "2026-05-21"
    assert [c[Pollutant.PM10] for c in got] == [23.0, 47.0]  # hours since 2026-05-20 00:00


def test_results_are_fresh_dicts_the_caller_may_change(harness: MakeHarness) -> None:
    h = harness(json_response(recorded("open_meteo_berlin_single.json")))
    (first,) = h.ask(Sample(BERLIN, at(10)))
    first[Pollutant.PM10] = 999.0

    (again,) = h.ask(Sample(BERLIN, at(10)))

    assert again[Pollutant.PM10] == 19.2


def test_no_samples_no_request(harness: MakeHarness) -> None:
    h = harness(synthesized)
    assert h.ask() == []
    assert h.api.requests == []


# Many locations in one request ---------------------------------------------------------------
def test_many_locations_go_in_one_request_in_first_seen_order(harness: MakeHarness) -> None:
    three = recorded("open_meteo_three_locations.json")
    h = harness(json_response(three))

    got = h.ask(
        Sample(BERLIN, at(10)),
        Sample(PARIS, at(10)),
        Sample(NEW_YORK, at(10)),
        Sample(BERLIN_NEAR, at(11)),
        Sample(PARIS, at(23)),
        Sample(NEW_YORK, at(0)),
    )

    assert len(h.api.requests) == 1
    params = h.api.params()
    assert params["latitude"] == "52.55,48.85,40.4"
    assert params["longitude"] == "13.45,2.35,-74.0"
    assert params["hourly"] == HOURLY
    assert params["timeformat"] == "unixtime"
    assert params["timezone"] == "GMT"
    assert (params["start_date"], params["end_date"]) == ("2026-05-20", "2026-05-20")
    assert params["domains"] == "auto"
    berlin, paris, new_york = three
    assert got == [
        expected(berlin, 10),
        expected(paris, 10),
        expected(new_york, 10),
        expected(berlin, 11),
        expected(paris, 23),
        expected(new_york, 0),
    ]
    assert got[0] != got[1] != got[2]  # the three locations really differ


def test_two_close_points_cost_one_location(harness: MakeHarness) -> None:
    berlin = recorded("open_meteo_berlin_single.json")
    h = harness(json_response(berlin))

    got = h.ask(Sample(BERLIN, at(8)), Sample(BERLIN_NEAR, at(9)))

    assert h.api.params()["latitude"] == "52.55"
    assert h.api.params()["longitude"] == "13.45"
    assert got == [expected(berlin, 8), expected(berlin, 9)]


def test_requests_are_chunked_at_max_locations_per_request(harness: MakeHarness) -> None:
    h = harness(synthesized, max_locations_per_request=2)
    points = [Point(10.0 + 2 * i, 100.0) for i in range(5)]  # five distinct global points

    got = h.ask(*(Sample(p, at(4)) for p in points))

    assert [len(r.url.params["latitude"].split(",")) for r in h.api.requests] == [2, 2, 1]
    assert [r.url.params["latitude"] for r in h.api.requests] == ["10.0,12.0", "14.0,16.0", "18.0"]
    assert [c[Pollutant.PM25] for c in got] == [10.0, 12.0, 14.0, 16.0, 18.0]
    assert all(c[Pollutant.PM10] == 4.0 for c in got)


def test_the_dateline_is_one_cell(harness: MakeHarness) -> None:
    h = harness(synthesized)

    east, west = h.ask(Sample(Point(-17.8, 179.9), at(1)), Sample(Point(-17.8, -179.9), at(1)))

    assert h.api.params()["latitude"] == "-17.6"
    assert h.api.params()["longitude"] == "-180.0"
    assert east == west


# Grid snapping -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("lat", "lon", "cell"),
    [
        # CAMS Europe, 0.1 degree cell centres (x.x5)
        (52.52, 13.41, ("cams_europe", 52.55, 13.45)),
        (52.53, 13.42, ("cams_europe", 52.55, 13.45)),
        (48.85, 2.35, ("cams_europe", 48.85, 2.35)),
        (38.72, -9.14, ("cams_europe", 38.75, -9.15)),  # Lisbon: negative longitude
        (52.5, 13.4, ("cams_europe", 52.45, 13.45)),  # on an edge: the south and east cell
        (72.0, 10.0, ("cams_europe", 71.95, 10.05)),  # the box's northern edge is inside
        (30.01, 10.0, ("cams_europe", 30.05, 10.05)),
        (50.0, -25.0, ("cams_europe", 49.95, -24.95)),  # western edge inside
        (50.0, 44.99, ("cams_europe", 49.95, 44.95)),
        # CAMS global, 0.4 degree points
        (30.0, 10.0, ("cams_global", 30.0, 10.0)),  # southern edge of the box is outside
        (50.0, 45.0, ("cams_global", 50.0, 45.2)),  # eastern edge outside
        (50.0, -25.01, ("cams_global", 50.0, -25.2)),
        (72.1, 10.0, ("cams_global", 72.0, 10.0)),
        (40.5, -74.1, ("cams_global", 40.4, -74.0)),
        (-33.87, 151.21, ("cams_global", -34.0, 151.2)),  # Sydney: southern hemisphere
        (-22.91, -43.17, ("cams_global", -22.8, -43.2)),  # Rio: both negative
        (0.0, 0.0, ("cams_global", 0.0, 0.0)),
        (-17.8, 179.9, ("cams_global", -17.6, -180.0)),  # dateline: 180 wraps to -180
        (-17.8, -179.9, ("cams_global", -17.6, -180.0)),
        (0.0, 180.0, ("cams_global", 0.0, -180.0)),
        (0.0, 179.7, ("cams_global", 0.0, 179.6)),
        (90.0, 0.0, ("cams_global", 90.0, 0.0)),
        (-90.0, 0.0, ("cams_global", -90.0, 0.0)),
    ],
)
def test_points_snap_to_the_cams_grid(
    lat: float, lon: float, cell: tuple[str, float, float]
) -> None:
    got = snap(Point(lat, lon))
    assert (got.domain, got.lat, got.lon) == cell


def test_cells_are_equal_exactly_when_they_are_the_same_cell() -> None:
    assert snap(BERLIN) == snap(BERLIN_NEAR) == GridCell("cams_europe", 5255, 1345)
    assert snap(BERLIN) != snap(Point(52.52, 13.51))
    assert len({snap(Point(52.5 + i / 1000, 13.4 + i / 1000)) for i in range(1, 100)}) == 1


# Cache ---------------------------------------------------------------------------------------
def test_cached_cells_make_no_request(harness: MakeHarness) -> None:
    berlin = recorded("open_meteo_berlin_single.json")
    h = harness(json_response(berlin))
    h.ask(Sample(BERLIN, at(10)))

    # same cell, other hours of the fetched date, another point in the cell
    got = h.ask(Sample(BERLIN, at(10)), Sample(BERLIN_NEAR, at(3)), Sample(BERLIN, at(23)))

    assert len(h.api.requests) == 1
    assert got == [expected(berlin, 10), expected(berlin, 3), ALL_NONE]


def test_only_missing_cells_are_fetched(harness: MakeHarness) -> None:
    h = harness(synthesized)
    h.ask(Sample(BERLIN, at(10)))

    h.ask(
        Sample(BERLIN, at(10)), Sample(PARIS, at(10)), Sample(BERLIN, at(2, day=DAY + timedelta(1)))
    )

    assert len(h.api.requests) == 2
    params = h.api.params()
    # Berlin 10:00 was a hit; the misses, in first-seen order: Paris, then Berlin next day.
    assert params["latitude"] == "48.85,52.55"
    assert (params["start_date"], params["end_date"]) == ("2026-05-20", "2026-05-21")


def test_cache_entries_expire_after_ttl_on_the_injected_clock(harness: MakeHarness) -> None:
    h = harness(synthesized, cache_ttl=60.0)
    h.ask(Sample(BERLIN, at(10)))

    h.clock.now += 59.9
    h.ask(Sample(BERLIN, at(10)))
    assert len(h.api.requests) == 1

    h.clock.now += 0.1  # exactly cache_ttl after the fetch
    h.ask(Sample(BERLIN, at(10)))
    assert len(h.api.requests) == 2

    h.clock.now += 30
    h.ask(Sample(BERLIN, at(10)))  # the refetch restarted the clock
    assert len(h.api.requests) == 2


def test_it_answers_at_once_exactly_the_samples_it_holds_unexpired(harness: MakeHarness) -> None:
    # What decides whether a call's charge is held while it may wait on the upstream.
    h = harness(synthesized, cache_ttl=60.0)
    assert not h.source.answers_at_once([Sample(BERLIN, at(10))])
    h.ask(Sample(BERLIN, at(10)))
    assert h.source.answers_at_once([Sample(BERLIN, at(10)), Sample(BERLIN_NEAR, at(3))])
    assert not h.source.answers_at_once([Sample(BERLIN, at(10)), Sample(PARIS, at(10))])
    assert not h.source.answers_at_once([Sample(BERLIN, at(2, day=DAY + timedelta(1)))])
    assert not h.source.answers_at_once([])  # nothing asked: nothing to say it holds
    h.clock.now += 60.0
    assert not h.source.answers_at_once([Sample(BERLIN, at(10))])
    assert len(h.api.requests) == 1  # asking is no request


def test_cache_is_bounded_and_evicts_least_recently_used(harness: MakeHarness) -> None:
    h = harness(synthesized, cache_size=48)  # two cells of 24 hours
    a, b, c = Point(10.0, 100.0), Point(12.0, 100.0), Point(14.0, 100.0)
    h.ask(Sample(a, at(0)))
    h.ask(Sample(b, at(0)))
    h.ask(Sample(a, at(0)))  # a hit: a 00:00 becomes the most recently used
    assert len(h.api.requests) == 2

    h.ask(Sample(c, at(0)))  # evicts the 24 least recently used: a 01..23 and b 00

    h.ask(Sample(a, at(0)))
    assert len(h.api.requests) == 3
    h.ask(Sample(b, at(0)))
    assert len(h.api.requests) == 4


def test_a_cache_smaller_than_one_answer_still_answers_the_call(harness: MakeHarness) -> None:
    h = harness(synthesized, cache_size=5)

    got = h.ask(*(Sample(Point(10.0 + 2 * i, 100.0), at(i)) for i in range(4)))

    assert [(c[Pollutant.PM25], c[Pollutant.PM10]) for c in got] == [
        (10.0, 0.0),
        (12.0, 1.0),
        (14.0, 2.0),
        (16.0, 3.0),
    ]


# Retries and failures ------------------------------------------------------------------------
@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_a_retryable_status_is_retried_after_one_backoff(harness: MakeHarness, status: int) -> None:
    berlin = recorded("open_meteo_berlin_single.json")
    h = harness(json_response({"error": True, "reason": "busy"}, status), json_response(berlin))

    (got,) = h.ask(Sample(BERLIN, at(10)))

    assert got == expected(berlin, 10)
    assert len(h.api.requests) == 2
    assert h.sleep.delays == [0.5]


def test_a_transport_error_is_retried(harness: MakeHarness) -> None:
    h = harness(httpx.ConnectError("refused"), synthesized)

    h.ask(Sample(BERLIN, at(10)))

    assert len(h.api.requests) == 2
    assert h.sleep.delays == [0.5]


@pytest.mark.parametrize("retries", [0, 1, 2, 3])
def test_timeouts_every_time_give_up_after_one_plus_retries_attempts(
    harness: MakeHarness, retries: int
) -> None:
    h = harness(httpx.ReadTimeout("slow"), retries=retries)

    with pytest.raises(SourceUnavailable):
        h.ask(Sample(BERLIN, at(10)))

    assert len(h.api.requests) == 1 + retries
    assert h.sleep.delays == [0.5 * 2**i for i in range(retries)]


def test_backoff_doubles_from_the_configured_base(harness: MakeHarness) -> None:
    h = harness(json_response({}, 503), retries=3, backoff=2.0, deadline=60.0)

    with pytest.raises(SourceUnavailable):
        h.ask(Sample(BERLIN, at(10)))

    assert h.sleep.delays == [2.0, 4.0, 8.0]


def test_the_deadline_bounds_the_request_timeouts(harness: MakeHarness) -> None:
    h = harness(synthesized, deadline=3.0)

    h.ask(Sample(BERLIN, at(10)))

    timeouts = h.api.requests[0].extensions["timeout"]
    assert set(timeouts) == {"connect", "read", "write", "pool"}
    assert all(2.5 < seconds <= 3.0 for seconds in timeouts.values())


def test_a_backoff_that_would_end_past_the_deadline_is_not_waited(harness: MakeHarness) -> None:
    h = harness(json_response({}, 503), retries=2, backoff=0.5, deadline=1.0)

    with pytest.raises(SourceUnavailable):
        h.ask(Sample(BERLIN, at(10)))

    # 0.5 s fits in 1 s; the next backoff (1 s) would end past it: two attempts, not three.
    assert (len(h.api.requests), h.sleep.delays) == (2, [0.5])


def test_an_upstream_that_accepts_and_never_answers_costs_one_deadline() -> None:
    async def ask() -> float:
        with FakeUpstream().running() as upstream:
            upstream.hold()
            source = OpenMeteoSource(httpx.AsyncClient(), upstream.url, deadline=0.5)
            started = time.monotonic()
            try:
                with pytest.raises(SourceUnavailable):
                    await source.concentrations([Sample(BERLIN, at(10))])
                return time.monotonic() - started
            finally:
                await source.aclose()

    elapsed = asyncio.run(ask())

    # Not 3 x timeout plus backoff: the attempts and the backoff together get 0.5 s.
    assert 0.45 < elapsed < 2.0


def test_failures_are_logged_naming_the_upstream_and_the_cause(
    harness: MakeHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    h = harness(json_response({}, 502), retries=0)

    with pytest.raises(SourceUnavailable):
        h.ask(Sample(BERLIN, at(10)))

    records = [r for r in caplog.records if r.name == "cleanair.sources.open_meteo"]
    assert records
    for record in records:
        assert record.getMessage().startswith("Open-Meteo air quality: ")
        assert (record.__dict__["upstream"], record.__dict__["cause"]) == ("open_meteo", "HTTP 502")


# Circuit breaker -----------------------------------------------------------------------------
def test_failed_calls_open_the_breaker_then_calls_fail_at_once(harness: MakeHarness) -> None:
    h = harness(httpx.ConnectError("refused"), retries=0, breaker_failures=3, breaker_cooldown=30)
    for _ in range(3):
        with pytest.raises(SourceUnavailable):
            h.ask(Sample(BERLIN, at(10)))
    assert (len(h.api.requests), h.source.state()) == (3, BreakerState.OPEN)

    h.clock.now += 10
    with pytest.raises(SourceUnavailable) as refused:
        h.ask(Sample(BERLIN, at(10)))

    assert len(h.api.requests) == 3  # the upstream was not asked
    assert refused.value.retry_after == 20


def test_a_half_open_trial_that_fails_opens_the_breaker_again(harness: MakeHarness) -> None:
    h = harness(httpx.ConnectError("refused"), retries=0, breaker_failures=1, breaker_cooldown=30)
    with pytest.raises(SourceUnavailable):
        h.ask(Sample(BERLIN, at(10)))
    h.clock.now += 30
    assert h.source.state() == BreakerState.HALF_OPEN

    with pytest.raises(SourceUnavailable):
        h.ask(Sample(BERLIN, at(10)))

    assert (len(h.api.requests), h.source.state()) == (2, BreakerState.OPEN)


def test_a_half_open_trial_that_succeeds_closes_the_breaker(harness: MakeHarness) -> None:
    h = harness(
        httpx.ConnectError("refused"),
        synthesized,
        retries=0,
        breaker_failures=1,
        breaker_cooldown=30,
    )
    with pytest.raises(SourceUnavailable):
        h.ask(Sample(BERLIN, at(10)))
    h.clock.now += 30

    h.ask(Sample(BERLIN, at(10)))

    assert h.source.state() == BreakerState.CLOSED
    h.ask(Sample(PARIS, at(10)))  # and calls go through again
    assert len(h.api.requests) == 3


def test_a_success_between_failures_keeps_the_breaker_closed(harness: MakeHarness) -> None:
    down = httpx.ConnectError("refused")
    h = harness(down, down, synthesized, down, down, retries=0, breaker_failures=3)
    for point in (BERLIN, PARIS, NEW_YORK, BERLIN, PARIS):
        with contextlib.suppress(SourceUnavailable):
            h.ask(Sample(point, at(10)))
    assert h.source.state() == BreakerState.CLOSED


def test_an_open_meteo_400_is_not_retried(harness: MakeHarness) -> None:
    body = recorded("open_meteo_error_400.json")
    h = harness(json_response(body, 400), synthesized)

    with pytest.raises(SourceUnavailable):
        h.ask(Sample(BERLIN, at(10, day=DAY + timedelta(days=30))))

    assert len(h.api.requests) == 1
    assert h.sleep.delays == []


@pytest.mark.parametrize("status", [401, 403, 404, 204, 302])
def test_other_non_200_answers_are_not_retried(harness: MakeHarness, status: int) -> None:
    h = harness(httpx.Response(status), synthesized)

    with pytest.raises(SourceUnavailable):
        h.ask(Sample(BERLIN, at(10)))

    assert len(h.api.requests) == 1
    assert h.sleep.delays == []


def test_malformed_json_is_unavailable_without_retry(harness: MakeHarness) -> None:
    h = harness(httpx.Response(200, content=b'{"latitude":52.549995,"longitude":'), synthesized)

    with pytest.raises(SourceUnavailable):
        h.ask(Sample(BERLIN, at(10)))

    assert len(h.api.requests) == 1
    assert h.sleep.delays == []


def _three() -> list[dict[str, Any]]:
    three: list[dict[str, Any]] = recorded("open_meteo_three_locations.json")
    return three


def _berlin_with(**hourly: Any) -> dict[str, Any]:
    berlin: dict[str, Any] = recorded("open_meteo_berlin_single.json")
    berlin["hourly"].update(hourly)
    return berlin


@pytest.mark.parametrize(
    ("payload", "points"),
    [
        pytest.param(_three()[:2], (BERLIN, PARIS, NEW_YORK), id="two answers for three"),
        pytest.param(_three() + _three()[:1], (BERLIN, PARIS, NEW_YORK), id="four for three"),
        pytest.param(_three()[0], (BERLIN, PARIS), id="one object for two"),
        pytest.param([_three()[1], _three()[0]], (BERLIN, PARIS), id="out of order"),
        pytest.param([], (BERLIN,), id="empty list"),
        pytest.param("ok", (BERLIN,), id="a string"),
        pytest.param(_berlin_with(pm10=[1.0]), (BERLIN,), id="short column"),
        pytest.param(_berlin_with(ozone="high"), (BERLIN,), id="column not a list"),
        pytest.param(_berlin_with(pm2_5=["8.6"] * 24), (BERLIN,), id="text value"),
        pytest.param(_berlin_with(time=["2026-05-20T00:00"] * 24), (BERLIN,), id="iso times"),
        pytest.param({"latitude": 52.549995, "longitude": 13.450001}, (BERLIN,), id="no hourly"),
        pytest.param({"error": True, "reason": "x"}, (BERLIN,), id="error object with 200"),
    ],
)
def test_a_wrong_shape_is_unavailable(
    harness: MakeHarness, payload: Any, points: tuple[Point, ...]
) -> None:
    h = harness(json_response(payload))

    with pytest.raises(SourceUnavailable):
        h.ask(*(Sample(p, at(10)) for p in points))

    assert len(h.api.requests) == 1


def test_a_variable_the_server_does_not_serve_is_unknown(harness: MakeHarness) -> None:
    berlin = recorded("open_meteo_berlin_single.json")
    del berlin["hourly"]["sulphur_dioxide"]
    h = harness(json_response(berlin))

    (got,) = h.ask(Sample(BERLIN, at(10)))

    assert got[Pollutant.SO2] is None
    assert got[Pollutant.PM10] == 19.2


def test_a_failure_caches_nothing(harness: MakeHarness) -> None:
    h = harness(httpx.ReadTimeout("slow"), synthesized, retries=0)
    with pytest.raises(SourceUnavailable):
        h.ask(Sample(BERLIN, at(10)))

    h.ask(Sample(BERLIN, at(10)))

    assert len(h.api.requests) == 2


# Privacy -------------------------------------------------------------------------------------
def test_warnings_carry_no_coordinates_or_urls(
    harness: MakeHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reason = "Latitude must be in range of -90 to 90°. Given: 52.55."  # servers echo inputs
    scenarios = [
        harness(json_response({}, 500), httpx.ReadTimeout("read timed out"), synthesized),
        harness(httpx.ConnectError("cannot reach air-quality-api.open-meteo.com"), retries=1),
        harness(json_response({"error": True, "reason": reason}, 400)),
        harness(httpx.Response(200, content=b"<html>52.55</html>")),
        harness(json_response(_three()[:2])),
    ]
    for h in scenarios:
        with contextlib.suppress(SourceUnavailable):
            h.ask(Sample(BERLIN, at(10)), Sample(PARIS, at(10)), Sample(NEW_YORK, at(10)))

    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) >= 5  # failures are logged ...
    forbidden = ["52.5", "13.4", "48.8", "2.35", "40.", "74.", "latitude", "longitude"]
    forbidden += ["://", "open-meteo.com", "air-quality", "v1/"]
    for message in warnings:  # ... without a coordinate or an address
        assert not any(f in message.lower() for f in forbidden), message


# Lifecycle and configuration -----------------------------------------------------------------
def test_a_self_hosted_base_url_is_used(harness: MakeHarness) -> None:
    h = harness(synthesized, base_url="http://aq.internal:8080/")

    h.ask(Sample(BERLIN, at(10)))

    url = h.api.requests[0].url
    assert (url.scheme, url.host, url.port, url.path) == (
        "http",
        "aq.internal",
        8080,
        "/v1/air-quality",
    )


def test_aclose_closes_the_client(harness: MakeHarness) -> None:
    h = harness(synthesized)
    asyncio.run(h.source.aclose())
    assert h.client.is_closed


def test_it_is_an_hourly_source() -> None:
    assert OpenMeteoSource.update_interval == 3600


@pytest.mark.parametrize(
    "options",
    [
        {"retries": -1},
        {"cache_size": -1},
        {"max_locations_per_request": 0},
        {"deadline": 0},
        {"breaker_failures": 0},
        {"breaker_cooldown": 0},
    ],
)
def test_nonsense_options_are_refused(options: dict[str, Any]) -> None:
    client = httpx.AsyncClient(transport=httpx.MockTransport(synthesized))
    try:
        with pytest.raises(ValueError, match="must be"):
            OpenMeteoSource(client, **options)
    finally:
        asyncio.run(client.aclose())
