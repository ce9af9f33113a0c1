"""Where a plan's routes can go (steps 1-3 of `planner.py`): the snapped ends, the baseline,
the nodes a route within the detour limit can pass, and how soon a walk reaches each.

Each of these is bounded by straight lines: a path is at least as long as the straight lines
between its nodes (times the router's `chord_ratio`, for a network whose edge lengths are
shorter than that). So a plan measures the straight-line distance from a point to many nodes
again and again: from its snapped ends for the baseline's corridor, for the corridor of its
searches, for the disc of its earliest arrivals and for the time left to the end; from its
start and end for the ellipse of its air. `Around` measures each node once per pair of
points and plan, for the widest reach asked: a dozen passes of the haversine over Helsinki's
5,567 nodes had taken a seventh of a plan's time.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, TypeAlias

from cleanair_core.errors import PlanRejected
from cleanair_core.geo import Point, distances_m
from cleanair_core.routes.network import FloatArray, Path, PlanActivityType, Router

# NumPy is imported by the functions that compute: the operator CLI's commands import this
# module and start faster without NumPy (tests/cleanair_runtime/test_cli_startup.py).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

NodeIndices: TypeAlias = "npt.NDArray[np.intp]"

#: A start or end farther than this from any usable street is rejected.
SNAP_DISTANCE_M = 250.0
#: The baseline is first looked for among the nodes a path of SHORTEST_DETOUR times the
#: straight line plus SHORTEST_SLACK_M can pass (`shortest_path`), a bound doubled while no
#: path keeps to it: city streets are typically 1.2-1.4 times the straight line (a grid's are
#: at most 1.41 times), and a short trip's may be far more (a river, a railway).
SHORTEST_DETOUR = 1.5
SHORTEST_SLACK_M = 1_000.0
#: A search over more than this share of a network's nodes searches the whole network: its
#: own corridor would cost more to build than it saves.
WHOLE_NETWORK_SHARE = 0.5
#: Of a network this small `Around` measures every node at once (a fraction of a millisecond):
#: a walk's reach holds most of it anyway, and finding the nodes near a point costs a pass of
#: its own.
SMALL_NETWORK_NODES = 20_000


class Around:
    """Two points, `a` and `b`, and the straight-line distances from each to the nodes near
    `a`: measured for the widest reach asked so far, and read again for narrower ones.

    The answers are those of measuring each time: a node's distance is the same number
    whichever nodes it is measured with (NumPy's functions go element by element), and
    `Router.nodes_within(a, reach)` is the nodes within `reach` of `a` by that measure."""

    def __init__(self, router: Router, a: Point, b: Point) -> None:
        import numpy as np

        self._router = router
        self.a, self.b = a, b
        self._reach = -math.inf
        self._nodes: NodeIndices = np.empty(0, dtype=np.intp)
        self._to_a: FloatArray = np.empty(0)
        self._to_b: FloatArray = np.empty(0)

    def _cover(self, reach: float) -> None:
        """Measure the nodes within `reach` of `a`, unless a wider reach was measured."""
        import numpy as np

        if reach <= self._reach:
            return
        network = self._router.network
        if network.node_count <= SMALL_NETWORK_NODES:
            nodes: NodeIndices = np.arange(network.node_count, dtype=np.intp)
            reach = math.inf
        else:
            nodes = self._router.nodes_within(self.a, reach)
        lat, lon = network.node_lat[nodes], network.node_lon[nodes]
        self._nodes, self._reach = nodes, reach
        self._to_a = distances_m(self.a.lat, self.a.lon, lat, lon)
        self._to_b = distances_m(self.b.lat, self.b.lon, lat, lon)

    def within(self, reach: float) -> NodeIndices:
        """The nodes within `reach` of `a`, in increasing order (`Router.nodes_within`)."""
        self._cover(reach)
        nodes: NodeIndices = self._nodes[self._to_a <= reach]
        return nodes

    def between(self, reach: float) -> NodeIndices:
        """The nodes whose distances to `a` and to `b` add up to at most `reach`, in
        increasing order (each such node is within `reach` of `a`: distances are >= 0)."""
        self._cover(reach)
        nodes: NodeIndices = self._nodes[self._to_a + self._to_b <= reach]
        return nodes

    def to_a(self, nodes: NodeIndices) -> FloatArray:
        """Each node's distance to `a` (`nodes` in increasing order)."""
        return self._read(nodes, self._to_a, self.a)

    def to_b(self, nodes: NodeIndices) -> FloatArray:
        """Each node's distance to `b` (`nodes` in increasing order)."""
        return self._read(nodes, self._to_b, self.b)

    def _read(self, nodes: NodeIndices, measured: FloatArray, point: Point) -> FloatArray:
        import numpy as np

        at = np.minimum(np.searchsorted(self._nodes, nodes), max(self._nodes.size - 1, 0))
        known = self._nodes[at] == nodes if self._nodes.size else np.zeros(nodes.size, bool)
        distances: FloatArray = np.empty(nodes.size)
        distances[known] = measured[at[known]]
        if not known.all():
            # Beyond the reach measured (a node of the start's ellipse far from the snapped
            # start, say): measured now.
            rest = nodes[~known]
            network = self._router.network
            distances[~known] = distances_m(
                point.lat, point.lon, network.node_lat[rest], network.node_lon[rest]
            )
        return distances


def union(node_count: int, *parts: NodeIndices) -> NodeIndices:
    """The nodes in any of `parts`, in increasing order (as `np.union1d`, whose sorting took
    ten times as long over a plan's few thousand nodes)."""
    import numpy as np

    member = np.zeros(node_count, dtype=np.bool_)
    for part in parts:
        member[part] = True
    nodes: NodeIndices = np.flatnonzero(member)
    return nodes


def snapped(router: Router, point: Point, activity: PlanActivityType, end: str) -> int:
    """The node `point` snaps to for `activity`; PlanRejected farther than SNAP_DISTANCE_M
    from any street it may use (`end` names it: "start" or "end")."""
    snap = router.snap(point, activity)
    if snap is None or snap.distance_m > SNAP_DISTANCE_M:
        raise PlanRejected(
            f"No street for {activity.value} within {SNAP_DISTANCE_M:.0f} m of the {end}"
        )
    return snap.node


def reach_of(router: Router, bound: float) -> float:
    """How far in a straight line a path no longer than `bound` can reach (with room for
    rounding)."""
    return bound * router.chord_ratio * (1 + 1e-9) + 1e-6


def shortest_path(
    router: Router,
    origin: int,
    destination: int,
    activity: PlanActivityType,
    ends: Around | None = None,
) -> Path | None:
    """The shortest usable path, searched between the nodes a path no longer than a bound
    can pass (every node of such a path is within the bound of both ends, together), the
    bound doubled until the path is found or the corridor holds every node: the same path
    as a search of the whole network, which a city-scale network makes slow. `ends` is
    `Around` the two nodes, when the plan has it already."""
    import numpy as np

    network = router.network
    here, there = network.node(origin), network.node(destination)
    around = ends or Around(router, here, there)
    straight = distances_m(here.lat, here.lon, np.array([there.lat]), np.array([there.lon]))[0]
    bound = SHORTEST_DETOUR * straight + SHORTEST_SLACK_M
    while True:
        nodes = around.between(reach_of(router, bound))
        if nodes.size > WHOLE_NETWORK_SHARE * network.node_count:
            # Most of the network: building its corridor costs more than it saves.
            return router.path(origin, destination, activity, network.edge_length)
        found = router.corridor(activity, nodes).path(
            origin, destination, network.edge_length, bound
        )
        if found is not None:
            return found
        bound *= 2


def earliest_arrivals(
    router: Router,
    origin: int,
    activity: PlanActivityType,
    nodes: NodeIndices,
    longest: float,
    ends: Around | None = None,
) -> FloatArray:
    """Per node of `nodes` (in increasing order), the metres of street a route covers before
    it can reach it: its shortest path's length from `origin`, which is how far every route
    of this plan that takes that path has come (the baseline included, all of whose nodes it
    reaches so). Beyond `longest` no route within the detour limit passes: the straight line
    stands in. `ends` is `Around` the origin (and the destination), when the plan has it."""
    import numpy as np

    network = router.network
    around = ends or Around(router, network.node(origin), network.node(origin))
    # Each node's shortest path no longer than `longest` keeps to the disc of that radius.
    disc = around.within(reach_of(router, longest))
    if disc.size > WHOLE_NETWORK_SHARE * network.node_count:
        along = router.lengths_from(origin, activity, longest)[nodes]
    else:
        along = router.corridor(activity, disc).lengths_from(origin, longest)[nodes]
    metres: FloatArray = np.where(np.isfinite(along), along, around.to_a(nodes))
    return metres


def ellipse(router: Router, start: Point, end: Point, longest: float) -> NodeIndices:
    """The nodes a route from start to end no longer than `longest` can pass (the sum of
    their straight-line distances to both ends is at most that, plus the snapping reach)."""
    reach = longest + 2 * SNAP_DISTANCE_M  # the ends may be snapped that far away
    return Around(router, start, end).between(reach)
