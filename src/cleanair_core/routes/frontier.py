"""The length/dose trade-off of routes between two points: the supported frontier.

Every route has a length L and a dose D (the planner's edge doses summed along it). A route is
*supported* when some λ >= 0 makes it a cheapest route for the cost D + λ·L; the supported
routes are the corners of the lower convex hull of all (L, D) pairs. Each one is exactly the
least-dose route among all routes no longer than itself: a shorter or equally long route with
less dose would be cheaper for the same λ. That is what LARAC (Jüttner et al. 2001) returns
for a length budget, and what `best_within` picks here, with the gap to the exact optimum of
the budget bounded by the hull (`lower_bound`).

`supported_routes` finds the corners between the shortest route (λ = ∞) and the least-dose
route (λ = 0) by recursive bisection of the hull (as in the NISE method of Cohon 1978): for two
neighbouring corners a (shorter) and b (cleaner), the search with λ = (D_a - D_b) / (L_b - L_a)
either finds a route strictly below the line through them, a new corner to recurse on both
sides of, or proves the segment is a hull edge. Each corner costs about two searches.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from cleanair_core.routes.network import FloatArray, Path

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: Relative improvement below which a λ-search is taken to have found nothing new (rounding).
_TOLERANCE = 1e-9


@attrs.frozen
class Frontier:
    """The supported routes found, by increasing length; `complete` when every hull edge was
    proved (the search budget did not run out), so `lower_bound` holds."""

    corners: list[Corner]
    complete: bool


@attrs.frozen
class Corner:
    """A supported route: its path, length (metres) and dose (in the edge doses' unit)."""

    path: Path
    length: float
    dose: float


#: One search: the cheapest path for per-edge costs, or None; `limit` is a known bound on the
#: answer's cost (a path at least as cheap exists), which lets the search stop early.
Search = Callable[[FloatArray, float | None], Path | None]


def _corner(path: Path, lengths: FloatArray, doses: FloatArray) -> Corner:
    import numpy as np

    edges = np.asarray(path.edges, dtype=np.int64)
    return Corner(path, float(lengths[edges].sum()), float(doses[edges].sum()))


def dose_scale(lengths: FloatArray, doses: FloatArray) -> float:
    """The dose per metre over the edges of finite dose (what the tie-break is scaled by)."""
    import numpy as np

    finite = np.isfinite(doses)
    return float(doses[finite].sum() / max(float(lengths[finite].sum()), 1e-9))


def supported_routes(
    search: Search,
    lengths: FloatArray,
    doses: FloatArray,
    shortest: Path,
    *,
    max_searches: int = 24,
    max_length: float | None = None,
    edges: npt.NDArray[np.intp] | None = None,
    scale: float | None = None,
) -> Frontier:
    """The supported routes from `shortest` to the least-dose one, by increasing length.

    `doses` are per-edge doses (inf where the edge may not be used; finite on `shortest`).
    Corners longer than `max_length` are only explored as far as needed to find the ones
    within it. At most `max_searches` searches are made; with fewer, some hull edges may hide
    corners (the routes returned are still supported, each optimal for its own length).

    With `edges` (every edge `search` reads, in increasing order), each search is given the
    costs of those edges alone, in their order: on a city-scale network a plan's corridor
    is a few per cent of the edges, and pricing all of them took half a plan's time.
    `scale` is `dose_scale(lengths, doses)` when the caller has it (a pass over every edge
    otherwise); the routes found are the same either way.
    """
    import numpy as np

    first = _corner(shortest, lengths, doses)
    if not np.isfinite(first.dose):
        return Frontier([first], complete=False)  # no dose to compare with
    # The least-dose route, ties going to the shorter (and every cost kept > 0): the other
    # end of the frontier.
    if scale is None:
        scale = dose_scale(lengths, doses)
    tie_break = max(scale * 1e-9, 1e-12)
    # Each cost below is the same number per edge whether or not `edges` picks them out.
    priced_doses, priced_lengths = (
        (doses, lengths) if edges is None else (doses[edges], lengths[edges])
    )
    cleanest_path = search(priced_doses + tie_break * priced_lengths, None)
    searches = 1
    if cleanest_path is None:
        return Frontier([first], complete=False)
    last = _corner(cleanest_path, lengths, doses)
    if last.dose >= first.dose * (1 - _TOLERANCE) or last.length <= first.length:
        return Frontier([first], complete=True)  # the shortest route is the cleanest
    corners = {tuple(first.path.edges): first, tuple(last.path.edges): last}
    pending = [(first, last)]
    while pending:
        a, b = pending.pop()
        if max_length is not None and a.length > max_length:
            continue  # both ends beyond the length anyone asks for
        if searches >= max_searches:
            return Frontier(sorted(corners.values(), key=_by_length), complete=False)
        weight = (a.dose - b.dose) / (b.length - a.length)
        bound = a.dose + weight * a.length
        found = search(
            priced_doses + weight * priced_lengths + tie_break * priced_lengths,
            bound * (1 + 1e-6),
        )
        searches += 1
        if found is None:
            continue
        r = _corner(found, lengths, doses)
        if r.dose + weight * r.length >= bound * (1 - _TOLERANCE) - 1e-12:
            continue  # a and b are neighbours on the hull
        if not (a.length < r.length < b.length):
            continue  # numerical noise: a corner must lie between its neighbours
        corners[tuple(r.path.edges)] = r
        pending.extend([(r, b), (a, r)])
    return Frontier(sorted(corners.values(), key=_by_length), complete=True)


def _by_length(corner: Corner) -> tuple[float, float]:
    return (corner.length, corner.dose)


def best_within(corners: list[Corner], budget: float) -> Corner:
    """The least-dose supported route no longer than `budget` (the first corner, the shortest
    route, when none other fits)."""
    fitting = [c for c in corners if c.length <= budget]
    return min(fitting or corners[:1], key=lambda c: (c.dose, c.length))


def lower_bound(corners: list[Corner], budget: float) -> float:
    """A lower bound on the dose of any route no longer than `budget`: the hull at `budget`
    (exact where a corner lies at it; the gap of `best_within` is the difference)."""
    if budget >= corners[-1].length:
        return corners[-1].dose
    for a, b in itertools.pairwise(corners):
        if a.length <= budget < b.length:
            share = (budget - a.length) / (b.length - a.length)
            return a.dose + share * (b.dose - a.dose)
    return corners[0].dose


def hull_weight(corners: list[Corner], budget: float) -> float:
    """The weight λ of the hull's edge at `budget` (the slope the supported routes trade
    length for dose at there); 0 at or beyond the least-dose corner."""
    for a, b in itertools.pairwise(corners):
        if a.length <= budget < b.length:
            return (a.dose - b.dose) / (b.length - a.length)
    return 0.0
