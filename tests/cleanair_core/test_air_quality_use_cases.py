"""The score and forecast use cases over fake sources: locations, charging, refunds, windows."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

import pytest

from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import Authorized, Caller
from cleanair_core.access.scopes import USER_SCOPES, Scope
from cleanair_core.air.activities import ActivityType
from cleanair_core.air.exposure import EnvironmentType, personal_score
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.air.score import clean_air_score
from cleanair_core.air.wifi import WifiAccessPoint
from cleanair_core.clock import ManualClock
from cleanair_core.credits.ledger import Usage
from cleanair_core.errors import (
    LocationUnresolved,
    MissingScope,
    NotPremium,
    OutsideForecastWindow,
    SourceUnavailable,
    Unprocessable,
)
from cleanair_core.geo import Point
from cleanair_core.keys import TokenKeys
from cleanair_core.ports import Sources, Store
from cleanair_core.routes.enrichment import Waypoint
from cleanair_core.service import CleanAir
from support.fakes import (
    AIR,
    FINNISH_ADDRESS,
    HELSINKI,
    FakeGeolocator,
    FakeIp,
    FakeNamer,
    FakeSource,
)

KEYS = TokenKeys(b"air-quality-use-case-tests-key-32b")
SCAN = [WifiAccessPoint("00:11:22:33:44:55", -50), WifiAccessPoint("00:11:22:33:44:66", -60)]


def setup(
    store: Store,
    source: FakeSource | None = None,
    geolocator: FakeGeolocator | None = None,
    now: datetime = datetime(2026, 11, 22, 10, 15, tzinfo=UTC),
) -> tuple[CleanAir, Caller, ManualClock]:
    clock = ManualClock(now)
    sources = Sources(source or FakeSource(), geolocator, FakeIp(), FakeNamer())
    core = CleanAir(store, KEYS, clock=clock, sources=sources)
    core.add_user("alice")
    caller = Caller(uuid.uuid4(), Owner(OwnerKind.USER, "alice"), USER_SCOPES)
    return core, caller, clock


def read(core: CleanAir, caller: Caller) -> Authorized:
    return core.authorize(caller, Scope.AQ_READ)


def usage(core: CleanAir, caller: Caller) -> Usage:
    return core.store.usage(caller.owner.key, core.clock.now())


# -- score ------------------------------------------------------------------------------------


def test_score_at_coordinates_charges_one_credit(store: Store) -> None:
    source = FakeSource()
    core, caller, _ = setup(store, source)
    result = asyncio.run(core.score(read(core, caller), point=HELSINKI))
    assert result.score == clean_air_score(AIR)
    assert usage(core, caller) == Usage(month=1, day=1)
    # The current hour's value is asked for, at the given point.
    assert source.samples == [Sample(HELSINKI, datetime(2026, 11, 22, 10, tzinfo=UTC))]


@pytest.mark.parametrize(
    ("now", "ttl"),
    [
        (datetime(2026, 11, 22, 10, 15, tzinfo=UTC), 2700),
        (datetime(2026, 11, 22, 10, 0, tzinfo=UTC), 3600),
        (datetime(2026, 11, 22, 10, 59, 30, tzinfo=UTC), 60),  # bounded below
    ],
)
def test_ttl_counts_to_the_next_hourly_value(store: Store, now: datetime, ttl: int) -> None:
    core, caller, _ = setup(store, now=now)
    assert asyncio.run(core.score(read(core, caller), point=HELSINKI)).ttl == ttl


def test_coordinates_win_over_wifi_and_no_lookup_is_made(store: Store) -> None:
    geolocator = FakeGeolocator(Point(0.0, 0.0))
    source = FakeSource()
    core, caller, _ = setup(store, source, geolocator)
    asyncio.run(core.score(read(core, caller), point=HELSINKI, wifi=SCAN))
    assert geolocator.calls == 0
    assert source.samples[0].point == HELSINKI


def test_wifi_locates_the_point_when_there_are_no_coordinates(store: Store) -> None:
    where = Point(52.52, 13.40)
    source = FakeSource()
    core, caller, _ = setup(store, source, FakeGeolocator(where))
    asyncio.run(core.score(read(core, caller), wifi=SCAN))
    assert source.samples[0].point == where


@pytest.mark.parametrize("geolocator", [FakeGeolocator(None), None])
def test_an_unresolvable_scan_is_not_charged(store: Store, geolocator: FakeGeolocator) -> None:
    core, caller, _ = setup(store, geolocator=geolocator)
    with pytest.raises(LocationUnresolved):
        asyncio.run(core.score(read(core, caller), wifi=SCAN))
    assert usage(core, caller) == Usage(0, 0)


def test_no_location_at_all_is_unprocessable_and_free(store: Store) -> None:
    core, caller, _ = setup(store)
    with pytest.raises(Unprocessable):
        asyncio.run(core.score(read(core, caller)))
    assert usage(core, caller) == Usage(0, 0)


@pytest.mark.parametrize(
    "source", [FakeSource(fail=True), FakeSource({Pollutant.PM25: None}), FakeSource({})]
)
def test_an_unavailable_source_is_refunded(store: Store, source: FakeSource) -> None:
    core, caller, _ = setup(store, source)
    with pytest.raises(SourceUnavailable):
        asyncio.run(core.score(read(core, caller), point=HELSINKI))
    assert usage(core, caller) == Usage(0, 0)


def test_authorize_checks_scope_then_premium(store: Store) -> None:
    core, caller, _ = setup(store)
    routes_only = Caller(uuid.uuid4(), caller.owner, frozenset({Scope.ROUTES_PLAN}))
    with pytest.raises(MissingScope):
        core.authorize(routes_only, Scope.AQ_READ)
    core.set_premium("alice", False)
    with pytest.raises(NotPremium):
        core.authorize(caller, Scope.AQ_READ)
    assert core.authorize(caller, Scope.AQ_READ, premium=False).premium is False


def test_a_use_case_refuses_a_proof_made_for_other_checks(store: Store) -> None:
    core, caller, _ = setup(store)
    plans = core.authorize(caller, Scope.ROUTES_PLAN)
    unpaid = core.authorize(caller, Scope.AQ_READ, premium=False)
    for proof in (plans, unpaid):
        with pytest.raises(TypeError, match="authorize"):
            asyncio.run(core.score(proof, point=HELSINKI))
        with pytest.raises(TypeError, match="authorize"):
            asyncio.run(
                core.forecast(proof, day=date(2026, 11, 22), timezone="UTC", point=HELSINKI)
            )
    assert usage(core, caller) == Usage(0, 0)


# -- forecast ---------------------------------------------------------------------------------


def test_forecast_covers_the_local_day_and_charges_two(store: Store) -> None:
    core, caller, _ = setup(store)
    forecast = asyncio.run(
        core.forecast(
            read(core, caller), day=date(2026, 11, 23), timezone="Europe/Helsinki", point=HELSINKI
        )
    )
    assert forecast.location == "Helsinki, Finland"
    assert len(forecast.timestamps) == 24
    assert forecast.timestamps[0] == int(datetime(2026, 11, 22, 22, tzinfo=UTC).timestamp())
    assert set(forecast.measures) == {"clean_air_score", "pm25", "no2", "o3"}  # no PM10 data
    assert forecast.measures["clean_air_score"] == [clean_air_score(AIR)] * 24
    assert forecast.measures["pm25"] == [7.0] * 24
    assert usage(core, caller) == Usage(month=2, day=2)


def test_forecast_on_a_daylight_saving_day_has_23_or_25_hours(store: Store) -> None:
    core, caller, clock = setup(store, now=datetime(2026, 3, 28, 12, tzinfo=UTC))
    spring = asyncio.run(
        core.forecast(
            read(core, caller), day=date(2026, 3, 29), timezone="Europe/Helsinki", point=HELSINKI
        )
    )
    assert len(spring.timestamps) == 23
    assert all(len(values) == 23 for values in spring.measures.values())
    clock.set(datetime(2026, 10, 24, 12, tzinfo=UTC))
    autumn = asyncio.run(
        core.forecast(
            read(core, caller), day=date(2026, 10, 25), timezone="Europe/Helsinki", point=HELSINKI
        )
    )
    assert len(autumn.timestamps) == 25
    assert len(set(autumn.timestamps)) == 25


def test_forecast_adjusts_for_activity_and_environment(store: Store) -> None:
    core, caller, _ = setup(store)
    forecast = asyncio.run(
        core.forecast(
            read(core, caller),
            day=date(2026, 11, 22),
            timezone="UTC",
            point=HELSINKI,
            activity=ActivityType.RUNNING_OUTDOOR,
            environment=EnvironmentType.INDOOR,
        )
    )
    expected = personal_score(AIR, ActivityType.RUNNING_OUTDOOR, EnvironmentType.INDOOR)
    assert forecast.measures["clean_air_score"][0] == expected
    assert expected != clean_air_score(AIR)
    assert forecast.measures["pm25"][0] == pytest.approx(7.0 * 0.55)


def test_forecast_and_enrichment_take_the_contracts_strings_for_the_enums(store: Store) -> None:
    """An embedder may pass "running_outdoor" as the contract writes it, not only the enum."""
    core, caller, _ = setup(store)
    forecast = asyncio.run(
        core.forecast(
            read(core, caller),
            day=date(2026, 11, 22),
            timezone="UTC",
            point=HELSINKI,
            activity="running_outdoor",
            environment="indoor",
        )
    )
    expected = personal_score(AIR, ActivityType.RUNNING_OUTDOOR, EnvironmentType.INDOOR)
    assert forecast.measures["clean_air_score"][0] == expected
    route = asyncio.run(
        core.enrich_route(
            core.authorize(caller, Scope.AQ_ROUTES),
            waypoints=[Waypoint(HELSINKI), Waypoint(Point(60.171, 24.942))],
            start_time=datetime(2026, 11, 22, 10, tzinfo=UTC),
            activity="running_outdoor",
            environment="indoor",
        )
    )
    assert route.measures["clean_air_score"][0] == expected
    assert usage(core, caller) == Usage(4, 4)


def test_strings_outside_the_contracts_enums_are_unprocessable_and_free(store: Store) -> None:
    core, caller, _ = setup(store)
    bads: list[dict[str, Any]] = [{"activity": "Running"}, {"environment": "outside"}]
    for bad in bads:
        with pytest.raises(Unprocessable):
            asyncio.run(
                core.forecast(
                    read(core, caller),
                    day=date(2026, 11, 22),
                    timezone="UTC",
                    point=HELSINKI,
                    **bad,
                )
            )
        with pytest.raises(Unprocessable):
            asyncio.run(
                core.enrich_route(
                    core.authorize(caller, Scope.AQ_ROUTES),
                    waypoints=[Waypoint(HELSINKI), Waypoint(Point(60.171, 24.942))],
                    start_time=datetime(2026, 11, 22, 10, tzinfo=UTC),
                    **bad,
                )
            )
    assert usage(core, caller) == Usage(0, 0)


def test_forecast_outside_the_window_is_refused_and_free(store: Store) -> None:
    core, caller, _ = setup(store)
    for day in (date(2026, 11, 21), date(2026, 11, 26)):
        with pytest.raises(OutsideForecastWindow):
            asyncio.run(core.forecast(read(core, caller), day=day, timezone="UTC", point=HELSINKI))
    assert usage(core, caller) == Usage(0, 0)


def test_forecast_with_an_unknown_timezone_is_unprocessable(store: Store) -> None:
    core, caller, _ = setup(store)
    with pytest.raises(Unprocessable):
        asyncio.run(
            core.forecast(
                read(core, caller), day=date(2026, 11, 22), timezone="Mars/Base", point=HELSINKI
            )
        )
    assert usage(core, caller) == Usage(0, 0)


def test_forecast_without_coordinates_uses_the_callers_address(store: Store) -> None:
    source = FakeSource()
    core, caller, _ = setup(store, source)
    forecast = asyncio.run(
        core.forecast(
            read(core, caller),
            day=date(2026, 11, 22),
            timezone="UTC",
            client_address=FINNISH_ADDRESS,
        )
    )
    assert forecast.location == "Finland"
    assert source.samples[0].point == HELSINKI
    with pytest.raises(LocationUnresolved):
        asyncio.run(
            core.forecast(
                read(core, caller),
                day=date(2026, 11, 22),
                timezone="UTC",
                client_address="127.0.0.1",
            )
        )
    assert usage(core, caller) == Usage(month=2, day=2)


def test_forecast_refunds_when_the_source_fails(store: Store) -> None:
    core, caller, _ = setup(store, FakeSource(fail=True))
    with pytest.raises(SourceUnavailable):
        asyncio.run(
            core.forecast(
                read(core, caller), day=date(2026, 11, 22), timezone="UTC", point=HELSINKI
            )
        )
    assert usage(core, caller) == Usage(0, 0)


def test_an_authorization_proof_spares_the_second_check_only_for_its_scope(store: Store) -> None:
    core, caller, _ = setup(store)
    proof = core.authorize(caller, Scope.AQ_READ)
    core.set_premium("alice", False)  # lapses after this request was authorised
    assert asyncio.run(core.score(proof, point=HELSINKI)).score == clean_air_score(AIR)
    assert usage(core, caller) == Usage(1, 1)


@pytest.mark.parametrize(
    ("interval", "now", "ttl"),
    [
        (7200, datetime(2026, 11, 22, 10, 15, tzinfo=UTC), 3600),  # bounded above
        (600, datetime(2026, 11, 22, 10, 15, tzinfo=UTC), 300),  # the source's own cadence
        (3600, datetime(2026, 11, 22, 10, 15, 0, 500_000, tzinfo=UTC), 2700),  # rounds up
    ],
)
def test_ttl_follows_the_sources_cadence_within_bounds(
    store: Store, interval: int, now: datetime, ttl: int
) -> None:
    source = FakeSource(update_interval=interval)
    core, caller, _ = setup(store, source, now=now)
    assert asyncio.run(core.score(read(core, caller), point=HELSINKI)).ttl == ttl
    hour = source.samples[0].at
    assert hour.timestamp() % interval == 0
    assert hour <= now


def test_a_wifi_service_outage_is_refunded(store: Store) -> None:
    core, caller, _ = setup(store, geolocator=FakeGeolocator(None, fail=True))
    with pytest.raises(SourceUnavailable):
        asyncio.run(core.score(read(core, caller), wifi=SCAN))
    assert usage(core, caller) == Usage(0, 0)


def test_forecast_hours_without_data_are_null_and_sparse_pollutants_kept(store: Store) -> None:
    def night_only(i: int, sample: Sample) -> Concentrations:
        if i < 6:  # data for the first six hours only, and SO2 only in the first hour
            return {Pollutant.PM25: 12.3456, Pollutant.SO2: 3.0 if i == 0 else None}
        return {Pollutant.PM25: None}

    core, caller, _ = setup(store, FakeSource(by_sample=night_only))
    forecast = asyncio.run(
        core.forecast(read(core, caller), day=date(2026, 11, 22), timezone="UTC", point=HELSINKI)
    )
    scores = forecast.measures["clean_air_score"]
    assert scores[:6] == [clean_air_score({Pollutant.PM25: 12.3456})] * 6
    assert scores[6:] == [None] * 18
    assert forecast.measures["pm25"][:6] == [12.35] * 6  # two decimals are plenty
    assert forecast.measures["so2"] == [3.0] + [None] * 23
    assert set(forecast.measures) == {"clean_air_score", "pm25", "so2"}


def test_a_source_answering_the_wrong_number_of_samples_is_unavailable(store: Store) -> None:
    core, caller, _ = setup(store, FakeSource(by_sample=lambda i, s: {Pollutant.PM25: 1.0}))
    short = core.sources.air_quality  # type: ignore[union-attr]

    async def fewer(samples: Sequence[Sample]) -> list[Concentrations]:
        return [{Pollutant.PM25: 1.0}] * (len(samples) - 1)

    short.concentrations = fewer  # type: ignore[method-assign]
    with pytest.raises(SourceUnavailable):
        asyncio.run(
            core.forecast(
                read(core, caller), day=date(2026, 11, 22), timezone="UTC", point=HELSINKI
            )
        )
    assert usage(core, caller) == Usage(0, 0)
