"""The air at network nodes is asked of the source once per hour, and memory stays bounded."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import attrs
import numpy as np
import pytest

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.ports import Sources
from cleanair_core.routes.network import FloatArray, PlanActivityType
from cleanair_core.routes.network_air import NetworkAir, hours_reached
from cleanair_core.routes.planner import plan_routes
from cleanair_core.routes.plans import PlanRequest
from cleanair_core.routes.results import PlanResult
from cleanair_sources.street_router import LoadedNetworks
from cleanair_storage.memory import MemoryStore
from support.networks import grid

HOUR = datetime(2026, 11, 24, 9, tzinfo=UTC)
T = TypeVar("T")


class CountingAir:
    """NO2 = the hour of day + latitude detail; counts the samples asked."""

    update_interval = 3600

    def __init__(self) -> None:
        self.asked: list[Sample] = []

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.asked.extend(samples)
        return [
            {Pollutant.NO2: s.at.hour + (s.point.lat - 60) * 100, Pollutant.PM25: None}
            for s in samples
        ]


def test_hours_reached_splits_arrivals_by_the_sources_intervals() -> None:
    start = HOUR + timedelta(minutes=50)
    hours, index = hours_reached(start, np.array([0.0, 500.0, 600.0, 4200.0]), 3600)
    assert hours == [HOUR, HOUR + timedelta(hours=1), HOUR + timedelta(hours=2)]
    assert index.tolist() == [0, 0, 1, 2]


def test_nodes_are_asked_once_per_hour_and_answered_in_order() -> None:
    network = grid(3, 4)
    air, cache = CountingAir(), NetworkAir(whole_network_nodes=0)
    nodes = np.array([5, 1, 7], dtype=np.intp)
    first = asyncio.run(cache.at_nodes(network, air, nodes, [HOUR], np.zeros(3, np.intp)))
    assert len(air.asked) == 3
    no2 = SCORED.index(Pollutant.NO2)
    expected = [9 + (network.node(int(n)).lat - 60) * 100 for n in nodes]
    assert first[:, no2].tolist() == pytest.approx(expected)
    assert np.isnan(first[:, SCORED.index(Pollutant.PM25)]).all()  # unknown stays unknown
    again = asyncio.run(
        cache.at_nodes(network, air, np.array([7, 2], np.intp), [HOUR], np.zeros(2, np.intp))
    )
    assert len(air.asked) == 4  # only node 2 is new
    assert again[0].tolist() == pytest.approx(first[2].tolist(), nan_ok=True)
    later = asyncio.run(
        cache.at_nodes(network, air, nodes, [HOUR, HOUR + timedelta(hours=1)], np.array([0, 1, 1]))
    )
    assert len(air.asked) == 6  # nodes 1 and 7 at the next hour
    assert later[1, no2] == pytest.approx(first[1, no2] + 1)


def test_a_small_network_is_asked_for_all_its_nodes_at_once() -> None:
    network = grid(3, 4)
    air, cache = CountingAir(), NetworkAir(whole_network_nodes=network.node_count)
    one = np.array([5], dtype=np.intp)
    asyncio.run(cache.at_nodes(network, air, one, [HOUR], np.zeros(1, np.intp)))
    assert len(air.asked) == network.node_count
    every = np.arange(network.node_count, dtype=np.intp)
    asyncio.run(cache.at_nodes(network, air, every, [HOUR], np.zeros(every.size, np.intp)))
    assert len(air.asked) == network.node_count


def test_memory_is_bounded_by_dropping_the_least_recently_used_hours() -> None:
    network = grid(10, 10)
    per_hour = network.node_count * (len(SCORED) * 8 + 1)
    cache, air = NetworkAir(max_bytes=2 * per_hour, whole_network_nodes=0), CountingAir()
    everything = np.arange(network.node_count, dtype=np.intp)
    for hours in range(5):
        at = [HOUR + timedelta(hours=hours)]
        asyncio.run(
            cache.at_nodes(network, air, everything, at, np.zeros(everything.size, np.intp))
        )
        assert cache.bytes_held <= 2 * per_hour
    asked = len(air.asked)
    latest = [HOUR + timedelta(hours=4)]
    asyncio.run(
        cache.at_nodes(network, air, everything, latest, np.zeros(everything.size, np.intp))
    )
    assert len(air.asked) == asked  # the newest hour is still held
    asyncio.run(
        cache.at_nodes(network, air, everything, [HOUR], np.zeros(everything.size, np.intp))
    )
    assert len(air.asked) == asked + network.node_count  # the oldest went


@pytest.mark.parametrize(
    ("minute", "hours"),
    [(1, 1), (50, 2)],  # the walk from :50 crosses the hour
)
def test_a_source_that_waits_on_the_network_is_asked_at_each_instant_in_the_walks_hours(
    minute: int, hours: int
) -> None:
    """Open-Meteo answers from its cache per cell and hour. At street level its air moves
    within the hour (the traffic follows the time of day), so a plan asks it for each node
    at the instant the node is walked, as the enrichment endpoint asks for a waypoint, and
    never for the hour's start; only in the hours its routes can reach, which a second plan
    of the hour asks again and no other (no more upstream data than the walk needs)."""
    network = grid(6, 8)
    air, cache = CountingAir(), NetworkAir(whole_network_nodes=0)
    networks = LoadedNetworks([network])
    walk = PlanActivityType.WALKING
    start = HOUR + timedelta(minutes=minute)
    request = PlanRequest(network.node(0), network.node(47), walk, start)
    for _ in range(2):
        asyncio.run(plan_routes(request, networks, air, network_air=cache))
        asked = {s.at.replace(minute=0, second=0, microsecond=0) for s in air.asked}
        assert asked == {HOUR + timedelta(hours=k) for k in range(hours)}
    walked = [s for s in air.asked if s.at < HOUR + timedelta(hours=1)]
    assert all(s.at >= start for s in walked)
    assert len({s.at for s in walked}) > network.node_count // 2  # each node its own


class GriddedCountingAir(CountingAir):
    """CountingAir that also answers arrays, counting those calls and their threads."""

    def __init__(self) -> None:
        super().__init__()
        self.arrays: list[int] = []

    def air_at_hour(self, lats: FloatArray, lons: FloatArray, hour: datetime) -> FloatArray:
        self.arrays.append(threading.get_ident())
        air = np.full((lats.size, len(SCORED)), np.nan)
        air[:, SCORED.index(Pollutant.NO2)] = hour.hour + (lats - 60) * 100
        return air


def test_a_source_that_computes_its_values_is_asked_arrays_off_the_event_loop() -> None:
    network = grid(6, 8)
    gridded, by_sample = GriddedCountingAir(), CountingAir()
    walk = PlanActivityType.WALKING
    request = PlanRequest(network.node(0), network.node(47), walk, HOUR + timedelta(minutes=1))

    async def plan(source: CountingAir) -> PlanResult:
        return await plan_routes(request, LoadedNetworks([network]), source, in_a_thread)

    fast, slow = asyncio.run(plan(gridded)), asyncio.run(plan(by_sample))
    # The node air (at the hour's start) comes as arrays only; samples are asked for the
    # candidate routes' waypoints, at their own times, as the enrichment endpoint asks them
    # (planner `_candidate`).
    waypoints = {
        Sample(point, at)
        for planned in fast.routes
        for point, at in zip(planned.route.points, planned.route.times, strict=True)
    }
    assert waypoints <= set(gridded.asked)
    assert all(sample.at > HOUR for sample in gridded.asked)
    assert gridded.arrays
    assert threading.get_ident() not in gridded.arrays  # on the offload's thread
    assert fast == slow


async def in_a_thread(work: Callable[[], T], /) -> T:
    return await asyncio.to_thread(work)


def test_only_the_nodes_asked_count_as_written() -> None:
    network = grid(10, 10)
    cache, air = NetworkAir(whole_network_nodes=0), CountingAir()
    some = np.array([3, 40, 41], dtype=np.intp)
    asyncio.run(cache.at_nodes(network, air, some, [HOUR], np.zeros(some.size, np.intp)))
    flags = network.node_count
    assert cache.bytes_written == 3 * len(SCORED) * 8 + flags
    assert cache.bytes_held == network.node_count * (len(SCORED) * 8 + 1)
    assert cache.network_hours == 1


# -- prepared ahead of the hour (issue 25) -----------------------------------------------------


def preparing_core(air: object, at: datetime, network_air: NetworkAir) -> CleanAir:
    """A core with `air` over a grid network, on a manual clock at `at`."""
    sources = Sources(air, networks=LoadedNetworks([grid(6, 8)]))  # type: ignore[arg-type]
    core = CleanAir(
        MemoryStore(), TokenKeys(generate_key()), Policy(), ManualClock(at), sources=sources
    )
    core.context = attrs.evolve(core.context, network_air=network_air)
    return core


@pytest.mark.parametrize(
    ("minute", "seconds"),
    [(0, 50 * 60), (15, 35 * 60), (49, 60), (50, 0), (59, 0)],
)
def test_the_next_hours_air_is_due_ten_minutes_before_the_hour(minute: int, seconds: float) -> None:
    core = preparing_core(CountingAir(), HOUR + timedelta(minutes=minute), NetworkAir())
    assert core.seconds_until_air_preparation() == seconds


def test_preparing_fills_the_next_two_hours_so_the_next_hours_plans_ask_no_node_air() -> None:
    """A plan in the next hour weighs its walk between that hour's air and the next's: both
    are computed ahead, at the nodes plans reached this hour (a large network: here every
    network is), so the same walk's node air in the next hour asks the source nothing."""
    air, cache = GriddedCountingAir(), NetworkAir(whole_network_nodes=0)
    core = preparing_core(air, HOUR + timedelta(minutes=50), cache)
    assert core.sources is not None
    assert core.sources.networks is not None
    networks = core.sources.networks
    network = networks.loaded[0]
    walk = (network.node(0), network.node(47), PlanActivityType.WALKING)
    asyncio.run(
        plan_routes(
            PlanRequest(*walk, HOUR + timedelta(minutes=50)), networks, air, network_air=cache
        )
    )
    assert asyncio.run(core.prepare_network_air()) == 2
    assert cache.network_hours == 3
    asked = len(air.arrays)
    request = PlanRequest(*walk, HOUR + timedelta(hours=1))
    asyncio.run(plan_routes(request, networks, air, network_air=cache))
    assert len(air.arrays) == asked


