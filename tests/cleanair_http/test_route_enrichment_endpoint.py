"""POST /v1/airquality/routes: every status the contract names (4.4), times, and charging."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir, ManualClock, Policy
from cleanair_core.access.scopes import Scope as ApiScope
from cleanair_core.air.activities import ActivityType, speed_m_s, ventilation_ratio
from cleanair_core.air.dose import GUIDELINE_LEVELS
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.air.score import band_of, clean_air_score
from cleanair_core.credits.ledger import Billable, CreditLimits
from cleanair_core.geo import Point, distance_m
from cleanair_core.ports import Sources
from cleanair_http.app import create_app
from support.fakes import AIR, FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import Client, bearer, pair

ROUTES = "/v1/airquality/routes"
NOW = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)
VALIDATION_FAILED = {"detail": "Request validation failed"}
#: Seconds from NOW to the next UTC midnight, when the daily burst cap resets.
UNTIL_TOMORROW = int((datetime(2026, 11, 23, tzinfo=UTC) - NOW).total_seconds())
#: Three points in Helsinki, a few hundred metres apart.
HELSINKI_WALK = [Point(60.1699, 24.9384), Point(60.1719, 24.9414), Point(60.1756, 24.9460)]


class CountingSource(FakeSource):
    """A FakeSource that also counts the calls it gets (one call = one batch of samples)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[int] = []  # the number of samples in each call

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.calls.append(len(samples))
        return await super().concentrations(samples)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def source() -> CountingSource:
    return CountingSource()


@pytest.fixture
def sources(source: CountingSource) -> Sources:
    return Sources(source, FakeGeolocator(None), FakeIp(), FakeNamer())


@pytest.fixture
def token(core: CleanAir, client: Client) -> str:
    return pair(core, client)


def with_rate_limit(core: CleanAir, clock: ManualClock, per_minute: int) -> CleanAir:
    """The same store and sources under a tight request limit."""
    policy = Policy(credits=CreditLimits(), requests_per_minute=per_minute)
    return CleanAir(core.store, core.keys, policy, clock, sources=core.sources)


def quota(client: Client, token: str) -> dict[str, int]:
    body: dict[str, int] = client.get("/v1/quota", headers=bearer(token)).json()
    return body


def used(client: Client, token: str) -> int:
    return quota(client, token)["used"]


def iso(at: datetime) -> str:
    return at.isoformat()


def track(times: Sequence[datetime], points: Sequence[Point] = HELSINKI_WALK) -> dict[str, Any]:
    """A recorded track: a time on every waypoint."""
    return {
        "waypoints": [
            {"lat": p.lat, "lon": p.lon, "time": iso(at)}
            for p, at in zip(points, times, strict=True)
        ]
    }


def planned(
    start: datetime, points: Sequence[Point] = HELSINKI_WALK, **extra: Any
) -> dict[str, Any]:
    """Bare waypoints plus a start_time."""
    return {
        "waypoints": [{"lat": p.lat, "lon": p.lon} for p in points],
        "start_time": iso(start),
        **extra,
    }


def post(client: Client, token: str, body: Any) -> Any:
    return client.post(ROUTES, json=body, headers=bearer(token))


def at_times(source: FakeSource) -> list[datetime]:
    return [sample.at for sample in source.samples]


# -- 200 --------------------------------------------------------------------------------------


def test_a_recorded_track_is_enriched(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    times = [NOW - timedelta(minutes=30), NOW - timedelta(minutes=20), NOW - timedelta(minutes=5)]
    response = post(client, token, track(times))
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"waypoints", "measures", "summary"}
    assert body["waypoints"] == [[p.lat, p.lon] for p in HELSINKI_WALK]
    # AIR has pm25, no2 and o3; pm10 is None everywhere and so2 absent: neither appears.
    score = clean_air_score(AIR)
    assert body["measures"] == {
        "clean_air_score": [score] * 3,
        "pm25": [7.0] * 3,
        "no2": [18.0] * 3,
        "o3": [50.0] * 3,
    }
    band = band_of(score)  # type: ignore[arg-type]
    summary = body["summary"]
    assert summary["clean_air_score"] == {
        "score": score,
        "band": str(band.number),
        "description": band.label,
        "colour": band.colour,
    }
    assert summary["average_pollutants"] == {"pm25": 7.0, "no2": 18.0, "o3": 50.0}
    # Constant air for 25 minutes at light effort: air load x hours x ventilation ratio.
    load = (7.0 / 15.0 + 18.0 / 25.0 + 50.0 / 100.0) / 3
    assert summary["inhaled_dose"] == pytest.approx(load * 25 / 60, abs=1e-6)
    # The source is asked for every waypoint at its own recorded time, in one batch.
    assert [s.point for s in source.samples] == HELSINKI_WALK
    assert at_times(source) == times
    assert source.calls == [3]


