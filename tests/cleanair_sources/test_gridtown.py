"""Gridtown, the made-up second city in examples/ for offline trials: the shipped file is the
generator's output, it imports as OpenStreetMap XML, and a walk along its main road is offered
a cleaner street by day."""

from __future__ import annotations

import asyncio
import importlib.util
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

from cleanair_core.air.street_level import street_level_air
from cleanair_core.geo import Point
from cleanair_core.routes.network import AreaKind, PlanActivityType, RoadClass
from cleanair_core.routes.planner import plan_routes
from cleanair_core.routes.plans import PlanRequest
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer
from cleanair_sources.osm_import import import_network
from cleanair_sources.street_increments import NetworkIncrements
from cleanair_sources.street_router import LoadedNetworks

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gridtown", EXAMPLES / "gridtown.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_file_is_the_generators_output(generator: ModuleType) -> None:
    assert (EXAMPLES / "gridtown.osm").read_text(encoding="utf-8") == generator.gridtown()


def test_it_imports_with_its_roads_park_and_pond() -> None:
    network = import_network(EXAMPLES / "gridtown.osm", "gridtown")
    assert network.node_count > 100
    assert {RoadClass.ARTERIAL, RoadClass.COLLECTOR, RoadClass.LOCAL, RoadClass.PATH} <= {
        RoadClass(c) for c in network.edge_class.tolist()
    }
    assert network.areas is not None
    assert {kind for kind, _, _ in network.areas.rings()} == {AreaKind.PARK, AreaKind.WATER}
    assert {"Main Street", "Station Road", "Ring Road", "Park Path"} <= set(network.street_names)


@pytest.mark.parametrize(("hour", "offered"), [(1, False), (8, True), (14, True)])
def test_a_walk_along_main_street_is_offered_a_quieter_street_by_day(
    generator: ModuleType, hour: int, offered: bool
) -> None:
    network = import_network(EXAMPLES / "gridtown.osm", "gridtown")
    model = EmbeddedModel(Gazetteer.load())
    air = street_level_air(model, model, NetworkIncrements([network]))
    west, east = Point(*generator._grid(0, 6)), Point(*generator._grid(12, 6))
    # A weekday; 8 and 14 UTC are 10:00 and 16:00 in Finland, 1 UTC is 3:00 at night.
    start = datetime(2026, 11, 30, hour, tzinfo=UTC)
    request = PlanRequest(west, east, PlanActivityType.WALKING, start)
    plan = asyncio.run(plan_routes(request, LoadedNetworks([network]), air))
    cleaner = [r for r in plan.routes if r.dose_delta_pct is not None and r.dose_delta_pct >= 3]
    assert bool(cleaner) is offered, [(r.distance, r.dose_delta_pct) for r in plan.routes]