def test_preparing_a_large_network_writes_only_the_nodes_plans_reached() -> None:
    """Every node of the million-node city, prepared, held 2 x 39 MiB more of a plan
    process's own memory from ten minutes before each hour (and 420 MiB for a moment):
    before any plan, nothing is written; a small network is still prepared whole."""
    cache = NetworkAir(whole_network_nodes=0)
    core = preparing_core(GriddedCountingAir(), HOUR + timedelta(minutes=50), cache)
    assert asyncio.run(core.prepare_network_air()) == 2
    assert cache.bytes_written == 2 * 48  # the flags only: no node's air
    whole = NetworkAir()
    core = preparing_core(GriddedCountingAir(), HOUR + timedelta(minutes=50), whole)
    asyncio.run(core.prepare_network_air())
    assert whole.bytes_written == 2 * 48 * (len(SCORED) * 8 + 1)


def test_a_source_that_waits_on_the_network_is_not_prepared() -> None:
    """Open-Meteo would be asked for every node of a city each hour, for plans that may not
    come: its node air is asked as plans need it."""
    air = CountingAir()
    core = preparing_core(air, HOUR + timedelta(minutes=55), NetworkAir())
    assert asyncio.run(core.prepare_network_air()) == 0
    assert air.asked == []


# -- resident as written (issue 34) ------------------------------------------------------------


