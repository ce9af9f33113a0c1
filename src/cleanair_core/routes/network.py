"""Street networks: the walkable and cyclable graph a route plan runs on, and its ports.

A network is stored as flat arrays (one row per node, one per edge), which is what the graph
library, the storage adapter and the near-road air model all want. Edges are the segments of
OpenStreetMap ways between consecutive nodes; each carries its length, a road class (how much
traffic pollution it stands for) and who may use it in which direction.

Ports:
- `StreetNetworkStore` keeps imported networks durably (storage adapters).
- `Router` finds paths on one network with per-search edge costs (the graph library adapter).
- `StreetNetworks` picks the router of the network covering a plan (composition root).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from enum import IntEnum, IntFlag, StrEnum
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import attrs

from cleanair_core.air.activities import ActivityType
from cleanair_core.geo import Point

# NumPy is imported by the functions that compute: the operator CLI's commands import this
# module and start faster without NumPy (tests/cleanair_runtime/test_cli_startup.py).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

FloatArray: TypeAlias = "npt.NDArray[np.float64]"
IndexArray: TypeAlias = "npt.NDArray[np.int32]"
ByteArray: TypeAlias = "npt.NDArray[np.uint8]"


_NETWORK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def validate_network_name(name: str) -> str:
    """Network names are operator input shown in listings: 1 to 64 letters, digits and
    . _ -, starting with a letter or digit (a whole match: "city\n" is not "city")."""
    if not _NETWORK_NAME.fullmatch(name):
        raise ValueError(
            "a network name is 1 to 64 characters of letters, digits and . _ -, "
            "starting with a letter or digit"
        )
    return name


class PlanActivityType(StrEnum):
    """The contract's PlanActivityType (section 2.9)."""

    WALKING = "walking"
    CYCLING = "cycling"
    RUNNING = "running"

    @property
    def activity(self) -> ActivityType:
        """The ActivityType whose speed and breathing a plan of this kind uses."""
        return _PLAN_ACTIVITY[self]


_PLAN_ACTIVITY = {
    PlanActivityType.WALKING: ActivityType.WALKING,
    PlanActivityType.CYCLING: ActivityType.CYCLING,
    PlanActivityType.RUNNING: ActivityType.RUNNING_OUTDOOR,
}


class RoadClass(IntEnum):
    """How much motor traffic an edge carries, from none to a motorway's."""

    PATH = 0  # footway, path, pedestrian, steps, cycleway, bridleway, track, corridor
    LOCAL = 1  # residential, living_street, service, unclassified, road
    COLLECTOR = 2  # tertiary, secondary and their links
    ARTERIAL = 3  # primary, trunk and their links
    MOTORWAY = 4  # motorway and its links: never walked or cycled, but its air is breathed


class Access(IntFlag):
    """Who may use an edge, and in which direction (from `edge_from` to `edge_to` is forward).

    Walking and running share the foot network and ignore one-way streets.
    """

    NONE = 0
    FOOT = 1
    BIKE_FORWARD = 2
    BIKE_BACKWARD = 4
    BIKE = BIKE_FORWARD | BIKE_BACKWARD


#: Motor vehicles a day by road class, for a network built without per-road estimates (stored
#: before they were recorded, or made by hand): the EU noise working group's defaults by
#: OpenStreetMap class (docs/science.md, "Street-level air"): MOTORWAY motorway's, ARTERIAL
#: primary's (the commonest arterial in a city; trunk roads carry 23,914), COLLECTOR between
#: tertiary's and secondary's, LOCAL residential's (our choice of representatives).
TRAFFIC_BY_CLASS: dict[RoadClass, float] = {
    RoadClass.PATH: 0.0,
    RoadClass.LOCAL: 500.0,
    RoadClass.COLLECTOR: 1_500.0,
    RoadClass.ARTERIAL: 8_905.0,
    RoadClass.MOTORWAY: 37_290.0,
}


