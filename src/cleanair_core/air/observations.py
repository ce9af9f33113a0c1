"""Station observations: measured hourly air at monitoring stations, and the port storing them.

Fusion (`cleanair_core.air.fusion`) anchors the modelled background to these measurements, and
`cleanair stations evaluate` measures the service's own error against them. They come in from
files in the OpenAQ archive's layout (`cleanair stations import`) or from a live source
(OpenAQ v3), and are stored like any shared state, so every process and machine sharing one
database fuses with the same observations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

import attrs

from cleanair_core.air.pollutants import Pollutant
from cleanair_core.geo import Point


class StationType(StrEnum):
    """What a station is placed to measure (the EU's station classification, Directive
    2008/50/EC Annex III): the air of a street, of a district, or of an industrial site."""

    TRAFFIC = "traffic"
    BACKGROUND = "background"
    INDUSTRIAL = "industrial"


class AreaType(StrEnum):
    """The kind of area around a station (the same classification)."""

    URBAN = "urban"
    SUBURBAN = "suburban"
    RURAL = "rural"


#: The pollutants stations report that the service stores and fuses.
OBSERVED: tuple[Pollutant, ...] = (Pollutant.PM25, Pollutant.PM10, Pollutant.NO2, Pollutant.O3)


@attrs.frozen
class Station:
    """A monitoring station. `id` is unique within the deployment (the importer prefixes it
    with where it came from: `openaq:2178`); the types are unknown when None."""

    id: str
    name: str
    point: Point
    station_type: StationType | None = None
    area_type: AreaType | None = None


def _utc_hour(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("an observation's hour is a timezone-aware instant")
    value = value.astimezone(UTC)
    if value.minute or value.second or value.microsecond:
        raise ValueError("an observation's hour ends on the hour")
    return value


@attrs.frozen
class Observation:
    """One station's mean of one pollutant over one hour, µg/m³; `hour_end` is the end of
    the averaging hour (UTC, on the hour), as the OpenAQ archive gives it."""

    station_id: str
    pollutant: Pollutant
    hour_end: datetime = attrs.field(converter=_utc_hour)
    value: float


@attrs.frozen
class ObservationsWritten:
    """What one write of observations did: `added` new hours, `replaced` stored hours whose
    value changed, `unchanged` hours stored with the same value already."""

    added: int = 0
    replaced: int = 0
    unchanged: int = 0

    def __add__(self, other: ObservationsWritten) -> ObservationsWritten:
        return ObservationsWritten(
            self.added + other.added,
            self.replaced + other.replaced,
            self.unchanged + other.unchanged,
        )


@attrs.frozen
class StationSummary:
    """A station with what is stored of it: for `cleanair stations list`."""

    station: Station
    observations: int
    first_hour_end: datetime | None
    last_hour_end: datetime | None


class ObservationStore(Protocol):
    """Stations and their hourly observations (a storage port, in `Store`)."""

    def put_stations(self, stations: Iterable[Station]) -> int:
        """Insert or update stations by id; returns how many were given. One transaction."""
        ...

    def put_observations(self, observations: Iterable[Observation]) -> ObservationsWritten:
        """Store observations keyed by (station, pollutant, hour_end): a new key is added, a
        stored one with another value replaced, one with the same value left as it is. All
        or nothing per call. Raises ValueError, writing nothing, when an observation names a
        station that is not stored."""
        ...

    def list_stations(self) -> list[Station]:
        """Every stored station, by id."""
        ...

    def station_summaries(self) -> list[StationSummary]:
        """Every stored station, by id, with its count of observations and their span."""
        ...

    def observations_between(
        self, start: datetime, end: datetime, pollutants: Sequence[Pollutant] = OBSERVED
    ) -> list[Observation]:
        """The observations of `pollutants` whose hour ends in [start, end], ordered by
        hour_end, then station, then pollutant."""
        ...

    def observations_version(self) -> int:
        """A number that changes whenever stations or observations are written or deleted,
        in any process sharing the store: readers cache what they computed from the
        observations and read again only when it changed. One small read."""
        ...

    def delete_observations_before(self, cutoff: datetime) -> int:
        """Delete the observations whose hour ends before `cutoff` (retention); returns how
        many. Stations stay."""
        ...


def validate_observations(
    observations: Iterable[Observation], known_station_ids: Iterable[str]
) -> list[Observation]:
    """The observations as a list, or ValueError naming none of their values when one has
    an unknown station, a pollutant outside `OBSERVED`, or a value that is negative or not
    finite: what every adapter refuses before it writes."""
    known = set(known_station_ids)
    checked = list(observations)
    for observation in checked:
        if observation.station_id not in known:
            raise ValueError("an observation names a station that is not stored")
        if observation.pollutant not in OBSERVED:
            raise ValueError("an observation's pollutant is not one stations report")
        value = observation.value
        if not (value >= 0.0 and value < float("inf")):
            raise ValueError("an observation's value is negative or not finite")
    return checked