@attrs.frozen(eq=False)
class LargeNetwork:
    """What `NetworkAir` reads of a network: its node count and coordinates."""

    node_count: int
    node_lat: FloatArray
    node_lon: FloatArray


def anonymous_bytes() -> int:
    for line in open("/proc/self/smaps_rollup").read().splitlines():  # noqa: SIM115
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no Anonymous line")


def test_a_large_networks_hour_holds_resident_only_the_pages_of_the_nodes_asked() -> None:
    # 2M nodes: an hour is 80 MB of air and 2 MB of flags, all reserved up front. 40 nodes
    # 50,000 apart are each in a row of their own: 4 KiB pages make them 160 KiB resident
    # (and the flags' pages as much); huge pages (NumPy's for arrays of 4 MiB and more, where
    # the system gives them on request) made each row 2 MiB, 80 MiB in all.
    count = 2_000_000
    # Every node at one point (the test is about memory, not air), made before measuring.
    network = LargeNetwork(count, np.full(count, 60.17), np.full(count, 24.94))
    cache, air = NetworkAir(whole_network_nodes=0), GriddedCountingAir()
    nodes = np.arange(0, network.node_count, 50_000, dtype=np.intp)
    before = anonymous_bytes()
    values = asyncio.run(
        cache.at_nodes(network, air, nodes, [HOUR], np.zeros(nodes.size, np.intp))  # type: ignore[arg-type]
    )
    grown = anonymous_bytes() - before
    assert cache.bytes_held >= 80_000_000
    assert not np.isnan(values).all()
    assert grown < 16 * 1024 * 1024, f"{grown / 2**20:.0f} MiB resident for 40 nodes"