def traffic_by_class(edge_class: ByteArray) -> FloatArray:
    """`TRAFFIC_BY_CLASS` per edge."""
    import numpy as np

    table = np.zeros(256, dtype=np.float64)
    for road_class, vehicles in TRAFFIC_BY_CLASS.items():
        table[road_class] = vehicles
    traffic: FloatArray = table[np.asarray(edge_class, dtype=np.uint8)]
    return traffic


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(names)


class AreaKind(IntEnum):
    """What an outline drawn under the streets stands for."""

    WATER = 0
    PARK = 1  # parks, gardens, grass, woods: green space


@attrs.frozen(eq=False)
class NetworkAreas:
    """Water and green-space outlines around a network, for the route explorer's map only
    (routing never reads them).

    Each ring is one outer outline, its points unclosed (the last point is not the first
    again): ring k is `lat[start:end]`, `lon[start:end]` with `end = ring_end[k]` and `start`
    the previous ring's end (0 for the first); `kind` holds its `AreaKind`.
    """

    kind: ByteArray  # per ring, AreaKind values
    ring_end: IndexArray  # per ring, increasing
    lat: FloatArray  # per point, degrees
    lon: FloatArray

    def __attrs_post_init__(self) -> None:
        import numpy as np

        if self.kind.shape != self.ring_end.shape or self.lat.shape != self.lon.shape:
            raise ValueError("areas need one kind per ring_end and one lon per lat")
        if self.kind.size and int(self.kind.max()) > max(AreaKind):
            raise ValueError("an area's kind must be an AreaKind")
        starts = np.concatenate(([0], self.ring_end[:-1])) if self.ring_end.size else self.ring_end
        if self.ring_end.size and not (
            bool(np.all(self.ring_end - starts >= 3)) and int(self.ring_end[-1]) == self.lat.size
        ):
            raise ValueError("each ring_end must be at least 3 points past the previous one")
        if not self.ring_end.size and self.lat.size:
            raise ValueError("points must belong to a ring")

    @classmethod
    def of(cls, rings: Iterable[tuple[AreaKind, Sequence[float], Sequence[float]]]) -> NetworkAreas:
        """The areas of (kind, latitudes, longitudes) rings."""
        import numpy as np

        kinds: list[int] = []
        ends: list[int] = []
        lats: list[float] = []
        lons: list[float] = []
        for kind, lat, lon in rings:
            kinds.append(kind)
            lats += lat
            lons += lon
            ends.append(len(lats))
        return cls(
            kind=np.array(kinds, dtype=np.uint8),
            ring_end=np.array(ends, dtype=np.int32),
            lat=np.array(lats, dtype=np.float64),
            lon=np.array(lons, dtype=np.float64),
        )

    @property
    def ring_count(self) -> int:
        return int(self.ring_end.shape[0])

    def rings(self) -> Iterator[tuple[AreaKind, FloatArray, FloatArray]]:
        """Each ring's kind, latitudes and longitudes."""
        start = 0
        for kind, end in zip(self.kind.tolist(), self.ring_end.tolist(), strict=True):
            yield AreaKind(kind), self.lat[start:end], self.lon[start:end]
            start = end


