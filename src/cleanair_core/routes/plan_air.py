"""The air a plan's search weighs: each node's when a walk reaches it, and the edge doses.

Step 3 of a plan (see `planner.py` and docs/routing.md): the air at the ellipse's nodes at the
time each can first be reached (`walked_air`), the least a route within the detour limit can
meet at each (`least_loads`, for what the baseline's words prove), each node's air load and
each edge's dose (`node_loads`, `edge_doses`; `edges_between` and `edge_doses_on` for the
edges a plan can use alone: a city-scale network's other millions need no pricing).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeAlias

from cleanair_core.air.dose import GUIDELINE_LEVELS
from cleanair_core.air.point_score import current_hour
from cleanair_core.air.pollutants import SCORED
from cleanair_core.air.quality_source import AirQualitySource, GriddedAir, Sample
from cleanair_core.errors import SourceUnavailable
from cleanair_core.geo import Point
from cleanair_core.offload import Offload
from cleanair_core.routes.network import FloatArray, StreetNetwork
from cleanair_core.routes.network_air import SLICE, NetworkAir, hours_reached

# NumPy is imported by the functions that compute: the operator CLI's commands import this
# module and start faster without NumPy (tests/cleanair_runtime/test_cli_startup.py).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

NodeIndices: TypeAlias = "npt.NDArray[np.intp]"
EdgeIndices: TypeAlias = "npt.NDArray[np.intp]"


async def least_loads(
    network_air: NetworkAir,
    network: StreetNetwork,
    nodes: NodeIndices,
    window: tuple[FloatArray, FloatArray],
    source: AirQualitySource,
    start_time: datetime,
    loads: tuple[FloatArray, list[int]],
    offload: Offload,
) -> FloatArray:
    """Per node, the least load a route within the detour limit can meet there, reaching it
    `window` seconds after `start_time` (earliest, latest). `loads` are the earliest's (the
    search's own) and the `SCORED` columns they are of; they are returned themselves when
    no route meets cleaner air later."""
    import numpy as np

    earliest, latest = window
    searched, columns = loads
    least = searched

    def lower(among: NodeIndices, air: FloatArray) -> None:
        nonlocal least
        found = node_loads(network, nodes[among], air, columns)
        least = np.where(np.isnan(least), least, np.fmin(least, found))

    # Every hour's start a route can reach a node at, after the earliest: its air there.
    step = max(1, source.update_interval)
    first = current_hour(start_time, step)
    offset = (start_time - first).total_seconds()
    _, first_index = hours_reached(start_time, earliest, step)
    _, last_index = hours_reached(start_time, latest, step)
    starts = [
        first + timedelta(seconds=step * k) for k in range(int(last_index.max(initial=0)) + 1)
    ]
    for later in range(1, int((last_index - first_index).max(initial=0)) + 1):
        index = first_index + later
        among = np.flatnonzero(index <= last_index)
        at = await network_air.at_nodes(
            network, source, nodes[among], starts, index[among], offload
        )
        lower(among, at)
        if not isinstance(source, GriddedAir):
            # An hourly source's air jumps at the hour: the hour before ends at other air
            # than the hour's start (that hour's background, this instant's traffic), a
            # microsecond before it.
            began = index[among] * float(step) - offset
            ended = np.maximum(began - 1e-6, earliest[among])
            lower(among, await _air_at(network, nodes[among], ended, source, start_time))
    # Air moving within the hour (interpolated between the hours' starts, or an hourly
    # source's at each instant) is least at one of the times above or at an end of the
    # times a node can be reached: the latest one too.
    everywhere = np.arange(nodes.size)
    lower(
        everywhere,
        await walked_air(network_air, network, nodes, latest, source, start_time, offload),
    )
    if np.array_equal(least, searched, equal_nan=True):
        return searched
    return least


async def _node_air(
    network_air: NetworkAir,
    network: StreetNetwork,
    nodes: NodeIndices,
    seconds: FloatArray,
    source: AirQualitySource,
    start_time: datetime,
    offload: Offload,
) -> FloatArray:
    """The air at `nodes` (a row each, a column per `SCORED` pollutant) for the hour of
    `start_time + seconds`, node by node."""
    hours, hour_of_node = hours_reached(start_time, seconds, source.update_interval)
    return await network_air.at_nodes(network, source, nodes, hours, hour_of_node, offload)


async def _air_at(
    network: StreetNetwork,
    nodes: NodeIndices,
    seconds: FloatArray,
    source: AirQualitySource,
    start_time: datetime,
) -> FloatArray:
    """The air at `nodes` (a row each, a column per `SCORED` pollutant, NaN unknown) asked
    of `source` at `start_time + seconds`, node by node: what the enrichment endpoint gets
    for a waypoint there and then. In slices, each handing the event loop back."""
    import asyncio

    import numpy as np

    result = np.full((nodes.size, len(SCORED)), np.nan)
    lats, lons = network.node_lat[nodes].tolist(), network.node_lon[nodes].tolist()
    offsets = np.asarray(seconds, dtype=np.float64).tolist()
    for first in range(0, nodes.size, SLICE):
        if first:
            await asyncio.sleep(0)
        last = min(first + SLICE, nodes.size)
        samples = [
            Sample(Point(lats[i], lons[i]), start_time + timedelta(seconds=offsets[i]))
            for i in range(first, last)
        ]
        airs = await source.concentrations(samples)
        if len(airs) != len(samples):
            raise SourceUnavailable()
        for column, pollutant in enumerate(SCORED):
            result[first:last, column] = [
                np.nan if (value := air.get(pollutant)) is None else value for air in airs
            ]
    return result


async def walked_air(
    network_air: NetworkAir,
    network: StreetNetwork,
    nodes: NodeIndices,
    seconds: FloatArray,
    source: AirQualitySource,
    start_time: datetime,
    offload: Offload,
) -> FloatArray:
    """The air at `nodes` when a walk reaches each, `seconds` after `start_time`.

    A source that waits on the network (Open-Meteo) is asked for each node at that instant,
    as the enrichment endpoint asks it for a waypoint: its background has one value per hour,
    but street level over it follows the traffic of the time of day, and fusion fades with
    the time since the stations' hour, so the air of the hour's start put a walk's dose up
    to 7.9 % off the endpoint's (bench/departures.py). It is asked only in the hours the
    walks reach, which its routes' enrichment asks too: Open-Meteo answers them from its
    cache per cell and hour, no more upstream data. A source that computes its values
    (`GriddedAir`) moves within the hour too: each node's air is interpolated in time
    between the starts of its hour and the next, so the search weighs the air at the time
    the node is walked (exact for air that changes at a steady rate through the hour; the
    embedded model's hourly tables are such, its weather blocks nearly so). Both hours are
    kept per network, so the next plans of the hour ask the source nothing."""
    import numpy as np

    if not isinstance(source, GriddedAir):
        return await _air_at(network, nodes, seconds, source, start_time)
    air = await _node_air(network_air, network, nodes, seconds, source, start_time, offload)
    step = max(1, source.update_interval)
    following = seconds + step
    later = await _node_air(network_air, network, nodes, following, source, start_time, offload)
    offset = (start_time - current_hour(start_time, step)).total_seconds()
    share = np.mod(offset + seconds, step)[:, np.newaxis] / step
    walked: FloatArray = np.where(np.isnan(later), air, air + share * (later - air))
    return walked


def dose_columns(air: FloatArray) -> list[int]:
    """The dose pollutants (their `SCORED` columns): those known at every node that knows any."""
    import numpy as np

    unknown = np.isnan(air)
    some = ~unknown.all(axis=1)
    if not some.any():
        return []
    # One pass over the nodes that know any, not one per pollutant.
    gaps: npt.NDArray[np.bool_] = np.any(unknown[some], axis=0)
    return [c for c in range(len(SCORED)) if not gaps[c]]


def node_loads(
    network: StreetNetwork, nodes: NodeIndices, air: FloatArray, columns: list[int]
) -> FloatArray:
    """Per node, its air load from `columns` of `air` (`nodes`' rows); NaN elsewhere or
    without data."""
    import numpy as np

    loads = np.full(network.node_count, np.nan)
    if columns:
        guideline = np.array([GUIDELINE_LEVELS[SCORED[c]] for c in columns])
        loads[nodes] = (np.maximum(air[:, columns], 0.0) / guideline).mean(axis=1)
    return loads


def edge_doses(network: StreetNetwork, loads: FloatArray) -> FloatArray:
    """Per edge, length x the mean load of its ends (inf where either is unknown): summed
    along a route, proportional to its trapezoid dose."""
    import numpy as np

    mean = (loads[network.edge_from] + loads[network.edge_to]) / 2
    doses: FloatArray = np.where(np.isnan(mean), np.inf, network.edge_length * mean)
    return doses


def edges_between(network: StreetNetwork, nodes: NodeIndices) -> EdgeIndices:
    """The edges with both ends among `nodes`, in increasing order: those `edge_doses` can
    give a finite dose when only `nodes` have loads."""
    import numpy as np

    member = np.zeros(network.node_count, dtype=np.bool_)
    member[nodes] = True
    # Two passes over booleans: a fifth of the time `edge_doses` takes over every edge.
    inside = member[network.edge_from]
    inside &= member[network.edge_to]
    edges: EdgeIndices = np.flatnonzero(inside)
    return edges


def edge_doses_on(network: StreetNetwork, loads: FloatArray, edges: EdgeIndices) -> FloatArray:
    """`edge_doses(network, loads)[edges]`, the same numbers, without a pass over every edge."""
    import numpy as np

    mean = (loads[network.edge_from[edges]] + loads[network.edge_to[edges]]) / 2
    doses: FloatArray = np.where(np.isnan(mean), np.inf, network.edge_length[edges] * mean)
    return doses
