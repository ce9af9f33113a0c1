"""Named places: a readable name for a point, and an approximate place for an IP address."""

from __future__ import annotations

from typing import Protocol

import attrs

from cleanair_core.geo import Point


@attrs.frozen
class Place:
    """A point with a human-readable name, such as "Helsinki, Finland"."""

    name: str
    point: Point


class PlaceNamer(Protocol):
    """Names the nearest sizeable place to a point, offline."""

    def name_of(self, point: Point) -> str: ...

    def country_of(self, point: Point) -> str | None:
        """The ISO 3166-1 alpha-2 code of the country a point is in, or None (at sea, say)."""
        ...


class IpLocator(Protocol):
    """An approximate place for a client address, or None (private, loopback, unknown)."""

    def locate(self, address: str) -> Place | None: ...