@attrs.frozen(eq=False)
class StreetNetwork:
    """One imported area. Arrays are parallel per node (`node_*`) and per edge (`edge_*`).

    `edge_traffic` is the estimated motor vehicles a day on each edge (0 on paths), which the
    street-level air is computed from; without it, `TRAFFIC_BY_CLASS` of each edge's class.

    `edge_name` is each edge's street name as an index into `street_names` (-1: unnamed), for
    showing the map; None for a network stored before names were kept (it has no names).

    `areas` are the water and green space around it, for the map too; None for a network
    stored before they were kept.

    `derived` holds what the adapters derive from the network at load (a router's arcs and
    snapping index, the street level's increments), named by each adapter, when a process
    mapped them from a file shared by every process of the machine; empty, each adapter
    derives its own (the arrays are then that process's alone).
    """

    name: str
    node_lat: FloatArray
    node_lon: FloatArray
    edge_from: IndexArray
    edge_to: IndexArray
    edge_length: FloatArray  # metres, > 0
    edge_class: ByteArray  # RoadClass values
    edge_access: ByteArray  # Access flags
    source: str = ""  # where it was imported from (a file name), for operators
    imported_at: datetime | None = None
    # Given as `edge_traffic=`; read through the `edge_traffic` property.
    _edge_traffic: FloatArray | None = attrs.field(default=None, alias="edge_traffic")
    edge_name: IndexArray | None = None
    street_names: tuple[str, ...] = attrs.field(default=(), converter=_names)
    areas: NetworkAreas | None = None
    derived: Mapping[str, npt.NDArray[Any]] = attrs.field(factory=dict, repr=False)

    def __attrs_post_init__(self) -> None:
        import numpy as np

        if self.edge_name is not None:
            if self.edge_name.shape != self.edge_from.shape:
                raise ValueError("edge_name must have one value per edge")
            if self.edge_name.size and not (
                int(self.edge_name.min()) >= -1
                and int(self.edge_name.max()) < len(self.street_names)
            ):
                raise ValueError("edge_name must index street_names, or be -1")
        # Stores keep the names one per line: a name is one non-empty line.
        if any(not name or "\n" in name or "\r" in name for name in self.street_names):
            raise ValueError("a street name must be one non-empty line")

        traffic = (
            traffic_by_class(self.edge_class)
            if self._edge_traffic is None
            else np.asarray(self._edge_traffic, dtype=np.float64)
        )
        if traffic.shape != self.edge_from.shape:
            raise ValueError("edge_traffic must have one value per edge")
        object.__setattr__(self, "_edge_traffic", traffic)

    @property
    def edge_traffic(self) -> FloatArray:
        """Motor vehicles a day on each edge."""
        assert self._edge_traffic is not None  # set when the network is built
        return self._edge_traffic

    @property
    def node_count(self) -> int:
        return int(self.node_lat.shape[0])

    @property
    def edge_count(self) -> int:
        return int(self.edge_from.shape[0])

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """(south, west, north, east) of its nodes; all zero for an empty network."""
        if self.node_count == 0:
            return (0.0, 0.0, 0.0, 0.0)
        return (
            float(self.node_lat.min()),
            float(self.node_lon.min()),
            float(self.node_lat.max()),
            float(self.node_lon.max()),
        )

    def covers(self, point: Point) -> bool:
        """Whether `point` lies inside the network's bounding box."""
        south, west, north, east = self.bounds
        return self.node_count > 0 and south <= point.lat <= north and west <= point.lon <= east

    def street_name(self, edge: int) -> str | None:
        """The name of the street `edge` belongs to, when known."""
        if self.edge_name is None:
            return None
        index = int(self.edge_name[edge])
        return None if index < 0 else self.street_names[index]

    def node(self, index: int) -> Point:
        return Point(float(self.node_lat[index]), float(self.node_lon[index]))

    def usable(self, activity: PlanActivityType) -> npt.NDArray[np.bool_]:
        """Per edge: may `activity` use it in at least one direction."""
        import numpy as np

        wanted = Access.BIKE if activity is PlanActivityType.CYCLING else Access.FOOT
        usable: npt.NDArray[np.bool_] = (self.edge_access & np.uint8(wanted)) != 0
        return usable


@attrs.frozen
class NetworkSummary:
    """What an operator sees of a stored network."""

    name: str
    nodes: int
    edges: int
    bounds: tuple[float, float, float, float]
    source: str
    imported_at: datetime | None


@attrs.frozen
class Snap:
    """Where a point joins the network: a node, and how far the point is from it."""

    node: int
    distance_m: float