def test_the_banded_summary_score_is_consistent(
    client: Client,
    token: str,
) -> None:
    body = post(client, token, planned(NOW)).json()
    banded_score = body["summary"]["clean_air_score"]
    assert set(banded_score) == {"score", "band", "description", "colour"}
    band = band_of(banded_score["score"])
    assert banded_score["band"] == str(band.number)
    assert banded_score["description"] == band.label
    assert banded_score["colour"] == band.colour
    assert all(isinstance(banded_score[k], str) for k in ("band", "description", "colour"))


def test_estimated_times_follow_the_walking_speed(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    start = NOW + timedelta(hours=1)
    response = post(client, token, planned(start, activity_type="walking"))
    assert response.status_code == 200
    elapsed = 0.0
    expected = [start]
    for a, b in itertools.pairwise(HELSINKI_WALK):
        elapsed += distance_m(a, b) / 1.3  # walking, 1.3 m/s
        expected.append(start + timedelta(seconds=elapsed))
    got = at_times(source)
    assert len(got) == 3
    assert got[0] == start
    for actual, wanted in zip(got, expected, strict=True):
        assert abs((actual - wanted).total_seconds()) < 1e-3
    assert (got[-1] - got[0]).total_seconds() > 300  # the walk takes minutes, not seconds


def test_estimated_times_depend_on_the_activity(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    assert post(client, token, planned(NOW, activity_type="cycling")).status_code == 200
    total = distance_m(HELSINKI_WALK[0], HELSINKI_WALK[1]) + distance_m(
        HELSINKI_WALK[1], HELSINKI_WALK[2]
    )
    cycling = speed_m_s(ActivityType.CYCLING)
    assert cycling == pytest.approx(18 / 3.6)  # 18 km/h
    duration = (source.samples[-1].at - source.samples[0].at).total_seconds()
    assert duration == pytest.approx(total / cycling, abs=1e-3)


def test_a_one_waypoint_route(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    body = {"waypoints": [{"lat": 60.17, "lon": 24.94}], "start_time": iso(NOW)}
    response = post(client, token, body)
    assert response.status_code == 200
    got = response.json()
    assert got["waypoints"] == [[60.17, 24.94]]
    assert got["measures"]["clean_air_score"] == [clean_air_score(AIR)]
    assert got["summary"]["clean_air_score"]["score"] == clean_air_score(AIR)
    assert got["summary"]["inhaled_dose"] == 0  # a route that lasts no time
    assert got["summary"]["average_pollutants"] == {"pm25": 7.0, "no2": 18.0, "o3": 50.0}
    assert at_times(source) == [NOW]
    assert used(client, token) == 1


def test_a_one_waypoint_recorded_track(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    body = {"waypoints": [{"lat": 1.5, "lon": -2.5, "time": iso(NOW - timedelta(days=3))}]}
    response = post(client, token, body)
    assert response.status_code == 200
    assert response.json()["waypoints"] == [[1.5, -2.5]]
    assert at_times(source) == [NOW - timedelta(days=3)]


def test_all_waypoints_go_to_the_source_in_one_call(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    points = [Point(60.0 + i / 1000, 24.9) for i in range(40)]
    times = [NOW - timedelta(hours=2) + timedelta(minutes=i) for i in range(40)]
    assert post(client, token, track(times, points)).status_code == 200
    assert source.calls == [40]
    assert [s.point for s in source.samples] == points
    assert at_times(source) == times


@pytest.mark.parametrize("count", [1, 2, 7, 100])
def test_the_charge_is_one_credit_per_waypoint(
    client: Client,
    token: str,
    count: int,
) -> None:
    points = [Point(60.0 + i / 1000, 24.9) for i in range(count)]
    response = post(client, token, planned(NOW, points))
    assert response.status_code == 200
    assert len(response.json()["waypoints"]) == count
    usage = quota(client, token)
    assert usage["used"] == count
    assert usage["daily_used"] == count


def test_charges_add_up_over_calls(client: Client, token: str) -> None:
    assert post(client, token, planned(NOW)).status_code == 200  # 3 waypoints
    assert post(client, token, planned(NOW, HELSINKI_WALK[:2])).status_code == 200
    assert used(client, token) == 5


def test_times_with_and_without_a_utc_offset(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    body = {
        "waypoints": [
            {"lat": 60.17, "lon": 24.94, "time": "2026-11-22T09:00:00Z"},
            {"lat": 60.18, "lon": 24.95, "time": "2026-11-22T11:10:00+02:00"},  # 09:10 UTC
            {"lat": 60.19, "lon": 24.96, "time": "2026-11-22T09:20:00"},  # naive: UTC
            {"lat": 60.20, "lon": 24.97, "time": "2026-11-22T04:30:00-05:00"},  # 09:30 UTC
        ]
    }
    response = post(client, token, body)
    assert response.status_code == 200
    expected = [datetime(2026, 11, 22, 9, minute, tzinfo=UTC) for minute in (0, 10, 20, 30)]
    got = at_times(source)
    assert got == expected
    assert all(at.utcoffset() == timedelta(0) for at in got)


def test_a_start_time_with_an_offset_is_read_in_utc(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    body = {"waypoints": [{"lat": 60.17, "lon": 24.94}], "start_time": "2026-11-22T13:00:00+03:00"}
    assert post(client, token, body).status_code == 200
    assert at_times(source) == [datetime(2026, 11, 22, 10, tzinfo=UTC)]
    body["start_time"] = "2026-11-22T10:05:00"  # naive: UTC
    assert post(client, token, body).status_code == 200
    assert at_times(source)[-1] == datetime(2026, 11, 22, 10, 5, tzinfo=UTC)


def test_recorded_times_may_repeat(client: Client, token: str) -> None:
    same = NOW - timedelta(hours=1)
    response = post(client, token, track([same, same, same + timedelta(seconds=1)]))
    assert response.status_code == 200


#: Clean, moderate and poor air at the three waypoints of a walk.
VARYING: list[Concentrations] = [
    {Pollutant.PM25: 2.0, Pollutant.NO2: 5.0},
    {Pollutant.PM25: 30.0, Pollutant.NO2: 40.0},
    {Pollutant.PM25: 100.0, Pollutant.NO2: 90.0},
]


def test_the_summary_is_time_weighted_over_varying_air(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    source.by_sample = lambda i, _: dict(VARYING[i])
    start = NOW - timedelta(hours=2)
    # 10 minutes to the second waypoint, then 50 to the third: the third dominates.
    times = [start, start + timedelta(minutes=10), start + timedelta(minutes=60)]
    response = post(client, token, track(times))
    assert response.status_code == 200
    body = response.json()
    scores = body["measures"]["clean_air_score"]
    assert scores == [clean_air_score(air) for air in VARYING]
    assert len(set(scores)) == 3
    # Trapezoid weights (seconds each waypoint stands for): 5, 30 and 25 minutes.
    weights = [300.0, 1800.0, 1500.0]
    expected = sum(s * w for s, w in zip(scores, weights, strict=True)) / sum(weights)
    summary = body["summary"]
    route_score = summary["clean_air_score"]["score"]
    assert min(scores) <= route_score <= max(scores)
    assert route_score == pytest.approx(expected, abs=0.051)
    assert route_score != pytest.approx(sum(scores) / 3, abs=0.5)  # not a plain mean
    band = band_of(route_score)
    assert summary["clean_air_score"]["band"] == str(band.number)
    assert summary["clean_air_score"]["description"] == band.label
    pm25 = (2.0 * 300 + 30.0 * 1800 + 100.0 * 1500) / 3600
    assert summary["average_pollutants"]["pm25"] == pytest.approx(pm25, abs=0.01)
    assert body["measures"]["pm25"] == [2.0, 30.0, 100.0]
    assert set(body["measures"]) == {"clean_air_score", "pm25", "no2"}
    assert set(summary["average_pollutants"]) == {"pm25", "no2"}


def test_a_waypoint_without_data_is_null(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    airs: list[Concentrations] = [
        {Pollutant.PM25: 10.0, Pollutant.PM10: 20.0},
        {},
        {Pollutant.PM25: 12.0},
    ]
    source.by_sample = lambda i, _: dict(airs[i])
    response = post(client, token, planned(NOW))
    assert response.status_code == 200
    measures = response.json()["measures"]
    assert measures["clean_air_score"][1] is None
    assert measures["pm25"] == [10.0, None, 12.0]
    assert measures["pm10"] == [20.0, None, None]
    assert set(measures) == {"clean_air_score", "pm25", "pm10"}
    # No pollutant is known at every waypoint: no dose, but still a score and averages.
    summary = response.json()["summary"]
    assert summary["inhaled_dose"] is None
    assert summary["clean_air_score"] is not None
    assert used(client, token) == 3


def test_activity_and_environment_change_the_scores(
    client: Client,
    token: str,
) -> None:
    def route(**extra: str) -> dict[str, Any]:
        response = post(client, token, planned(NOW, HELSINKI_WALK, **extra))
        assert response.status_code == 200
        body: dict[str, Any] = response.json()
        return body

    plain = route()
    running = route(activity_type="running_outdoor")
    indoor = route(environment_type="indoor")
    assert running["measures"]["clean_air_score"][0] < plain["measures"]["clean_air_score"][0]
    assert indoor["measures"]["clean_air_score"][0] > plain["measures"]["clean_air_score"][0]
    assert indoor["summary"]["average_pollutants"]["pm25"] < 7.0  # indoor air is breathed
    assert route(activity_type="other", environment_type="unknown") == plain


def test_the_dose_scales_with_breathing(client: Client, token: str) -> None:
    start = NOW - timedelta(hours=1)
    times = [start, start + timedelta(minutes=30), start + timedelta(minutes=60)]
    doses = {}
    for activity in ("at_rest", "running_outdoor"):
        body = {**track(times), "activity_type": activity}
        response = post(client, token, body)
        assert response.status_code == 200
        doses[activity] = response.json()["summary"]["inhaled_dose"]
    guideline = GUIDELINE_LEVELS
    load = (
        7.0 / guideline[Pollutant.PM25]
        + 18.0 / guideline[Pollutant.NO2]
        + 50.0 / guideline[Pollutant.O3]
    ) / 3  # AIR: pm25 7, no2 18, o3 50 (pm10 unknown)
    for activity, dose in doses.items():
        assert dose == pytest.approx(
            load * 1.0 * ventilation_ratio(ActivityType(activity)), abs=1e-5
        )
    assert doses["running_outdoor"] > doses["at_rest"]


def test_unknown_fields_are_ignored(client: Client, token: str) -> None:
    body = planned(NOW)
    body["waypoints"][0]["altitude"] = 12
    body["name"] = "morning walk"
    assert post(client, token, body).status_code == 200


def test_times_on_the_waypoints_win_over_start_time(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    times = [NOW - timedelta(hours=3), NOW - timedelta(hours=2), NOW - timedelta(hours=1)]
    body = {**track(times), "start_time": iso(NOW)}
    assert post(client, token, body).status_code == 200
    assert at_times(source) == times


# -- 400: outside the data window ---------------------------------------------------------------

PAST = timedelta(days=30)
HORIZON = timedelta(hours=84)
SECOND = timedelta(seconds=1)
ONE_POINT = {"lat": 60.17, "lon": 24.94}


@pytest.mark.parametrize(
    "times",
    [
        [NOW - PAST - SECOND, NOW - timedelta(days=1), NOW],  # first waypoint too old
        [NOW - timedelta(days=40), NOW - timedelta(days=35), NOW - timedelta(days=31)],
        [NOW, NOW + timedelta(hours=1), NOW + HORIZON + SECOND],  # last one too far ahead
        [NOW + timedelta(days=5), NOW + timedelta(days=6), NOW + timedelta(days=7)],
        [NOW - PAST - SECOND, NOW, NOW + HORIZON + SECOND],
    ],
)
def test_recorded_times_outside_the_window_are_400_and_free(
    client: Client,
    token: str,
    source: CountingSource,
    times: list[datetime],
) -> None:
    response = post(client, token, track(times))
    assert response.status_code == 400
    assert response.json()["detail"]
    assert source.calls == []
    assert used(client, token) == 0


@pytest.mark.parametrize(
    "start", [NOW - PAST - SECOND, NOW + HORIZON + SECOND, NOW - timedelta(days=365)]
)
def test_a_start_time_outside_the_window_is_400_and_free(
    client: Client,
    token: str,
    source: CountingSource,
    start: datetime,
) -> None:
    body = {"waypoints": [{"lat": 60.17, "lon": 24.94}], "start_time": iso(start)}
    response = post(client, token, body)
    assert response.status_code == 400
    assert source.calls == []
    assert used(client, token) == 0


def test_a_start_time_outside_the_window_is_400_even_with_recorded_times(
    client: Client,
    token: str,
) -> None:
    times = [NOW - timedelta(hours=3), NOW - timedelta(hours=2), NOW - timedelta(hours=1)]
    body = {**track(times), "start_time": iso(NOW - PAST - SECOND)}
    assert post(client, token, body).status_code == 400
    assert used(client, token) == 0


def test_a_window_offset_counts_in_utc(
    client: Client,
    token: str,
) -> None:
    edge = NOW + HORIZON  # 2026-11-25T22:15:00Z
    # The same wall-clock time, but at UTC-01:00, is an hour beyond the horizon.
    body = {"waypoints": [{"lat": 60.17, "lon": 24.94}], "start_time": "2026-11-25T22:15:00-01:00"}
    assert post(client, token, body).status_code == 400
    body["start_time"] = "2026-11-25T23:15:00+01:00"  # exactly the horizon
    assert edge == datetime(2026, 11, 25, 22, 15, tzinfo=UTC)
    assert post(client, token, body).status_code == 200


def test_estimated_times_past_the_horizon_are_400_and_free(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    # 10 km on foot takes over two hours: leaving an hour before the horizon runs past it.
    far = [Point(60.17, 24.94), Point(60.17 + 10_000 / 111_195, 24.94)]
    assert distance_m(*far) / 1.3 > 2 * 3600
    late = NOW + HORIZON - timedelta(hours=1)
    response = post(client, token, planned(late, far, activity_type="walking"))
    assert response.status_code == 400
    assert source.calls == []
    assert used(client, token) == 0
    # The same walk leaving three hours before the horizon fits.
    early = NOW + HORIZON - timedelta(hours=3)
    assert post(client, token, planned(early, far, activity_type="walking")).status_code == 200
    assert used(client, token) == 2


@pytest.mark.parametrize(
    "times",
    [
        [NOW - PAST, NOW - PAST + SECOND, NOW],  # exactly 30 days ago
        [NOW, NOW + timedelta(hours=1), NOW + HORIZON],  # exactly 84 hours ahead
        [NOW - PAST, NOW, NOW + HORIZON],
    ],
)
def test_the_window_edges_are_accepted(
    client: Client,
    token: str,
    source: CountingSource,
    times: list[datetime],
) -> None:
    response = post(client, token, track(times))
    assert response.status_code == 200
    assert at_times(source) == times
    assert used(client, token) == 3


@pytest.mark.parametrize("start", [NOW - PAST, NOW + HORIZON])
def test_a_start_time_on_the_window_edge_is_accepted(
    client: Client,
    token: str,
    start: datetime,
) -> None:
    body = {"waypoints": [{"lat": 60.17, "lon": 24.94}], "start_time": iso(start)}
    assert post(client, token, body).status_code == 200


def test_the_window_moves_with_the_clock(
    client: Client,
    token: str,
    clock: ManualClock,
) -> None:
    body = {"waypoints": [{"lat": 60.17, "lon": 24.94}], "start_time": iso(NOW + HORIZON + SECOND)}
    assert post(client, token, body).status_code == 400
    clock.advance(seconds=1)
    assert post(client, token, body).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"waypoints": [{**ONE_POINT, "time": "9999-12-31T23:59:59-01:00"}]},
        {"waypoints": [{**ONE_POINT, "time": "0001-01-01T00:00:00+01:00"}]},
        {"waypoints": [ONE_POINT], "start_time": "0001-01-01T00:30:00+01:00"},
        # Valid on its own, but the estimated arrival overflows the datetime range.
        {
            "waypoints": [ONE_POINT, {"lat": 60.27, "lon": 24.94}],
            "start_time": "9999-12-31T23:00:00Z",
        },
    ],
)
def test_extreme_times_are_400_not_500(
    client: Client,
    token: str,
    body: dict[str, Any],
) -> None:
    response = post(client, token, body)
    assert response.status_code == 400
    assert used(client, token) == 0


# -- 401 / 403 --------------------------------------------------------------------------------


def test_a_token_is_required(client: Client, token: str) -> None:
    assert client.post(ROUTES, json=planned(NOW)).status_code == 401
    assert post(client, "cleanair_tst_not-a-real-token", planned(NOW)).status_code == 401
    assert (
        client.post(ROUTES, json=planned(NOW), headers={"Authorization": token}).status_code == 401
    )
    assert used(client, token) == 0


def test_the_aq_routes_scope_is_required(core: CleanAir, client: Client) -> None:
    core.add_partner("acme")
    read_only = core.issue_partner_token("acme", "read", [ApiScope.AQ_READ, ApiScope.ROUTES_PLAN])
    response = post(client, read_only.token, planned(NOW))
    assert response.status_code == 403
    assert "aq:routes" in response.json()["detail"]
    assert used(client, read_only.token) == 0


def test_the_aq_routes_scope_alone_is_enough(core: CleanAir, client: Client) -> None:
    core.add_partner("acme")
    routes_only = core.issue_partner_token("acme", "routes", [ApiScope.AQ_ROUTES])
    assert post(client, routes_only.token, planned(NOW)).status_code == 200
    assert used(client, routes_only.token) == 3


def test_a_premium_owner_is_required(
    core: CleanAir,
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    core.set_premium("alice", False)
    assert post(client, token, planned(NOW)).status_code == 403
    assert source.calls == []
    assert used(client, token) == 0
    core.set_premium("alice", True)
    assert post(client, token, planned(NOW)).status_code == 200


# -- 422 --------------------------------------------------------------------------------------

MARKER = 60.123456789  # an unusual value to look for in the answer
ONE = {"lat": 60.17, "lon": 24.94}
T0 = iso(NOW - timedelta(hours=2))
T1 = iso(NOW - timedelta(hours=1))


@pytest.mark.parametrize(
    "body",
    [
        {"waypoints": [], "start_time": iso(NOW)},
        {"waypoints": [ONE] * 101, "start_time": iso(NOW)},
        {"start_time": iso(NOW)},
        {"waypoints": None, "start_time": iso(NOW)},
        {"waypoints": ONE, "start_time": iso(NOW)},
        # mixed: some waypoints with a time, some without
        {"waypoints": [{**ONE, "time": T0}, ONE]},
        {"waypoints": [ONE, {**ONE, "time": T0}], "start_time": iso(NOW)},
        {"waypoints": [{**ONE, "time": T0}, {**ONE, "time": None}, {**ONE, "time": T1}]},
        # no times at all and no start_time
        {"waypoints": [ONE, ONE]},
        {"waypoints": [ONE], "start_time": None},
        {"waypoints": [{**ONE, "time": None}]},
        # recorded times going backwards
        {"waypoints": [{**ONE, "time": T1}, {**ONE, "time": T0}]},
        {"waypoints": [{**ONE, "time": T0}, {**ONE, "time": T1}, {**ONE, "time": T0}]},
        # coordinates
        {"waypoints": [{"lat": 90.5, "lon": 24.94}], "start_time": iso(NOW)},
        {"waypoints": [{"lat": -90.0001, "lon": 24.94}], "start_time": iso(NOW)},
        {"waypoints": [{"lat": 60.1, "lon": 180.0001}], "start_time": iso(NOW)},
        {"waypoints": [{"lat": 60.1, "lon": -181}], "start_time": iso(NOW)},
        {"waypoints": [{"lat": "60.1", "lon": 24.94}], "start_time": iso(NOW)},
        {"waypoints": [{"lat": 60.1, "lon": "24.9"}], "start_time": iso(NOW)},
        {"waypoints": [{"lat": True, "lon": 24.9}], "start_time": iso(NOW)},
        {"waypoints": [{"lat": None, "lon": 24.9}], "start_time": iso(NOW)},
        {"waypoints": [{"lon": 24.94}], "start_time": iso(NOW)},
        {"waypoints": [{"lat": 60.1}], "start_time": iso(NOW)},
        {"waypoints": [[60.1, 24.9]], "start_time": iso(NOW)},
        # enumerations
        {**{"waypoints": [ONE], "start_time": iso(NOW)}, "activity_type": "flying"},
        {**{"waypoints": [ONE], "start_time": iso(NOW)}, "activity_type": "Walking"},
        {**{"waypoints": [ONE], "start_time": iso(NOW)}, "environment_type": "underwater"},
        {**{"waypoints": [ONE], "start_time": iso(NOW)}, "environment_type": 1},
        # date-times
        {"waypoints": [ONE], "start_time": "yesterday"},
        {"waypoints": [ONE], "start_time": "2026-11-22"},
        {"waypoints": [ONE], "start_time": "2026-13-22T10:00:00Z"},
        {"waypoints": [ONE], "start_time": "2026-11-22T25:00:00Z"},
        {"waypoints": [ONE], "start_time": 1795342500},
        {"waypoints": [{**ONE, "time": "now"}]},
        {"waypoints": [{**ONE, "time": 1795342500}]},
        [],
        "route",
    ],
)
def test_invalid_bodies_are_422_never_echoed_never_charged(
    client: Client,
    token: str,
    source: CountingSource,
    body: Any,
) -> None:
    response = post(client, token, body)
    assert response.status_code == 422, body
    assert response.json() == VALIDATION_FAILED
    assert source.calls == []
    assert used(client, token) == 0


@pytest.mark.parametrize(
    "waypoint",
    [
        {"lat": "SECRET-60.1", "lon": 24.94},
        {"lat": 91.987654321, "lon": 24.94},
        {"lat": 60.1, "lon": 24.94, "time": "SECRET-2026-11-22"},
        {"lat": 60.1, "lon": 24.94, "time": T0, "extra": 1},  # mixed with a timeless one below
    ],
)
def test_the_422_body_never_contains_the_input(
    client: Client,
    token: str,
    waypoint: dict[str, Any],
) -> None:
    body = {"waypoints": [waypoint, {"lat": MARKER, "lon": 24.94}], "start_time": iso(NOW)}
    response = post(client, token, body)
    assert response.status_code == 422
    assert response.text == '{"detail":"Request validation failed"}'
    for needle in ("SECRET", "91.98", "60.123456", "2026-11-22", "lat", "waypoint"):
        assert needle not in response.text


def test_exactly_100_waypoints_are_accepted_and_101_are_not(
    client: Client,
    token: str,
) -> None:
    points = [Point(60.0 + i / 1000, 24.9) for i in range(101)]
    assert post(client, token, planned(NOW, points)).status_code == 422
    assert used(client, token) == 0
    assert post(client, token, planned(NOW, points[:100])).status_code == 200
    assert used(client, token) == 100


def test_malformed_json_is_422(client: Client, token: str) -> None:
    headers = {**bearer(token), "content-type": "application/json"}
    for raw in (b'{"waypoints": [{"lat": 1,', b"", b"not json", b'{"waypoints": [NaN]}'):
        response = client.post(ROUTES, content=raw, headers=headers)
        assert response.status_code == 422, raw
        assert response.json() == VALIDATION_FAILED
    assert used(client, token) == 0


def test_validation_comes_before_the_window(client: Client, token: str) -> None:
    too_old = iso(NOW - timedelta(days=60))
    mixed = {"waypoints": [{**ONE, "time": too_old}, ONE]}
    assert post(client, token, mixed).status_code == 422
    backwards = {"waypoints": [{**ONE, "time": T0}, {**ONE, "time": too_old}]}
    assert post(client, token, backwards).status_code == 422


# -- 429 --------------------------------------------------------------------------------------


def test_the_rate_limit_is_429_with_retry_after(core: CleanAir, clock: ManualClock) -> None:
    strict = with_rate_limit(core, clock, per_minute=1)
    with TestClient(create_app(strict)) as client:
        token = pair(strict, client)
        assert post(client, token, planned(NOW)).status_code == 200
        limited = post(client, token, planned(NOW))
        assert limited.status_code == 429
        assert int(limited.headers["retry-after"]) > 0
        assert limited.json()["detail"]
        clock.advance(seconds=61)
        assert used(client, token) == 3  # the refused call was not charged


def test_a_100_waypoint_route_uses_the_whole_day(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    points = [Point(60.0 + i / 1000, 24.9) for i in range(100)]
    assert post(client, token, planned(NOW, points)).status_code == 200
    usage = quota(client, token)
    assert (usage["daily_used"], usage["daily_remaining"]) == (100, 0)
    response = post(client, token, planned(NOW, points[:1]))
    assert response.status_code == 429
    assert int(response.headers["retry-after"]) == UNTIL_TOMORROW
    assert source.calls == [100]  # the refused route never reached the source
    assert used(client, token) == 100


def test_a_route_must_fit_in_what_remains_of_the_day(
    core: CleanAir,
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    caller = core.authenticate(token)
    for _ in range(3):  # 3 x 25 = 75 of the daily 100
        core.charge(caller, Billable.ROUTE_PLAN).reserve()
    core.charge(caller, Billable.ROUTE_ENRICHMENT, units=20).reserve()  # 95
    six = [Point(60.0 + i / 1000, 24.9) for i in range(6)]
    response = post(client, token, planned(NOW, six))
    assert response.status_code == 429
    assert int(response.headers["retry-after"]) == UNTIL_TOMORROW
    assert used(client, token) == 95
    assert source.calls == []
    assert post(client, token, planned(NOW, six[:5])).status_code == 200
    assert used(client, token) == 100


def test_exhausted_credits_are_429_but_validation_and_window_come_first(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    caller = core.authenticate(token)
    for _ in range(4):  # 4 x 25 = the daily burst cap of 100
        core.charge(caller, Billable.ROUTE_PLAN).reserve()
    assert post(client, token, {"waypoints": [ONE, ONE]}).status_code == 422
    assert post(client, token, planned(NOW + timedelta(days=5))).status_code == 400
    response = post(client, token, planned(NOW))
    assert response.status_code == 429
    assert int(response.headers["retry-after"]) > 0
    assert used(client, token) == 100


def test_the_monthly_pool_limits_routes(
    core: CleanAir,
    client: Client,
    token: str,
    clock: ManualClock,
) -> None:
    points = [Point(60.0 + i / 1000, 24.9) for i in range(100)]
    for day in range(10):  # 10 days x 100 waypoints = the monthly 1000
        clock.set(datetime(2026, 11, 1 + day, 12, tzinfo=UTC))
        start = clock.now()
        assert post(client, token, planned(start, points)).status_code == 200
    clock.set(NOW)
    response = post(client, token, planned(NOW, points[:1]))
    assert response.status_code == 429
    # The pool resets at the start of December.
    until = int((datetime(2026, 12, 1, tzinfo=UTC) - NOW).total_seconds())
    assert int(response.headers["retry-after"]) == until
    assert used(client, token) == 1000


# -- 503 --------------------------------------------------------------------------------------


def test_a_failing_source_is_503_and_not_charged(
    client: Client,
    token: str,
    source: CountingSource,
) -> None:
    source.fail = True
    response = post(client, token, planned(NOW))
    assert response.status_code == 503
    assert response.json()["detail"]
    assert source.calls == [3]
    usage = quota(client, token)
    assert (usage["used"], usage["daily_used"]) == (0, 0)


@pytest.mark.parametrize(
    "air",
    [
        {},
        {Pollutant.PM25: None, Pollutant.PM10: None, Pollutant.NO2: None, Pollutant.O3: None},
    ],
)
def test_a_source_without_data_is_503_and_not_charged(
    client: Client,
    token: str,
    source: CountingSource,
    air: Concentrations,
) -> None:
    source.air = air
    times = [NOW - timedelta(hours=2), NOW - timedelta(hours=1), NOW]
    response = post(client, token, track(times))
    assert response.status_code == 503
    assert response.json()["detail"]
    assert "60.17" not in response.text
    usage = quota(client, token)
    assert (usage["used"], usage["daily_used"]) == (0, 0)


def test_a_source_answering_the_wrong_number_of_samples_is_503(
    core: CleanAir,
    clock: ManualClock,
) -> None:
    class Short(CountingSource):
        async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
            return (await super().concentrations(samples))[:-1]

    sources = Sources(Short(), FakeGeolocator(None), FakeIp(), FakeNamer())
    short = CleanAir(core.store, core.keys, core.policy, clock, sources=sources)
    with TestClient(create_app(short)) as client:
        token = pair(short, client)
        assert post(client, token, planned(NOW)).status_code == 503
        assert used(client, token) == 0
