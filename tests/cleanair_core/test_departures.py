"""The best time to go: a trip planned at every start time of a window (issue 24)."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleanair_core.air.activities import speed_m_s
from cleanair_core.air.dose import GUIDELINE_LEVELS
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import AirQualitySource, Sample
from cleanair_core.errors import OutsideDataWindow, PlanRejected, PlanTooLong, Unprocessable
from cleanair_core.geo import Point, distance_m
from cleanair_core.routes.departures import check_departures, plan_departures, saved_pct
from cleanair_core.routes.enrichment import enrich_route
from cleanair_core.routes.network import FloatArray, PlanActivityType, StreetNetwork
from cleanair_core.routes.network_air import NetworkAir
from cleanair_core.routes.planner import plan_graph, plan_routes
from cleanair_core.routes.plans import DeparturesRequest, PlanRequest
from cleanair_core.routes.results import DeparturesResult
from cleanair_sources.street_router import LoadedNetworks
from support.networks import ORIGIN, grid

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
WALK = PlanActivityType.WALKING
COLS = 12


class HourlyAir:
    """NO2 per hour (`factors[k]` x a street pattern), the k-th hour from NOW: the row-1
    street is cleaner than row 0 at every hour, so routes keep their shape and only the
    hour changes the dose."""

    update_interval = 3600

    def __init__(self, factors: Sequence[float]) -> None:
        self.factors = list(factors)
        self.calls = 0

    def factor(self, at: datetime) -> float:
        return self.factors[int((at - NOW).total_seconds() // 3600)]

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.calls += 1
        return [
            {
                Pollutant.NO2: self.factor(s.at)
                * (60.0 if s.point.lat < ORIGIN.lat + 5e-4 else 20.0),
                Pollutant.PM25: 5.0,
            }
            for s in samples
        ]


class DriftingGriddedAir:
    """A source that computes its values, moving within the hour as the embedded model does:
    NO2 rises by `rate` of itself each minute, from a street pattern; answers arrays too."""

    update_interval = 3600

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.hours: list[datetime] = []  # of every array asked

    def _no2(self, lat: FloatArray, at: datetime) -> FloatArray:
        minutes = (at - NOW).total_seconds() / 60
        street = np.where(lat < ORIGIN.lat + 5e-4, 60.0, 20.0)
        no2: FloatArray = street * (1 + self.rate * minutes)
        return no2

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        return [
            {Pollutant.NO2: float(self._no2(np.array([s.point.lat]), s.at)[0]), Pollutant.PM25: 5.0}
            for s in samples
        ]

    def air_at_hour(self, lats: FloatArray, lons: FloatArray, hour: datetime) -> FloatArray:
        self.hours.append(hour)
        air = np.full((np.asarray(lats).size, len(SCORED)), np.nan)
        air[:, SCORED.index(Pollutant.NO2)] = self._no2(np.asarray(lats), hour)
        air[:, SCORED.index(Pollutant.PM25)] = 5.0
        return air


def trip(network: StreetNetwork) -> tuple[Point, Point]:
    return network.node(0), network.node(COLS - 1)


def departures(
    source: AirQualitySource,
    earliest: datetime = NOW,
    latest: datetime = NOW + timedelta(hours=3),
    step: timedelta = timedelta(minutes=30),
) -> DeparturesResult:
    network = grid(2, COLS)
    start, end = trip(network)
    request = DeparturesRequest(start, end, WALK, earliest, latest, step)
    return asyncio.run(plan_departures(request, LoadedNetworks([network]), source))


# -- the request ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("span", "step", "count"),
    [
        (timedelta(0), timedelta(minutes=30), 1),
        (timedelta(hours=3), timedelta(minutes=30), 7),
        (timedelta(hours=3, minutes=20), timedelta(minutes=30), 7),  # latest off the steps
        (timedelta(hours=24), timedelta(minutes=5), 289),
        (timedelta(hours=1), timedelta(minutes=240), 1),
    ],
)
def test_start_times_run_from_the_earliest_a_step_apart_up_to_the_latest(
    span: timedelta, step: timedelta, count: int
) -> None:
    request = DeparturesRequest(ORIGIN, ORIGIN, WALK, NOW, NOW + span, step)
    times = request.start_times
    assert len(times) == count
    assert times[0] == NOW
    assert all(b - a == step for a, b in itertools.pairwise(times))
    assert times[-1] <= NOW + span < times[-1] + step


def test_the_default_step_is_half_an_hour_and_times_are_kept_in_utc() -> None:
    helsinki = timezone(timedelta(hours=2))
    request = DeparturesRequest(
        ORIGIN,
        ORIGIN,
        WALK,
        NOW.astimezone(helsinki),
        NOW.astimezone(helsinki) + timedelta(hours=1),
    )
    assert request.step == timedelta(minutes=30)
    assert request.start_times == [NOW, NOW + timedelta(minutes=30), NOW + timedelta(hours=1)]
    assert all(at.tzinfo is UTC for at in request.start_times)


@pytest.mark.parametrize(
    ("earliest", "latest", "step"),
    [
        (NOW, NOW - timedelta(seconds=1), timedelta(minutes=30)),  # backwards
        (NOW, NOW + timedelta(hours=24, seconds=1), timedelta(minutes=30)),  # over 24 h
        (NOW, NOW + timedelta(hours=1), timedelta(minutes=4, seconds=59)),  # step too short
        (NOW, NOW + timedelta(hours=1), timedelta(minutes=240, seconds=1)),  # step too long
        (NOW, NOW + timedelta(hours=1), timedelta(0)),
        (NOW.replace(tzinfo=None), NOW + timedelta(hours=1), timedelta(minutes=30)),  # naive
        (NOW, (NOW + timedelta(hours=1)).replace(tzinfo=None), timedelta(minutes=30)),
    ],
)
def test_a_malformed_window_is_unprocessable(
    earliest: datetime, latest: datetime, step: timedelta
) -> None:
    with pytest.raises(Unprocessable):
        DeparturesRequest(ORIGIN, ORIGIN, WALK, earliest, latest, step)


def test_the_window_must_lie_in_the_data_window_and_the_trip_within_15_km() -> None:
    near = DeparturesRequest(ORIGIN, ORIGIN, WALK, NOW, NOW + timedelta(hours=24))
    check_departures(near, NOW)
    check_departures(near, NOW + timedelta(days=30))  # earliest exactly 30 days ago
    with pytest.raises(OutsideDataWindow):
        check_departures(near, NOW - timedelta(hours=61))  # latest beyond now + 84 h
    with pytest.raises(OutsideDataWindow):
        check_departures(near, NOW + timedelta(days=30, seconds=1))
    far = DeparturesRequest(ORIGIN, Point(ORIGIN.lat + 0.14, ORIGIN.lon), WALK, NOW, NOW)
    with pytest.raises(PlanTooLong):
        check_departures(far, NOW)


# -- the result ----------------------------------------------------------------------------


def test_every_departure_is_its_plans_least_dose_route() -> None:
    source = HourlyAir([3.0, 1.0, 2.0, 0.5])
    result = departures(source)
    network = grid(2, COLS)
    start, end = trip(network)
    assert [d.start_time for d in result.departures] == [
        NOW + k * timedelta(minutes=30) for k in range(7)
    ]
    for departure in result.departures:
        plan = asyncio.run(
            plan_routes(
                PlanRequest(start, end, WALK, departure.start_time),
                LoadedNetworks([network]),
                source,
            )
        )
        least = plan.routes[plan.best_route_index]
        assert departure.dose == least.route.summary.inhaled_dose
        assert departure.distance == least.distance
        score = least.route.summary.clean_air_score
        assert score is not None
        assert departure.clean_air_score == score.score
        assert all(
            departure.dose is not None
            and r.route.summary.inhaled_dose is not None
            and departure.dose <= r.route.summary.inhaled_dose
            for r in plan.routes
        )


def test_the_best_is_the_least_dose_and_saves_against_the_direct_route_at_the_earliest() -> None:
    source = HourlyAir([3.0, 1.0, 2.0, 0.5])
    result = departures(source)
    doses = [d.dose for d in result.departures if d.dose is not None]
    assert len(doses) == len(result.departures)
    assert result.best.dose == min(doses)
    assert result.best.start_time == NOW + timedelta(hours=3)  # the cleanest hour
    assert result.best.route.route.summary.inhaled_dose == result.best.dose
    network = grid(2, COLS)
    start, end = trip(network)
    first = asyncio.run(
        plan_routes(PlanRequest(start, end, WALK, NOW), LoadedNetworks([network]), source)
    )
    assert result.baseline_dose == first.original_dose  # the direct route, not the cleanest
    assert first.original_dose is not None
    assert result.best.dose is not None
    assert result.baseline_dose != result.departures[0].dose  # the detour at NOW is cleaner
    expected = (first.original_dose - result.best.dose) / first.original_dose * 100
    assert result.dose_saved_pct == pytest.approx(expected, rel=1e-12)
    assert result.dose_saved_pct is not None
    assert result.dose_saved_pct > 80


def test_saved_pct_needs_both_doses_and_a_positive_baseline() -> None:
    assert saved_pct(1.0, 4.0) == 75.0
    assert saved_pct(5.0, 4.0) == -25.0
    assert saved_pct(None, 4.0) is None
    assert saved_pct(1.0, None) is None
    assert saved_pct(1.0, 0.0) is None


def test_departures_of_one_hour_share_its_node_air() -> None:
    source = DriftingGriddedAir(rate=0.01)
    network = grid(2, COLS)
    start, end = trip(network)
    cache = NetworkAir()
    request = DeparturesRequest(
        start, end, WALK, NOW, NOW + timedelta(minutes=30), timedelta(minutes=5)
    )
    asyncio.run(plan_departures(request, LoadedNetworks([network]), source, network_air=cache))
    # Seven plans whose walks all end within the hour: the node air of that hour and the
    # next (each node's is interpolated between them) is computed once; a cache per plan
    # would compute it seven times.
    single = DriftingGriddedAir(rate=0.01)
    asyncio.run(plan_routes(PlanRequest(start, end, WALK, NOW), LoadedNetworks([network]), single))
    assert source.hours == single.hours == [NOW, NOW + timedelta(hours=1)]
    assert cache.network_hours == 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # Tenths: hours whose air differs by a rounding error (0.1 and 0.1 + 1 ulp) would give
    # doses that differ by less than their own rounding.
    st.lists(st.integers(1, 100).map(lambda tenths: tenths / 10), min_size=2, max_size=6),
    st.sampled_from([timedelta(minutes=30), timedelta(minutes=60)]),
)
def test_the_best_departure_is_one_in_the_cleanest_hour(
    factors: list[float], step: timedelta
) -> None:
    """Walks of minutes on a grid, each within the hour it starts in: the best departure is
    one whose hour has the least air, and none is cleaner than another of a cleaner hour."""
    source = HourlyAir(factors)
    result = departures(source, latest=NOW + timedelta(hours=len(factors) - 1), step=step)
    hours = [source.factor(d.start_time) for d in result.departures]
    assert source.factor(result.best.start_time) == min(hours)
    for a, b in zip(result.departures, hours, strict=True):
        for c, d in zip(result.departures, hours, strict=True):
            if b < d:
                assert a.dose is not None
                assert c.dose is not None
                assert a.dose < c.dose


# -- the dose a departure reports is the enrichment endpoint's ------------------------------


def test_a_plan_reports_the_dose_enrichment_reports_from_a_source_that_drifts() -> None:
    """The node air is each hour's start; a source that computes its values moves within
    the hour. Each route's dose is the one `enrich_route` gives for its waypoints and times
    (the old planner reported the air of the hour's start, far off these)."""
    source = DriftingGriddedAir(rate=0.02)
    network = grid(2, COLS)
    start, end = trip(network)
    for minutes in (0, 20, 55):  # the last walk crosses the hour
        at = NOW + timedelta(minutes=minutes)
        plan = asyncio.run(
            plan_routes(PlanRequest(start, end, WALK, at), LoadedNetworks([network]), source)
        )
        for planned in plan.routes:
            route = planned.route
            enriched = asyncio.run(enrich_route(source, route.points, route.times, WALK.activity))
            assert route.summary.inhaled_dose == pytest.approx(
                enriched.summary.inhaled_dose, rel=1e-9
            )


@pytest.mark.parametrize("minutes", [0, 20, 55])  # the last walk crosses the hour
def test_the_search_weighs_the_air_when_each_node_is_walked(minutes: int) -> None:
    """From a source that moves within the hour, the search's edge doses are the air when
    the direct route walks each node (its earliest arrival), not the hour's start: for air
    changing at a steady rate, exactly (issue 24: routes are searched with the air at the
    times they are walked)."""
    source = DriftingGriddedAir(rate=0.02)
    network = grid(2, COLS)
    start, end = trip(network)
    at = NOW + timedelta(minutes=minutes)
    request = PlanRequest(start, end, WALK, at)
    graph = asyncio.run(plan_graph(request, LoadedNetworks([network]), source))
    edges = np.asarray(graph.baseline.edges, dtype=np.intp)
    walked = np.concatenate([[0.0], np.cumsum(network.edge_length[edges])])
    seconds = walked / speed_m_s(WALK.activity)
    nodes = np.asarray(graph.baseline.nodes, dtype=np.intp)
    loads = np.array(
        [
            (
                float(source._no2(network.node_lat[[n]], at + timedelta(seconds=t))[0])
                / GUIDELINE_LEVELS[Pollutant.NO2]
                + 5.0 / GUIDELINE_LEVELS[Pollutant.PM25]
            )
            / 2
            for n, t in zip(nodes.tolist(), seconds.tolist(), strict=True)
        ]
    )
    expected = network.edge_length[edges] * (loads[:-1] + loads[1:]) / 2
    assert graph.doses[edges] == pytest.approx(expected, rel=1e-9)


class DriftingAir:
    """`DriftingGriddedAir` asked sample by sample only, as a source that waits on the
    network is (Open-Meteo, and street level over it)."""

    update_interval = 3600

    def __init__(self, rate: float) -> None:
        self._gridded = DriftingGriddedAir(rate)

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        return await self._gridded.concentrations(samples)


@pytest.mark.parametrize("kind", [DriftingGriddedAir, DriftingAir])
@pytest.mark.parametrize("minutes", [5, 55])  # the walk from :55 crosses the hour
def test_the_proof_bounds_air_that_clears_while_a_detour_walks(
    kind: type[DriftingGriddedAir | DriftingAir], minutes: int
) -> None:
    """Air falling within the hour is cleaner for a detour reaching a node later than the
    search weighed it: the least doses the proof uses are below the search's there (never
    above anywhere). Rising air meets no detour cleaner: the search's own doses bound all
    (an hour's start before a node can be reached, cleaner than any time it can, is not
    among the times weighed)."""
    network = grid(2, COLS)
    start, end = trip(network)
    request = PlanRequest(start, end, WALK, NOW + timedelta(minutes=minutes))
    networks = LoadedNetworks([network])
    clearing = asyncio.run(plan_graph(request, networks, kind(rate=-0.01)))
    usable = np.isfinite(clearing.doses)
    assert np.all(clearing.least_doses[usable] <= clearing.doses[usable])
    assert np.any(clearing.least_doses[usable] < clearing.doses[usable] * (1 - 1e-6))
    rising = asyncio.run(plan_graph(request, networks, kind(rate=0.01)))
    assert rising.least_doses is rising.doses


class SawtoothAir:
    """An hourly background as Open-Meteo's is at street level, exaggerated: NO2 falls
    through each hour from twice the street's value to once, and jumps back at the hour.
    Sample by sample only."""

    update_interval = 3600

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        return [
            {
                Pollutant.NO2: (60.0 if s.point.lat < ORIGIN.lat + 5e-4 else 20.0)
                * (2 - (s.at.minute * 60 + s.at.second + s.at.microsecond / 1e6) / 3600),
                Pollutant.PM25: 5.0,
            }
            for s in samples
        ]


def test_the_proof_bounds_the_air_at_the_end_of_an_hour_before_it_jumps() -> None:
    """A detour reaching a node just before the hour meets the hour's cleanest air, which
    neither end of the times it can be reached nor the next hour's start has: the least
    doses the proof uses are the air a microsecond before the hour, where a node can be
    reached on both sides of it."""
    network = grid(2, COLS)
    start, end = trip(network)
    request = PlanRequest(start, end, WALK, NOW + timedelta(minutes=50))
    graph = asyncio.run(plan_graph(request, LoadedNetworks([network]), SawtoothAir()))
    usable = np.isfinite(graph.doses)
    quiet = (20.0 / GUIDELINE_LEVELS[Pollutant.NO2] + 5.0 / GUIDELINE_LEVELS[Pollutant.PM25]) / 2
    least_load = (graph.least_doses[usable] / network.edge_length[usable]).min()
    assert least_load == pytest.approx(quiet, rel=1e-6)


def test_helsinki_departures_report_the_enrichment_endpoints_doses() -> None:
    """The shipped network, the embedded model at street level: departures across hour
    changes report each route's dose within 1 % of what enrichment gives (bench/departures.py
    measures more walks)."""
    from cleanair_core.air.street_level import street_level_air
    from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE
    from cleanair_sources.embedded_model import EmbeddedModel
    from cleanair_sources.gazetteer import Gazetteer
    from cleanair_sources.osm_import import import_network
    from cleanair_sources.street_increments import NetworkIncrements

    network = import_network(DEFAULT_NETWORK_FILE, "helsinki")
    model = EmbeddedModel(Gazetteer.load())
    air = street_level_air(model, model, NetworkIncrements([network]))
    networks = LoadedNetworks([network])
    cache = NetworkAir()
    rng = random.Random(24)
    walkable = np.unique(network.edge_from[network.usable(WALK)]).tolist()
    rush = datetime(2026, 11, 24, 5, 50, tzinfo=UTC)  # 07:50 in Helsinki
    checked = 0
    while checked < 3:
        start, end = (network.node(int(rng.choice(walkable))) for _ in range(2))
        if not 500 <= distance_m(start, end) <= 2000:
            continue
        request = DeparturesRequest(
            start, end, WALK, rush, rush + timedelta(hours=1), timedelta(minutes=20)
        )
        try:
            result = asyncio.run(plan_departures(request, networks, air, network_air=cache))
        except PlanRejected:  # a start on an island of the extract: another pair
            continue
        checked += 1
        for departure in result.departures:
            plan = PlanRequest(start, end, WALK, departure.start_time)
            planned = asyncio.run(plan_routes(plan, networks, air, network_air=cache))
            route = planned.routes[planned.best_route_index].route
            assert departure.dose == route.summary.inhaled_dose
            enriched = asyncio.run(enrich_route(air, route.points, route.times, WALK.activity))
            assert enriched.summary.inhaled_dose is not None
            assert departure.dose == pytest.approx(enriched.summary.inhaled_dose, rel=0.01)