@attrs.frozen
class Path:
    """A route on the network: the nodes in order and the edges between them."""

    nodes: list[int]
    edges: list[int]


class StreetNetworkStore(Protocol):
    """Imported networks, kept across restarts."""

    def save_network(self, network: StreetNetwork) -> None:
        """Store `network`, replacing any network of the same name."""
        ...

    def load_networks(self) -> list[StreetNetwork]: ...

    def network_summaries(self) -> list[NetworkSummary]: ...

    def delete_network(self, name: str) -> bool: ...


class Corridor(Protocol):
    """Searches on the arcs between a chosen set of nodes of one network (`Router.corridor`).

    Costs are still given for every edge of the network; only the arcs whose two ends are in
    the set are searched. A search's answer is the router's own wherever the paths it is
    after (every path cheaper than `limit`) keep to the set, which is what makes it exact
    for a plan: no route within the detour limit leaves the ellipse around its ends.
    """

    def path(
        self, origin: int, destination: int, costs: FloatArray, limit: float | None = None
    ) -> Path | None:
        """As `Router.path`, on the corridor's arcs (None when an end is outside it)."""
        ...

    def lengths_from(self, origin: int, limit: float) -> FloatArray:
        """As `Router.lengths_from` (one value per node of the network), on the corridor's
        arcs: `inf` at every node outside it."""
        ...

    @property
    def edges(self) -> npt.NDArray[np.intp]:
        """The network edges its arcs run along, in increasing order."""
        ...

    def path_on_edges(
        self, origin: int, destination: int, costs: FloatArray, limit: float | None = None
    ) -> Path | None:
        """As `path`, with `costs` given for `edges` alone (in their order): a search of a
        city-scale network then costs no pass over every edge to price it."""
        ...


class Router(Protocol):
    """Shortest paths on one network with costs chosen per search."""

    network: StreetNetwork
    #: The most an edge's straight line (`geo.distances_m` between its ends) exceeds its
    #: length, as a factor of at least 1 (1 for an imported network, whose lengths are
    #: those straight lines): a path of length L keeps within L x this of its ends.
    chord_ratio: float

    def nodes_within(self, point: Point, radius_m: float) -> npt.NDArray[np.intp]:
        """The nodes at most `radius_m` (great-circle, `geo.distances_m`) from `point`, in
        increasing order: without a pass over every node of a large network."""
        ...

    def corridor(self, activity: PlanActivityType, nodes: npt.NDArray[np.intp]) -> Corridor:
        """Searches for `activity` restricted to the arcs between `nodes` (built once, for
        the many searches of one plan: their cost then grows with the corridor, not with
        the network)."""
        ...

    def snap(self, point: Point, activity: PlanActivityType) -> Snap | None:
        """The nearer end of the usable edge nearest to `point` (None without any)."""
        ...

    def path(
        self,
        origin: int,
        destination: int,
        activity: PlanActivityType,
        costs: FloatArray,
        limit: float | None = None,
    ) -> Path | None:
        """The cheapest path using edges `activity` may use, `costs` given per edge (all > 0,
        `inf` for an edge not to be used); None when `destination` cannot be reached, or not
        within a total cost of `limit` (a bound that lets the search stop early)."""
        ...

    def lengths_from(self, origin: int, activity: PlanActivityType, limit: float) -> FloatArray:
        """Per node, the length (metres) of the shortest path from `origin` using edges
        `activity` may use; `inf` where there is none of at most `limit`."""
        ...


class StreetNetworks(Protocol):
    """The loaded networks; a plan uses the one that covers both of its ends."""

    @property
    def names(self) -> Sequence[str]:
        """The loaded networks' names (none: every plan is rejected)."""
        ...

    @property
    def loaded(self) -> Sequence[StreetNetwork]:
        """The loaded networks themselves, for showing them (the route explorer draws them)."""
        ...

    def covering(self, points: Sequence[Point]) -> Router | None: ...
