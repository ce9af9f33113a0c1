"""Route enrichment: per-waypoint measures, the summary, and the use case's rules."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import Caller
from cleanair_core.access.scopes import USER_SCOPES, Scope
from cleanair_core.air.activities import ActivityType, speed_m_s
from cleanair_core.air.exposure import EnvironmentType, breathed_air, personal_score
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.air.score import band_of
from cleanair_core.clock import ManualClock
from cleanair_core.credits.ledger import CreditLimits, Usage
from cleanair_core.errors import (
    CreditsExhausted,
    MissingScope,
    NotPremium,
    OutsideDataWindow,
    SourceUnavailable,
    Unprocessable,
)
from cleanair_core.geo import Point, distance_m
from cleanair_core.keys import TokenKeys
from cleanair_core.policy import Policy
from cleanair_core.ports import Sources, Store
from cleanair_core.routes.enrichment import Waypoint, enrich
from cleanair_core.service import CleanAir
from support.fakes import AIR, FakeIp, FakeNamer, FakeSource

KEYS = TokenKeys(b"route-enrichment-use-case-tests-key")
NOW = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)
POINTS = [Point(60.17, 24.94), Point(60.171, 24.95), Point(60.175, 24.955)]


def at(minutes: float) -> datetime:
    return NOW + timedelta(minutes=minutes)


def air(pm25: float, no2: float | None = 20.0) -> Concentrations:
    return {Pollutant.PM25: pm25, Pollutant.NO2: no2, Pollutant.O3: 40.0, Pollutant.PM10: None}


# -- enrich (pure) ----------------------------------------------------------------------------


def test_measures_are_per_waypoint_and_only_with_data() -> None:
    airs = [air(5.0), air(12.0, None), air(30.0)]
    route = enrich(POINTS, [at(0), at(5), at(10)], airs)
    assert set(route.measures) == {"clean_air_score", "pm25", "no2", "o3"}
    assert route.measures["clean_air_score"] == [personal_score(a) for a in airs]
    assert route.measures["pm25"] == [5.0, 12.0, 30.0]
    assert route.measures["no2"] == [20.0, None, 20.0]


def test_measures_follow_environment_and_activity() -> None:
    airs = [air(10.0), air(20.0)]
    route = enrich(
        POINTS[:2], [at(0), at(5)], airs, ActivityType.RUNNING_OUTDOOR, EnvironmentType.INDOOR
    )
    running, indoors = ActivityType.RUNNING_OUTDOOR, EnvironmentType.INDOOR
    expected = [personal_score(a, running, indoors) for a in airs]
    assert route.measures["clean_air_score"] == expected
    indoor = breathed_air(airs[0], EnvironmentType.INDOOR)[Pollutant.PM25]
    assert indoor is not None
    assert route.measures["pm25"][0] == round(indoor, 2)


def test_the_summary_is_time_weighted() -> None:
    # Leg 1 lasts 10 min, leg 2 lasts 50 min: weights 5, 30, 25 minutes.
    airs = [air(2.0), air(10.0), air(40.0)]
    route = enrich(POINTS, [at(0), at(10), at(60)], airs)
    scores = [personal_score(a) for a in airs]
    assert None not in scores
    weighted = (5 * scores[0] + 30 * scores[1] + 25 * scores[2]) / 60  # type: ignore[operator]
    summary = route.summary
    assert summary.clean_air_score is not None
    assert summary.clean_air_score.score == round(weighted, 1)
    band = band_of(round(weighted, 1))
    assert summary.clean_air_score.band == str(band.number)
    assert summary.clean_air_score.description == band.label
    assert summary.clean_air_score.colour == band.colour
    assert summary.average_pollutants[Pollutant.PM25] == round((5 * 2 + 30 * 10 + 25 * 40) / 60, 2)
    assert Pollutant.PM10 not in summary.average_pollutants


def test_a_one_waypoint_route_is_that_waypoint_for_no_time() -> None:
    route = enrich(POINTS[:1], [NOW], [air(8.0)])
    summary = route.summary
    assert summary.clean_air_score is not None
    assert summary.clean_air_score.score == personal_score(air(8.0))
    assert summary.average_pollutants[Pollutant.PM25] == 8.0
    assert summary.inhaled_dose == 0.0
    assert route.duration_s == 0.0


def test_a_route_without_any_data_has_an_empty_summary() -> None:
    route = enrich(POINTS[:2], [at(0), at(1)], [{}, {Pollutant.PM25: None}])
    assert route.measures == {}
    assert not route.has_data
    assert route.summary.clean_air_score is None
    assert route.summary.inhaled_dose is None
    assert route.summary.average_pollutants == {}


scored_air = st.fixed_dictionaries({p: st.one_of(st.none(), st.floats(0.0, 400.0)) for p in SCORED})


@given(
    st.lists(scored_air, min_size=1, max_size=30),
    st.lists(st.integers(0, 1800), min_size=29, max_size=29),
    st.sampled_from(list(ActivityType)),
    st.sampled_from(list(EnvironmentType)),
)
def test_the_route_score_lies_between_the_waypoint_scores(
    airs: list[Concentrations],
    gaps: list[int],
    activity: ActivityType,
    environment: EnvironmentType,
) -> None:
    times = [NOW]
    for seconds in gaps[: len(airs) - 1]:
        times.append(times[-1] + timedelta(seconds=seconds))
    points = [Point(60.0, 25.0 + i * 0.001) for i in range(len(airs))]
    route = enrich(points, times, airs, activity, environment)
    scores = [s for s in route.measures.get("clean_air_score", []) if s is not None]
    banded = route.summary.clean_air_score
    if not scores:
        assert banded is None
        return
    assert banded is not None
    assert min(scores) <= banded.score <= max(scores)
    assert banded.description == band_of(banded.score).label


# -- the use case -----------------------------------------------------------------------------


def setup(
    store: Store, source: FakeSource | None = None, limits: CreditLimits | None = None
) -> tuple[CleanAir, Caller, FakeSource]:
    source = source or FakeSource()
    policy = Policy(credits=limits or CreditLimits())
    core = CleanAir(
        store, KEYS, policy, ManualClock(NOW), sources=Sources(source, None, FakeIp(), FakeNamer())
    )
    core.add_user("alice")
    caller = Caller(uuid.uuid4(), Owner(OwnerKind.USER, "alice"), USER_SCOPES)
    return core, caller, source


def usage(core: CleanAir, caller: Caller) -> Usage:
    return core.store.usage(caller.owner.key, NOW)


def track(*minutes: float) -> list[Waypoint]:
    return [Waypoint(POINTS[i % len(POINTS)], at(m)) for i, m in enumerate(minutes)]


def bare(n: int) -> list[Waypoint]:
    return [Waypoint(POINTS[i % len(POINTS)]) for i in range(n)]


def enrich_with(core: CleanAir, caller: Caller, waypoints: Sequence[Waypoint], **kw: object):  # type: ignore[no-untyped-def]
    proof = core.authorize(caller, Scope.AQ_ROUTES)
    return asyncio.run(core.enrich_route(proof, waypoints=waypoints, **kw))  # type: ignore[arg-type]


def test_a_recorded_track_charges_one_credit_per_waypoint(store: Store) -> None:
    core, caller, source = setup(store)
    route = enrich_with(core, caller, track(0, 4, 9))
    assert usage(core, caller) == Usage(month=3, day=3)
    assert route.times == [at(0), at(4), at(9)]
    # Every waypoint at its own time, all in one batch.
    assert source.samples == [Sample(p, t) for p, t in zip(POINTS, route.times, strict=True)]


def test_the_whole_route_is_one_request_to_the_source(store: Store) -> None:
    batches: list[int] = []

    class Counting(FakeSource):
        async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
            batches.append(len(samples))
            return await super().concentrations(samples)

    core, caller, _ = setup(store, Counting())
    enrich_with(core, caller, bare(100), start_time=NOW)
    assert batches == [100]


def test_estimated_times_use_the_activity_speed(store: Store) -> None:
    core, caller, _ = setup(store)
    route = enrich_with(core, caller, bare(2), start_time=NOW, activity=ActivityType.CYCLING)
    expected = distance_m(POINTS[0], POINTS[1]) / speed_m_s(ActivityType.CYCLING)
    assert route.duration_s == pytest.approx(expected)


@pytest.mark.parametrize("count", [0, 101])
def test_waypoint_count_is_1_to_100(store: Store, count: int) -> None:
    core, caller, _ = setup(store, limits=CreditLimits(monthly=1000, daily=1000))
    with pytest.raises(Unprocessable):
        enrich_with(core, caller, bare(count), start_time=NOW)
    assert usage(core, caller) == Usage(0, 0)


def test_a_hundred_waypoints_are_accepted(store: Store) -> None:
    core, caller, _ = setup(store)
    enrich_with(core, caller, bare(100), start_time=NOW)
    assert usage(core, caller) == Usage(month=100, day=100)


@pytest.mark.parametrize(
    ("waypoints", "start"),
    [
        ([Waypoint(POINTS[0], NOW), Waypoint(POINTS[1])], None),
        ([Waypoint(POINTS[0]), Waypoint(POINTS[1])], None),
        (track(0, 5, 4), None),
    ],
    ids=["mixed", "no times", "backwards"],
)
def test_bad_times_are_unprocessable_and_free(
    store: Store, waypoints: list[Waypoint], start: datetime | None
) -> None:
    core, caller, source = setup(store)
    with pytest.raises(Unprocessable):
        enrich_with(core, caller, waypoints, start_time=start)
    assert usage(core, caller) == Usage(0, 0)
    assert source.samples == []


@pytest.mark.parametrize(
    ("waypoints", "start"),
    [
        (track(-30 * 24 * 60 - 1, 0), None),
        (track(0, 84 * 60 + 1), None),
        (bare(2), at(-30 * 24 * 60 - 1)),
        (bare(2), at(84 * 60 + 1)),
        (track(0, 1), at(84 * 60 + 1)),
        # Starting just inside the horizon, the estimated arrival lies beyond it.
        ([Waypoint(Point(60.0, 24.0)), Waypoint(Point(60.5, 24.0))], at(84 * 60 - 1)),
    ],
    ids=["old", "far", "old start", "far start", "far start on a track", "arrives too late"],
)
def test_times_outside_the_window_are_400_and_free(
    store: Store, waypoints: list[Waypoint], start: datetime | None
) -> None:
    core, caller, source = setup(store)
    with pytest.raises(OutsideDataWindow):
        enrich_with(core, caller, waypoints, start_time=start)
    assert usage(core, caller) == Usage(0, 0)
    assert source.samples == []


def test_the_window_edges_are_accepted(store: Store) -> None:
    core, caller, _ = setup(store)
    enrich_with(core, caller, track(-30 * 24 * 60, 0, 84 * 60))
    assert usage(core, caller) == Usage(month=3, day=3)


@pytest.mark.parametrize("fail", [True, False], ids=["outage", "no data"])
def test_no_data_is_refunded(store: Store, fail: bool) -> None:
    core, caller, _ = setup(store, FakeSource({Pollutant.PM25: None}, fail=fail))
    with pytest.raises(SourceUnavailable):
        enrich_with(core, caller, track(0, 1))
    assert usage(core, caller) == Usage(0, 0)


def test_data_at_one_waypoint_is_enough(store: Store) -> None:
    source = FakeSource(by_sample=lambda i, _: air(9.0) if i == 1 else {})
    core, caller, _ = setup(store, source)
    route = enrich_with(core, caller, track(0, 1, 2))
    assert route.measures["clean_air_score"] == [None, personal_score(air(9.0)), None]
    assert usage(core, caller) == Usage(month=3, day=3)


def test_a_route_must_fit_the_daily_burst(store: Store) -> None:
    core, caller, _source = setup(store, limits=CreditLimits(monthly=1000, daily=10))
    enrich_with(core, caller, bare(8), start_time=NOW)
    with pytest.raises(CreditsExhausted):
        enrich_with(core, caller, bare(3), start_time=NOW)
    assert usage(core, caller) == Usage(month=8, day=8)
    enrich_with(core, caller, bare(2), start_time=NOW)
    assert usage(core, caller) == Usage(month=10, day=10)


def test_scope_and_premium_are_checked(store: Store) -> None:
    core, caller, _ = setup(store)
    reader = Caller(uuid.uuid4(), caller.owner, frozenset({Scope.AQ_READ}))
    with pytest.raises(MissingScope):
        enrich_with(core, reader, track(0))
    core.set_premium("alice", False)
    with pytest.raises(NotPremium):
        enrich_with(core, caller, track(0))
    assert usage(core, caller) == Usage(0, 0)


def test_the_source_air_is_scored(store: Store) -> None:
    core, caller, _ = setup(store)
    route = enrich_with(core, caller, track(0, 10))
    assert route.measures["clean_air_score"] == [personal_score(AIR)] * 2
