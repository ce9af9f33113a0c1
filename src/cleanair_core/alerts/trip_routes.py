"""A trip subscription's usual route, as its alerts keep it: points along the route with the
distance travelled to each (issue 32; docs/alerts.md, "Trip alerts").

The route is planned once, by the caller with the street router (`route_of_plan` takes the
direct route of a `PlanResult`), or drawn straight when there is no street data
(`direct_route`), and kept in the subscription's evaluator state (`trips.TripState`): every
later evaluation reads it back instead of planning again. It is resampled every
`ROUTE_STEP_M` along its length, so it stays short (about 150 points for the longest trip a
plan allows, 15 km) whatever the street network's detail, and no grid cell it crosses by
more than that is missed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import attrs

from cleanair_core.geo import Point, distance_m
from cleanair_core.routes.results import PlanResult

#: Metres between the points kept along a route: a tenth of the narrowest grid cell's side
#: at Helsinki's latitude (0.55 km), so a cell is missed only when the route clips its corner.
ROUTE_STEP_M = 100.0
#: Decimal places kept of a point's degrees (about 0.1 m) and of a distance's metres.
_DEGREE_PLACES = 6
_METRE_PLACES = 1


class MalformedRoute(ValueError):
    """A stored route this code cannot read."""


def _check(route: TripRoute, _: object, distances: tuple[float, ...]) -> None:
    if not route.points or len(distances) != len(route.points):
        raise ValueError("a route has at least one point and one distance per point")
    if distances[0] != 0 or not all(math.isfinite(d) for d in distances):
        raise ValueError("a route's distances start at 0 and are finite")
    if any(later < earlier for earlier, later in itertools.pairwise(distances)):
        raise ValueError("a route's distances never decrease")


@attrs.frozen
class TripRoute:
    """The points of a trip's usual route from start to end, and `distances`: the metres
    travelled along the route to each (0 at the first)."""

    points: tuple[Point, ...]
    distances: tuple[float, ...] = attrs.field(validator=_check)

    @property
    def length_m(self) -> float:
        """The route's length, metres."""
        return self.distances[-1]


def trip_route(points: Sequence[Point]) -> TripRoute:
    """The route through `points` (a planned route's, in order), resampled every
    `ROUTE_STEP_M` along its length and at its end. Distances are great-circle legs between
    the points given, as `routes.times.estimated_times` measures a planned route to time it:
    so a point kept is reached when the plan reaches it."""
    if not points:
        raise ValueError("a route has at least one point")
    travelled = [0.0]
    for a, b in itertools.pairwise(points):
        travelled.append(travelled[-1] + distance_m(a, b))
    total = travelled[-1]
    marks = [k * ROUTE_STEP_M for k in range(math.ceil(total / ROUTE_STEP_M))] + [total]
    kept: list[Point] = []
    leg = 0
    for mark in marks:
        while leg + 1 < len(points) - 1 and travelled[leg + 1] < mark:
            leg += 1
        kept.append(_along(points, travelled, leg, mark))
    return TripRoute(
        tuple(_rounded(point) for point in kept),
        tuple(round(mark, _METRE_PLACES) for mark in marks),
    )


def _along(points: Sequence[Point], travelled: Sequence[float], leg: int, mark: float) -> Point:
    """The point `mark` metres along the route, on the leg from `points[leg]` (linear in
    degrees: a leg of a street network is short enough for that)."""
    if len(points) == 1:
        return points[0]
    a, b = points[leg], points[leg + 1]
    span = travelled[leg + 1] - travelled[leg]
    share = 0.0 if span <= 0 else min(1.0, max(0.0, (mark - travelled[leg]) / span))
    return Point(a.lat + share * (b.lat - a.lat), a.lon + share * (b.lon - a.lon))


def _rounded(point: Point) -> Point:
    return Point(round(point.lat, _DEGREE_PLACES), round(point.lon, _DEGREE_PLACES))


def direct_route(start: Point, end: Point) -> TripRoute:
    """The straight route from `start` to `end`: the stand-in where the street router has
    no network (the air of a city's cells changes little between a street and its
    neighbour, docs/alerts.md)."""
    return trip_route([start, end])


def route_of_plan(result: PlanResult) -> TripRoute:
    """The usual route from a plan of the trip: its direct route (the shortest, which the
    planner lists last), the one a traveller takes without asking."""
    return trip_route(result.routes[-1].route.points)


def encode_route(route: TripRoute) -> list[list[float]]:
    """`route` as JSON-ready lists, one `[lat, lon, metres]` per point."""
    return [[p.lat, p.lon, d] for p, d in zip(route.points, route.distances, strict=True)]


def decode_route(document: Any) -> TripRoute:
    """The route `encode_route` gave (parsed from JSON); MalformedRoute for anything else."""
    try:
        rows = [(_number(lat), _number(lon), _number(d)) for lat, lon, d in document]
        return TripRoute(
            tuple(Point(lat, lon) for lat, lon, _ in rows), tuple(d for _, _, d in rows)
        )
    except (ValueError, TypeError) as error:
        raise MalformedRoute("the stored route is not readable") from error


def _number(value: object) -> float:
    if type(value) not in (int, float):
        raise TypeError("expected a number")
    return float(value)  # type: ignore[arg-type]
