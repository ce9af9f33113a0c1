"""The near-road port: how close a point is to heavy traffic, for street-level air."""

from __future__ import annotations

from typing import Protocol

from cleanair_core.geo import Point


class NearRoadIncrement(Protocol):
    """Proximity to heavy traffic at a point, 0 (none) .. 1 (kerbside of a busy road)."""

    def __call__(self, point: Point) -> float: ...
