"""Node air computed in slices: the same values, and a transient bounded whatever the network.

Ten minutes before each hour a plan process prepared the next two hours' air at every node of
the million-node city in one call of the embedded model: about 440 bytes a node for a moment
(420 MiB), which the process kept as its own memory (230-310 MiB in bench.shared_networks
runs at 21:51-21:58 UTC, first blamed on Helsinki's midnight; any hour's last ten minutes do
it). See docs/routing.md.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from cleanair_core.air.street_level import GriddedStreetLevelAir, street_level_air
from cleanair_core.routes import network_air
from cleanair_core.routes.network import FloatArray, StreetNetwork
from cleanair_core.routes.network_air import NetworkAir
from support.networks import grid

HOUR = datetime(2026, 11, 24, 22, tzinfo=UTC)


@pytest.fixture(scope="module")
def model() -> GriddedStreetLevelAir:
    from cleanair_sources.embedded_model import EmbeddedModel
    from cleanair_sources.gazetteer import Gazetteer
    from cleanair_sources.street_increments import NetworkIncrements

    background = EmbeddedModel(Gazetteer.load())
    air = street_level_air(background, background, NetworkIncrements([grid(40, 50)]))
    assert isinstance(air, GriddedStreetLevelAir)
    return air


def prepared(network: StreetNetwork, model: GriddedStreetLevelAir) -> tuple[FloatArray, int]:
    """Every node's air for HOUR prepared whole, and the traced peak of preparing it."""
    cache = NetworkAir(whole_network_nodes=network.node_count)
    tracemalloc.start()
    try:
        asyncio.run(cache.prepare(network, model, HOUR))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    nodes = np.arange(network.node_count, dtype=np.intp)
    hour_of_node = np.zeros(network.node_count, dtype=np.intp)
    air = asyncio.run(cache.at_nodes(network, model, nodes, [HOUR], hour_of_node))
    return air, peak


def test_node_air_in_slices_equals_one_call_bit_for_bit(
    model: GriddedStreetLevelAir, monkeypatch: pytest.MonkeyPatch
) -> None:
    network = grid(40, 50)
    whole = model.air_at_hour(network.node_lat, network.node_lon, HOUR)
    for size in (1, 7, 333, 2000, 5000):
        monkeypatch.setattr(network_air, "GRIDDED_SLICE", size)
        air, _ = prepared(network, model)
        assert air.tobytes() == whole.tobytes()
    monkeypatch.setattr(network_air, "GRIDDED_SLICE", 500)
    later, _ = prepared(network, model)
    assert (
        later.tobytes()
        != model.air_at_hour(
            network.node_lat, network.node_lon, HOUR + timedelta(hours=1)
        ).tobytes()
    )


def test_preparing_four_times_the_nodes_takes_no_more_memory_at_once(
    model: GriddedStreetLevelAir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The traced peak of preparing a network is the slices', not the network's: four times
    the nodes within 1.5x (one call over all of them made it about 4x)."""
    monkeypatch.setattr(network_air, "GRIDDED_SLICE", 4096)
    _, small = prepared(grid(80, 100), model)
    _, large = prepared(grid(160, 200), model)
    assert large < 1.5 * small


def test_a_plan_after_the_preparation_is_the_plan_without_it(
    model: GriddedStreetLevelAir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A walk planned in the hour before, the next hours prepared in small slices, then the
    walk planned in the next hour: the same routes and doses as with nothing prepared."""
    from cleanair_core.routes.network import PlanActivityType
    from cleanair_core.routes.planner import plan_routes
    from cleanair_core.routes.plans import PlanRequest
    from cleanair_sources.street_router import LoadedNetworks

    monkeypatch.setattr(network_air, "GRIDDED_SLICE", 97)
    network = grid(40, 50)
    networks = LoadedNetworks([network])
    walk = (network.node(0), network.node(1999), PlanActivityType.WALKING)
    cache = NetworkAir(whole_network_nodes=0)
    asyncio.run(
        plan_routes(
            PlanRequest(*walk, HOUR - timedelta(minutes=8)), networks, model, network_air=cache
        )
    )
    for hour in (HOUR, HOUR + timedelta(hours=1)):
        asyncio.run(cache.prepare(network, model, hour))
    later = PlanRequest(*walk, HOUR + timedelta(minutes=3))
    prepared_plan = asyncio.run(plan_routes(later, networks, model, network_air=cache))
    fresh = asyncio.run(plan_routes(later, networks, model, network_air=NetworkAir()))
    assert prepared_plan == fresh
