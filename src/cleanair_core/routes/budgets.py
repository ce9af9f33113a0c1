"""The least-dose route within a length budget, exactly: a constrained shortest path.

The supported routes of `frontier.py` are each the least-dose route no longer than
themselves, but a budget that falls between two of them can hold a cleaner route above the
hull, which LARAC's answer (the best supported route within the budget) misses. The gap is
closed by enumeration, as in Lagrangian relaxation and enumeration (Handler & Zang 1980;
Carlyle, Royset & Wood 2008):

- one reverse search from the destination gives every node's shortest length to go, so a
  partial route that cannot reach the end within the budget is dropped at once;
- a second, on dose + λ·length with λ the hull's weight at the budget, gives every node's
  cheapest cost to go c(v); any route from v that ends within the budget L, having come
  `length` so far, still has dose at least c(v) - λ·(L - length). At the origin this is the
  hull's own bound (LARAC's), and with the best route known as the incumbent only partial
  routes within that gap survive;
- the survivors are expanded best bound first, with Pareto labels (length, dose) per node:
  the first to reach the destination is the least-dose route within the budget.

A plan's budgets share one `BudgetSearch`: the lengths to go are found once, and the costs to
go once per distinct λ (budgets on one hull edge share it).

The enumeration stops after `max_labels` labels; the route offered is then the best found and
its `bound` (the least bound still open) says how far from the optimum it can be. Everything
runs on the edges the plan may use (finite dose), which the ellipse of `planner.py` bounds.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

import attrs

from cleanair_core.routes.network import Access, FloatArray, Path, PlanActivityType, StreetNetwork

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from cleanair_core.routes.frontier import Corner

#: Relative slack under which a bound is taken to equal the incumbent (rounding).
_TOLERANCE = 1e-9
#: Labels expanded before a budget's search stops and states its gap.
MAX_LABELS = 20_000
#: Reverse searches over at most this many nodes settle a node at a time, with a heap in
#: Python; larger ones go in NumPy rounds. Both find the same values to the last bit; which is
#: faster depends on the rounds (one per hop of the longest least-cost path): Helsinki's
#: corridors of 4-5k nodes of short streets need 150+ rounds and the heap took half the time,
#: while on a grid of 100 m blocks the rounds were faster from about 8k nodes up.
HEAP_NODES = 8_000


@attrs.frozen
class Budgeted:
    """The least-dose route found within a length budget, and what is proved: no route
    within the budget has a dose below `bound` (`exact` when the route reaches it)."""

    path: Path
    length: float
    dose: float
    bound: float

    @property
    def exact(self) -> bool:
        """Whether the route is proved the least-dose one within its budget."""
        return self.bound >= self.dose * (1 - _TOLERANCE) - 1e-12


class BudgetSearch:
    """Exact least-dose routes from `origin` to `destination` within length budgets, on the
    edges `activity` may use whose dose is finite (both directions for foot, as the access
    flags allow for bikes)."""

    def __init__(
        self,
        network: StreetNetwork,
        activity: PlanActivityType,
        doses: FloatArray,
        origin: int,
        destination: int,
        edges: npt.NDArray[np.intp] | None = None,
    ) -> None:
        """`edges`, when given, holds every edge `activity` may use with a finite dose, in
        increasing order (a plan's corridor): the network's other edges are not looked at."""
        import numpy as np

        among = np.arange(network.edge_count) if edges is None else edges
        access = network.edge_access[among]
        finite = np.isfinite(doses[among])
        if activity is PlanActivityType.CYCLING:
            forward = ((access & np.uint8(Access.BIKE_FORWARD)) != 0) & finite
            backward = ((access & np.uint8(Access.BIKE_BACKWARD)) != 0) & finite
        else:
            forward = backward = ((access & np.uint8(Access.FOOT)) != 0) & finite
        ahead, behind = among[forward], among[backward]
        edge = np.concatenate((ahead, behind))
        tail = np.concatenate((network.edge_from[ahead], network.edge_to[behind]))
        head = np.concatenate((network.edge_to[ahead], network.edge_from[behind]))
        # Compact node numbers: only the nodes these arcs touch (and the two ends) count.
        nodes, index = np.unique(
            np.concatenate((tail, head, [origin, destination])), return_inverse=True
        )
        tail, head = index[: tail.size], index[tail.size : 2 * tail.size]
        self._origin, self._destination = int(index[-2]), int(index[-1])
        # Arcs in order of their tail, so a node's arcs out are one range (`_first`); the
        # reverse searches read them in order of their head (`_by_head`, `_first_in`).
        order = np.argsort(tail, kind="stable")
        edge, tail, head = edge[order], tail[order], head[order]
        count = np.arange(nodes.size + 1)
        self._nodes: list[int] = nodes.tolist()
        self._edge: list[int] = edge.tolist()
        self._lengths: FloatArray = network.edge_length[edge]
        self._doses: FloatArray = doses[edge]
        self._head: list[int] = head.tolist()
        self._first: list[int] = np.searchsorted(tail, count).tolist()
        self._by_head = np.argsort(head, kind="stable")
        self._first_in_list: list[int] | None = None
        self._tail_in_list: list[int] = []
        self._tail_in = tail[self._by_head]
        self._head_in = head[self._by_head]
        self._first_in = np.searchsorted(self._head_in, count)
        # Read per label by `within` and per arc by the heap: Python values, converted once.
        self._dose_list: list[float] = self._doses.tolist()
        self._length_list: list[float] = self._lengths.tolist()
        #: Reverse searches made so far: one for the lengths, one per distinct weight.
        self.reverse_searches = 0
        self._to_end: dict[float, list[float]] = {}
        self._to_end_length = self._costs_to_end(self._lengths)

    def _costs_to_end(self, costs: FloatArray) -> list[float]:
        """Per node, the least sum of `costs` (per arc) from it to the destination, added
        from the destination on; inf where none.

        Every order of relaxing arcs ends at these values (each is the least of its paths'
        sums, and adding a cost >= 0 never lowers a sum), so the heap and the rounds agree
        to the last bit; a negative cost goes to the rounds, which do not need it >= 0."""
        self.reverse_searches += 1
        if len(self._nodes) <= HEAP_NODES and not bool((costs < 0).any()):
            return self._settled_to_end(costs)
        return self._rounds_to_end(costs)

    def _settled_to_end(self, costs: FloatArray) -> list[float]:
        """`_costs_to_end` by Dijkstra's method on the reversed arcs: a node at a time,
        cheapest first, each settled once."""
        if self._first_in_list is None:
            self._first_in_list = self._first_in.tolist()
            self._tail_in_list = self._tail_in.tolist()
        first, tails = self._first_in_list, self._tail_in_list
        arc_costs: list[float] = costs[self._by_head].tolist()
        best = [math.inf] * len(self._nodes)
        best[self._destination] = 0.0
        heap = [(0.0, self._destination)]
        pop, push = heapq.heappop, heapq.heappush
        while heap:
            value, node = pop(heap)
            if value > best[node]:
                continue  # a stale entry: the node was reached cheaper since
            for arc in range(first[node], first[node + 1]):
                through = value + arc_costs[arc]
                other = tails[arc]
                if through < best[other]:
                    best[other] = through
                    push(heap, (through, other))
        return best

    def _rounds_to_end(self, costs: FloatArray) -> list[float]:
        """`_costs_to_end` by label-correcting on the reversed arcs, a round per hop, in
        NumPy: each round relaxes at once every arc into the nodes the last round improved,
        and it ends when a round improves none (then every node's value is its least cost,
        as in Bellman-Ford). On the ellipse of a long city walk the heap took four times as
        long."""
        import numpy as np

        best = np.full(len(self._nodes), np.inf)
        best[self._destination] = 0.0
        arc_costs = costs[self._by_head]
        first, tails, heads = self._first_in, self._tail_in, self._head_in
        active = np.array([self._destination])
        while active.size:
            starts, counts = first[active], first[active + 1] - first[active]
            total = int(counts.sum())
            if total == 0:
                break
            # The arcs into the active nodes: their ranges laid end to end.
            offsets = np.repeat(starts - np.cumsum(counts) + counts, counts)
            arcs = offsets + np.arange(total)
            through = best[heads[arcs]] + arc_costs[arcs]
            others = tails[arcs]
            better = through < best[others]
            if not better.any():
                break
            others, through = others[better], through[better]
            np.minimum.at(best, others, through)
            active = _distinct(others)
        values: list[float] = best.tolist()
        return values

    def within(
        self, budget: float, incumbent: Corner, weight: float, max_labels: int = MAX_LABELS
    ) -> Budgeted:
        """The least-dose route no longer than `budget` metres.

        `incumbent` is a route within the budget (the best supported one: LARAC's answer) and
        `weight` the λ whose Lagrangian bound prunes (the hull's weight at the budget is the
        strongest; any λ >= 0 is sound)."""
        heads, first = self._head, self._first
        doses, lengths = self._dose_list, self._length_list
        to_end_length = self._to_end_length
        to_end = self._to_end.get(weight)
        if to_end is None:  # budgets on one hull edge share their λ and its costs to go
            to_end = self._to_end[weight] = self._costs_to_end(self._doses + weight * self._lengths)
        best_dose, best_path, best_length = incumbent.dose, incumbent.path, incumbent.length

        def bound(dose: float, length: float, node: int) -> float:
            return max(dose, dose + to_end[node] - weight * (budget - length))

        start = self._origin
        if not to_end_length[start] <= budget:
            return Budgeted(best_path, best_length, best_dose, best_dose)
        # Labels: (node, length, dose, parent label, arc); a heap of (bound, label).
        labels: list[tuple[int, float, float, int, int]] = [(start, 0.0, 0.0, -1, -1)]
        heap = [(bound(0.0, 0.0, start), 0)]
        settled: dict[int, list[tuple[float, float]]] = {}
        expanded = 0
        while heap:
            lower, label = heap[0]
            if lower >= best_dose * (1 - _TOLERANCE) - 1e-12:
                return Budgeted(best_path, best_length, best_dose, best_dose)
            if expanded >= max_labels:
                return Budgeted(best_path, best_length, best_dose, lower)
            heapq.heappop(heap)
            node, length, dose, _, _ = labels[label]
            if node == self._destination:
                # Best bound first and a bound at the end is the dose itself: no open label
                # can end cleaner.
                best_dose, best_path, best_length = dose, self._path(labels, label), length
                continue
            here = settled.setdefault(node, [])
            if any(seen <= length and d <= dose for seen, d in here):
                continue  # another route to this node is no longer and no dirtier
            here.append((length, dose))
            expanded += 1
            for arc in range(first[node], first[node + 1]):
                nxt = heads[arc]
                new_length = length + lengths[arc]
                if new_length + to_end_length[nxt] > budget:
                    continue
                new_dose = dose + doses[arc]
                new_bound = bound(new_dose, new_length, nxt)
                if new_bound >= best_dose * (1 - _TOLERANCE) - 1e-12:
                    continue
                if any(seen <= new_length and d <= new_dose for seen, d in settled.get(nxt, ())):
                    continue
                labels.append((nxt, new_length, new_dose, label, arc))
                heapq.heappush(heap, (new_bound, len(labels) - 1))
        return Budgeted(best_path, best_length, best_dose, best_dose)

    def _path(self, labels: list[tuple[int, float, float, int, int]], label: int) -> Path:
        nodes: list[int] = []
        edges: list[int] = []
        while label >= 0:
            node, _, _, parent, arc = labels[label]
            nodes.append(self._nodes[node])
            if arc >= 0:
                edges.append(self._edge[arc])
            label = parent
        return Path(nodes[::-1], edges[::-1])


def _distinct(values: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """The distinct `values`, in increasing order (`np.unique`'s answer: NumPy 2's hashing
    took most of a reverse search's rounds, sorting a tenth of that)."""
    import numpy as np

    ordered = np.sort(values)
    new = np.empty(ordered.size, dtype=np.bool_)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    distinct: npt.NDArray[np.intp] = ordered[new]
    return distinct
