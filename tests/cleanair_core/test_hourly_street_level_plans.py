"""One air for planning and describing over an hourly source at street level (issue 30).

An hourly background (Open-Meteo's CAMS: one value per cell and UTC hour) downscaled to street
level still moves within the hour: the traffic factor follows the local time of day. The
enrichment endpoint asks it for each waypoint at its own time; a plan's search and the doses
it reports must use that same air, or its claims ("18 % less pollution inhaled", "no route cuts
3 % or more") are not true by the endpoint's dose. Walks start at :45, so they cross the hour,
where the background jumps.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import AirQualitySource, Sample
from cleanair_core.air.street_level import GridCell, street_level_air
from cleanair_core.errors import PlanRejected
from cleanair_core.geo import Point, distance_m
from cleanair_core.routes.departures import plan_departures
from cleanair_core.routes.enrichment import enrich_route
from cleanair_core.routes.network import Path, PlanActivityType, StreetNetwork
from cleanair_core.routes.network_air import NetworkAir
from cleanair_core.routes.planner import MATERIAL_REDUCTION_PCT, MAX_DETOUR, plan_graph, plan_routes
from cleanair_core.routes.plans import DeparturesRequest, PlanRequest
from cleanair_core.routes.results import PlanResult
from cleanair_sources.street_router import LoadedNetworks

WALK = PlanActivityType.WALKING
#: 07:45 local solar time in Helsinki: the morning's traffic peaks, then falls, in the walk.
START = datetime(2026, 11, 24, 5, 45, tzinfo=UTC)
#: Each UTC hour's background as a multiple of a CAMS-like one: far apart from hour to hour.
HOUR_FACTORS = (1.0, 2.5, 0.6, 1.8)
#: The doses must agree to rounding: both are the same sum over the same air.
REL = 1e-9


class HourlyCells:
    """A CAMS-like background as Open-Meteo answers it: one value per 0.1 degree cell and
    UTC hour (the hour's value for every instant in it), changing strongly between hours."""

    update_interval = 3600

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        answers: list[Concentrations] = []
        for sample in samples:
            f = HOUR_FACTORS[sample.at.hour % len(HOUR_FACTORS)]
            answers.append(
                {
                    Pollutant.PM25: 6.0 * f,
                    Pollutant.PM10: 12.0 * f,
                    Pollutant.NO2: 15.0 * f,
                    Pollutant.O3: 55.0 / f,
                    Pollutant.SO2: 1.0,
                }
            )
        return answers

    def cell_of(self, lat: float, lon: float) -> GridCell:
        south, west = np.floor(lat * 10) / 10, np.floor(lon * 10) / 10
        return GridCell(float(south), float(west), float(south) + 0.1, float(west) + 0.1)


@pytest.fixture(scope="module")
def helsinki() -> tuple[StreetNetwork, AirQualitySource]:
    from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE
    from cleanair_sources.osm_import import import_network
    from cleanair_sources.street_increments import NetworkIncrements

    network = import_network(DEFAULT_NETWORK_FILE, "helsinki")
    background = HourlyCells()
    return network, street_level_air(background, background, NetworkIncrements([network]))


def walks(network: StreetNetwork, count: int, seed: int) -> list[tuple[Point, Point]]:
    """Walks of 1.0 to 1.8 km (13 to 23 minutes): from :45 each crosses the hour."""
    rng = random.Random(seed)
    walkable = np.unique(network.edge_from[network.usable(WALK)]).tolist()
    found: list[tuple[Point, Point]] = []
    while len(found) < count:
        start, end = (network.node(int(rng.choice(walkable))) for _ in range(2))
        if 1000 <= distance_m(start, end) <= 1800:
            found.append((start, end))
    return found


def enriched_dose(air: AirQualitySource, points: list[Point], times: list[datetime]) -> float:
    """The dose `POST /v1/airquality/routes` reports for these waypoints and times."""
    route = asyncio.run(enrich_route(air, points, times, WALK.activity))
    assert route.summary.inhaled_dose is not None
    return route.summary.inhaled_dose


def other_routes(
    network: StreetNetwork,
    air: AirQualitySource,
    request: PlanRequest,
    rng: np.random.Generator,
) -> list[Path]:
    """Routes within the detour limit found with randomly weighted street lengths: a
    sample of the detours the direct route's words speak of, found without the dose."""
    graph = asyncio.run(plan_graph(request, LoadedNetworks([network]), air))
    search = graph.search(WALK)
    found: list[Path] = []
    for _ in range(20):
        costs = network.edge_length * np.exp(rng.uniform(0.0, 1.5, network.edge_count))
        path = search(costs, None)
        if path is None or not path.edges:
            continue
        length = float(network.edge_length[np.asarray(path.edges)].sum())
        if length <= graph.shortest * (1 + MAX_DETOUR) and path not in found:
            found.append(path)
    return found


def path_dose(
    network: StreetNetwork, air: AirQualitySource, path: Path, start_time: datetime
) -> float:
    from cleanair_core.air.activities import speed_m_s
    from cleanair_core.routes.times import estimated_times

    points = [network.node(i) for i in path.nodes]
    times = estimated_times(points, start_time, speed_m_s(WALK.activity))
    return enriched_dose(air, points, times)


def check_claims(
    network: StreetNetwork,
    air: AirQualitySource,
    request: PlanRequest,
    plan: PlanResult,
    rng: np.random.Generator,
) -> None:
    """Every route's dose is the enrichment endpoint's; what each goal says holds by it."""
    doses = [
        enriched_dose(air, planned.route.points, planned.route.times) for planned in plan.routes
    ]
    for planned, dose in zip(plan.routes, doses, strict=True):
        assert planned.route.summary.inhaled_dose == pytest.approx(dose, rel=REL)
    direct = doses[-1]
    for planned, dose in zip(plan.routes[:-1], doses[:-1], strict=True):
        cut = (1 - dose / direct) * 100
        assert cut >= MATERIAL_REDUCTION_PCT
        assert planned.goal.description.startswith(f"{cut:.0f} % less pollution inhaled")
    if len(plan.routes) > 1:
        return
    title = plan.routes[-1].goal.title
    description = plan.routes[-1].goal.description
    for path in other_routes(network, air, request, rng):
        cut = (1 - path_dose(network, air, path, request.start_time) / direct) * 100
        if title == "Direct route is the cleanest":
            assert cut <= 1e-7, description
        elif "cuts the pollution inhaled by" in description:
            assert cut < MATERIAL_REDUCTION_PCT, description


def test_plans_crossing_the_hour_report_and_claim_by_the_enrichment_endpoints_dose(
    helsinki: tuple[StreetNetwork, AirQualitySource],
) -> None:
    network, air = helsinki
    networks = LoadedNetworks([network])
    cache = NetworkAir()
    rng = np.random.default_rng(30)
    offered = proved = 0
    for start, end in walks(network, 8, seed=32):  # 3 offer alternatives, 5 prove
        request = PlanRequest(start, end, WALK, START)
        try:
            plan = asyncio.run(plan_routes(request, networks, air, network_air=cache))
        except PlanRejected:  # a start on an island of the extract
            continue
        assert plan.routes[-1].route.times[-1] > START + timedelta(minutes=15)  # crosses
        check_claims(network, air, request, plan, rng)
        offered += len(plan.routes) - 1
        proved += plan.routes[-1].goal.title != "Shortest route"
    assert offered >= 3
    assert proved >= 3


def test_departures_crossing_the_hour_report_the_enrichment_endpoints_dose(
    helsinki: tuple[StreetNetwork, AirQualitySource],
) -> None:
    network, air = helsinki
    start, end = walks(network, 1, seed=31)[0]
    request = DeparturesRequest(
        start, end, WALK, START - timedelta(minutes=30), START, timedelta(minutes=15)
    )
    result = asyncio.run(plan_departures(request, LoadedNetworks([network]), air))
    for departure in result.departures:
        plan = asyncio.run(
            plan_routes(
                PlanRequest(start, end, WALK, departure.start_time), LoadedNetworks([network]), air
            )
        )
        route = plan.routes[plan.best_route_index].route
        assert departure.dose == route.summary.inhaled_dose
        assert departure.dose == pytest.approx(
            enriched_dose(air, route.points, route.times), rel=REL
        )


def test_the_search_weighs_the_enrichment_endpoints_air_when_each_node_is_walked(
    helsinki: tuple[StreetNetwork, AirQualitySource],
) -> None:
    """The direct route's edge doses in the search are its length times the mean load of
    its ends, each end's air the one the enrichment endpoint gives for it at the time the
    walk reaches it: across the hour too, where the background jumps."""
    from cleanair_core.air.activities import speed_m_s
    from cleanair_core.air.dose import GUIDELINE_LEVELS
    from cleanair_core.air.pollutants import SCORED
    from cleanair_core.routes.times import estimated_times

    network, air = helsinki
    start, end = walks(network, 1, seed=32)[0]
    request = PlanRequest(start, end, WALK, START)
    graph = asyncio.run(plan_graph(request, LoadedNetworks([network]), air))
    points = [network.node(i) for i in graph.baseline.nodes]
    times = estimated_times(points, START, speed_m_s(WALK.activity))
    assert times[0].hour != times[-1].hour
    airs = asyncio.run(
        air.concentrations([Sample(p, t) for p, t in zip(points, times, strict=True)])
    )
    loads = np.array(
        [np.mean([max(0.0, a[p] or 0.0) / GUIDELINE_LEVELS[p] for p in SCORED]) for a in airs]
    )
    edges = np.asarray(graph.baseline.edges, dtype=np.intp)
    expected = network.edge_length[edges] * (loads[:-1] + loads[1:]) / 2
    assert graph.doses[edges] == pytest.approx(expected, rel=REL)
