"""The air at a street network's nodes, per hour of the source, kept for every plan of that hour.

A plan needs the air at the thousands of nodes a route can pass; plans in one area and hour
need the same values. `NetworkAir` keeps, per (network, source, hour), one array of the scored
pollutants at every node, filled in as plans ask for nodes not asked before (a small network
all at once), so a second plan in the same area and hour asks the source for nothing.
Memory: 41 bytes per node and hour (5 float64 and a flag: 0.2 MB for the shipped Helsinki
network, 2.1 MB for the generated 105,000-edge city, 41 MB for a million nodes) are counted
against `max_bytes`, the least recently used network-hours going first; of a large network
only the pages of the nodes plans have reached are ever written, and so resident (4 KiB pages,
never huge ones: `written_as_used`).

Plans running at once may compute the same nodes twice; the values are the same, so the cost
is time, never a wrong answer.
"""

from __future__ import annotations

import asyncio
import math
import mmap
from collections import OrderedDict
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from cleanair_core.air.point_score import current_hour
from cleanair_core.air.pollutants import SCORED
from cleanair_core.air.quality_source import AirQualitySource, GriddedAir, Sample
from cleanair_core.geo import Point
from cleanair_core.offload import Offload, inline
from cleanair_core.routes.network import FloatArray, StreetNetwork

# NumPy is imported by the functions that compute: the operator CLI's commands import this
# module and start faster without NumPy (tests/cleanair_runtime/test_cli_startup.py).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: Networks up to this many nodes are asked for all their nodes by the first plan of an hour
#: (about 0.1 s with the embedded model); larger ones node by node as plans reach them.
WHOLE_NETWORK_NODES = 20_000
#: Nodes asked of the source per call.
SLICE = 4096
#: Nodes a source that computes its values (`GriddedAir`) computes at once: about 14 MiB of
#: transient arrays (440 bytes a node).
GRIDDED_SLICE = 32_768
#: Default bound on the memory all network-hours take together.
DEFAULT_MAX_BYTES = 256 * 1024 * 1024

_Key = tuple[StreetNetwork, AirQualitySource, datetime]
_BYTES_PER_NODE = len(SCORED) * 8 + 1


class NetworkAir:
    """Scored-pollutant concentrations at network nodes, cached per network, source and hour."""

    def __init__(
        self, max_bytes: int = DEFAULT_MAX_BYTES, whole_network_nodes: int = WHOLE_NETWORK_NODES
    ) -> None:
        self.max_bytes = max_bytes
        self.whole_network_nodes = whole_network_nodes
        self._hours: OrderedDict[_Key, tuple[FloatArray, npt.NDArray[np.bool_]]] = OrderedDict()

    @property
    def bytes_held(self) -> int:
        """The memory counted against `max_bytes`: every node of every network-hour held."""
        return sum(values.nbytes + known.nbytes for values, known in self._hours.values())

    @property
    def network_hours(self) -> int:
        """How many (network, source, hour) entries are held."""
        return len(self._hours)

    @property
    def bytes_written(self) -> int:
        """The part of `bytes_held` that holds air: the nodes asked so far, and the flags."""
        return sum(
            int(known.sum()) * values.itemsize * len(SCORED) + known.nbytes
            for values, known in self._hours.values()
        )

    async def at_nodes(
        self,
        network: StreetNetwork,
        source: AirQualitySource,
        nodes: npt.NDArray[np.intp],
        hours: list[datetime],
        hour_of_node: npt.NDArray[np.intp],
        offload: Offload = inline,
    ) -> FloatArray:
        """Concentrations (one row per node of `nodes`, one column per `SCORED` pollutant, NaN
        where unknown) at `hours[hour_of_node[i]]` for node `nodes[i]`; each hour is the start
        of one of the source's update intervals (UTC). A source that computes its values
        (`GriddedAir`) is asked for all missing nodes at once, as arrays, on `offload`."""
        import numpy as np

        result = np.full((nodes.size, len(SCORED)), np.nan)
        for index, hour in enumerate(hours):
            mine = np.flatnonzero(hour_of_node == index)
            if mine.size:
                values = await self._filled(network, source, hour, nodes[mine], offload)
                result[mine] = values[nodes[mine]]
        return result

    async def prepare(
        self,
        network: StreetNetwork,
        source: GriddedAir,
        hour: datetime,
        offload: Offload = inline,
    ) -> None:
        """Compute the air at the nodes of `network` plans will ask for in `hour`, ahead of
        them (the first plan of an hour then waits on no node air): every node of a small
        network, of a larger one the nodes plans have reached in the hours held. Every node
        of the million-node city was 2 x 39 MiB written and a transient 420 MiB computing it
        (440 bytes a node), which the plan process kept as its own memory from ten minutes
        before each hour (docs/routing.md); a plan reaching other nodes asks for them as
        it would without preparation."""
        import numpy as np

        if network.node_count <= self.whole_network_nodes:
            wanted = np.arange(network.node_count, dtype=np.intp)
        else:
            wanted = self._reached(network, source)
        await self._filled(network, source, hour, wanted, offload)

    def _reached(self, network: StreetNetwork, source: AirQualitySource) -> npt.NDArray[np.intp]:
        """The nodes of `network` whose air from `source` is known in any hour held."""
        import numpy as np

        reached = np.zeros(network.node_count, dtype=np.bool_)
        for (held, asked, _), (_, known) in self._hours.items():
            if held is network and asked is source:
                reached |= known
        nodes: npt.NDArray[np.intp] = np.flatnonzero(reached)
        return nodes

    async def _filled(
        self,
        network: StreetNetwork,
        source: AirQualitySource,
        hour: datetime,
        wanted: npt.NDArray[np.intp],
        offload: Offload,
    ) -> FloatArray:
        import numpy as np

        key = (network, source, hour)
        entry = self._hours.get(key)
        if entry is None:
            # Rows are read only once known, so they are left unwritten: the system then
            # maps the memory of the nodes plans reach, not a million nodes' worth at once
            # (filling it took most of a city-scale plan's first second in an hour).
            entry = (
                written_as_used((network.node_count, len(SCORED)), np.float64),
                written_as_used((network.node_count,), np.bool_),
            )
            self._hours[key] = entry
            self._evict(keep=key)
        else:
            self._hours.move_to_end(key)
        values, known = entry
        if network.node_count <= self.whole_network_nodes and not known.all():
            # A small network at once: later plans of the hour then ask nothing.
            wanted = np.arange(network.node_count, dtype=np.intp)
        missing = wanted[~known[wanted]]
        if isinstance(source, GriddedAir):
            if missing.size:
                gridded = source

                def compute() -> None:
                    # In slices: computing a node's air takes about 440 bytes for a moment,
                    # which a whole city's nodes at once made hundreds of MiB that the
                    # process then kept (malloc's arenas).
                    for first in range(0, missing.size, GRIDDED_SLICE):
                        part = missing[first : first + GRIDDED_SLICE]
                        values[part] = gridded.air_at_hour(
                            network.node_lat[part], network.node_lon[part], hour
                        )

                await offload(compute)
                known[missing] = True
            return values
        # A source that waits on the network (Open-Meteo) answers samples: in slices, each a
        # few milliseconds of Python, so the event loop is never held long.
        for first in range(0, missing.size, SLICE):
            if first:
                await asyncio.sleep(0)
            part = missing[first : first + SLICE]
            lats, lons = network.node_lat[part].tolist(), network.node_lon[part].tolist()
            samples = [Sample(Point(a, o), hour) for a, o in zip(lats, lons, strict=True)]
            airs = await source.concentrations(samples)
            for column, pollutant in enumerate(SCORED):
                values[part, column] = [
                    np.nan if (value := air.get(pollutant)) is None else value for air in airs
                ]
            known[part] = True
        return values

    def _evict(self, keep: _Key) -> None:
        while len(self._hours) > 1 and self._total_bytes() > self.max_bytes:
            oldest = next(iter(self._hours))
            if oldest == keep:
                break
            del self._hours[oldest]

    def _total_bytes(self) -> int:
        return sum(key[0].node_count * _BYTES_PER_NODE for key in self._hours)


def written_as_used(shape: tuple[int, ...], dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A zeroed array the system backs page by page (4 KiB) as it is written, never in huge
    pages. NumPy asks for transparent huge pages for every array of 4 MiB and more: a plan
    writing the air of a few thousand nodes scattered over a network's rows then made 2 MiB
    resident per row reached, not 4 KiB. On the generated million-node city that was 55 MiB
    of a plan process's private memory after seven walks (docs/routing.md)."""
    import numpy as np

    count = math.prod(shape)
    memory = mmap.mmap(-1, max(1, count * np.dtype(dtype).itemsize))
    if hasattr(mmap, "MADV_NOHUGEPAGE"):  # Linux; elsewhere nothing asks for huge pages
        memory.madvise(mmap.MADV_NOHUGEPAGE)
    # The array holds the mapping (its buffer): it is unmapped when the array is dropped.
    return np.frombuffer(memory, dtype=dtype, count=count).reshape(shape)


def hours_reached(
    start: datetime, seconds: FloatArray, interval_s: int
) -> tuple[list[datetime], npt.NDArray[np.intp]]:
    """The update intervals that `start + seconds` fall in, and each one's index."""
    import numpy as np

    first = current_hour(start, interval_s)
    step = max(1, interval_s)
    offset = (start - first).total_seconds()
    index: npt.NDArray[np.intp] = np.floor((offset + np.asarray(seconds)) / step).astype(np.intp)
    count = int(index.max()) + 1 if index.size else 0
    return [first + timedelta(seconds=step * k) for k in range(count)], index
