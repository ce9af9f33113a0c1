"""Screening station observations at intake: what is held back before it is stored.

A stored observation is fused into the air of every point within hundreds of kilometres
(`cleanair_core.air.fusion`): one absurd value (a 1e300 from a broken row, a sensor's
error code, ng/m³ labelled µg/m³) or one dated ahead of the clock would be served as a
measurement. Both intake paths, the file import (`use_cases.air.import_observations`) and
the live poller (`cleanair_sources.openaq`), hold such readings back with the same rule:
not stored, not fused, and counted by reason, never fatal to the rest. The bounds and their
sources are in docs/science.md, "Screening observations".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from types import MappingProxyType

import attrs

from cleanair_core.air.observations import Observation, ObservationsWritten, Station
from cleanair_core.air.pollutants import Pollutant

#: The highest hourly mean (µg/m³) accepted per pollutant: above the highest hourly means
#: ever measured (dust storms, smog episodes, wildfire smoke), with a margin, so a real
#: extreme is kept and an impossible value is not.
UPPER_BOUNDS: Mapping[Pollutant, float] = MappingProxyType(
    {
        Pollutant.PM25: 5_000.0,
        Pollutant.PM10: 20_000.0,
        Pollutant.NO2: 2_000.0,
        Pollutant.O3: 2_000.0,
    }
)


class HeldBack(StrEnum):
    """Why an observation was held back (the metric's `reason` label)."""

    OVER_BOUND = "over_bound"
    FUTURE = "future"


@attrs.frozen
class HeldBackCounts:
    """Observations held back, by reason."""

    over_bound: int = 0
    future: int = 0

    @property
    def total(self) -> int:
        return self.over_bound + self.future

    def __add__(self, other: HeldBackCounts) -> HeldBackCounts:
        return HeldBackCounts(self.over_bound + other.over_bound, self.future + other.future)

    def count(self, reason: HeldBack) -> int:
        """How many were held back for `reason`."""
        return self.over_bound if reason is HeldBack.OVER_BOUND else self.future


def held_back(observation: Observation, now: datetime) -> HeldBack | None:
    """Why `observation` must not be stored at `now`, or None when it may be. An hour that
    ends at `now` exactly has been measured; one that ends later has not. A pollutant with
    no bound (not one stations report) is left to `validate_observations` to refuse."""
    bound = UPPER_BOUNDS.get(observation.pollutant)
    if bound is not None and observation.value > bound:
        return HeldBack.OVER_BOUND
    if observation.hour_end > now:
        return HeldBack.FUTURE
    return None


def screen_observations(
    observations: Iterable[Observation], now: datetime
) -> tuple[list[Observation], HeldBackCounts]:
    """The observations that may be stored at `now`, in their order, and how many were held
    back by reason (`held_back`)."""
    kept: list[Observation] = []
    over_bound = future = 0
    for observation in observations:
        reason = held_back(observation, now)
        if reason is None:
            kept.append(observation)
        elif reason is HeldBack.OVER_BOUND:
            over_bound += 1
        else:
            future += 1
    return kept, HeldBackCounts(over_bound, future)


@attrs.frozen
class ObservationImport:
    """What an import of observations did: the stations given, what writing the kept
    observations did, and how many were held back by reason."""

    stations: int
    written: ObservationsWritten
    held_back: HeldBackCounts = attrs.Factory(HeldBackCounts)


# -- at fusion: a reading wildly out of line with its neighbours and its own last day

#: A reading is out of line when it is more than this many times above (or below) both the
#: median of its neighbours' readings of the same hour and the median of its own readings
#: of the `OWN_HOURS` before, each side with `OUT_OF_LINE_OFFSET` added (so that clean air,
#: a few µg/m³ either way, is never "ten times" anything).
OUT_OF_LINE_FACTOR = 10.0
OUT_OF_LINE_OFFSET = 5.0
#: Neighbours: the other stations of the hour within this distance (at least two needed).
NEIGHBOUR_M = 100_000.0
#: A station's own recent hours (at least three needed).
OWN_HOURS = 24


def _far_from(value: float, reference: float) -> bool:
    ratio = (value + OUT_OF_LINE_OFFSET) / (reference + OUT_OF_LINE_OFFSET)
    return ratio > OUT_OF_LINE_FACTOR or ratio < 1.0 / OUT_OF_LINE_FACTOR


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return 0.5 * (ordered[middle - 1] + ordered[middle])


def in_line(
    hour: Sequence[Observation],
    recent: Iterable[Observation],
    stations: Mapping[str, Station],
) -> tuple[Observation, ...]:
    """The observations of one pollutant's hour (`hour`, of stations in `stations`) that are
    not wildly out of line: one is set aside when it is `OUT_OF_LINE_FACTOR` times off the
    median of its neighbours (within `NEIGHBOUR_M`) and off the median of its own
    `OWN_HOURS` before (from `recent`), both where both can be judged, else the one that
    can; neither judged, it is kept. A real episode moves a station's neighbours or follows
    its own rise; a broken sensor's jump does neither."""
    if not hour:
        return ()
    pollutant, hour_end = hour[0].pollutant, hour[0].hour_end
    earliest = hour_end - timedelta(hours=OWN_HOURS)
    own: dict[str, list[float]] = {}
    for o in recent:
        if o.pollutant is pollutant and earliest <= o.hour_end < hour_end:
            own.setdefault(o.station_id, []).append(o.value)
    return _in_line_of_hour(hour, own, stations)


class RecentValues:
    """Each station's values of each pollutant among `recent`, by hour: `in_line`'s own
    history of a station found by bisection instead of a scan of every row (a history's
    page screens hundreds of pollutant-hours against the same rows)."""

    def __init__(self, recent: Iterable[Observation]) -> None:
        found: dict[tuple[Pollutant, str], list[tuple[datetime, float]]] = {}
        for o in recent:
            found.setdefault((o.pollutant, o.station_id), []).append((o.hour_end, o.value))
        self._values = {key: sorted(values) for key, values in found.items()}
        self._ends = {key: [end for end, _ in values] for key, values in self._values.items()}

    def own(self, hour: Sequence[Observation]) -> dict[str, list[float]]:
        """The values of each station of `hour` (one pollutant's hour) over the `OWN_HOURS`
        before it."""
        from bisect import bisect_left

        if not hour:
            return {}
        pollutant, hour_end = hour[0].pollutant, hour[0].hour_end
        earliest = hour_end - timedelta(hours=OWN_HOURS)
        own: dict[str, list[float]] = {}
        for o in hour:
            key = (pollutant, o.station_id)
            ends = self._ends.get(key, [])
            first, last = bisect_left(ends, earliest), bisect_left(ends, hour_end)
            if last > first:
                own[o.station_id] = [v for _, v in self._values[key][first:last]]
        return own


def in_line_of(
    hour: Sequence[Observation], recent: RecentValues, stations: Mapping[str, Station]
) -> tuple[Observation, ...]:
    """`in_line` with the recent values indexed once (`RecentValues`): the same answer."""
    if not hour:
        return ()
    return _in_line_of_hour(hour, recent.own(hour), stations)


def _in_line_of_hour(
    hour: Sequence[Observation], own: Mapping[str, list[float]], stations: Mapping[str, Station]
) -> tuple[Observation, ...]:
    import numpy as np

    from cleanair_core.geo import distances_m

    located = [o for o in hour if o.station_id in stations]
    if not located:
        return ()
    lats = np.array([stations[o.station_id].point.lat for o in located], dtype=np.float64)
    lons = np.array([stations[o.station_id].point.lon for o in located], dtype=np.float64)
    near = distances_m(lats[:, None], lons[:, None], lats[None, :], lons[None, :]) <= NEIGHBOUR_M
    np.fill_diagonal(near, False)
    values = np.array([o.value for o in located], dtype=np.float64)
    kept: list[Observation] = []
    for index, observation in enumerate(located):
        neighbours = values[near[index]]
        references = []
        if neighbours.size >= 2:
            references.append(float(np.median(neighbours)))
        history = own.get(observation.station_id, [])
        if len(history) >= 3:
            references.append(_median(history))
        if references and all(_far_from(observation.value, r) for r in references):
            continue
        kept.append(observation)
    return tuple(kept)


def in_line_hours(
    observations: Iterable[Observation], stations: Mapping[str, Station], pollutant: Pollutant
) -> list[Observation]:
    """`in_line` applied to every hour of `pollutant` in `observations`, each hour judged
    against the hours before it among them: what a fit is made on."""
    from bisect import bisect_left

    by_hour: dict[datetime, list[Observation]] = {}
    by_station: dict[str, list[tuple[datetime, float]]] = {}
    for o in observations:
        if o.pollutant is pollutant:
            by_hour.setdefault(o.hour_end, []).append(o)
            by_station.setdefault(o.station_id, []).append((o.hour_end, o.value))
    ends: dict[str, list[datetime]] = {}
    for station_id, found in by_station.items():
        found.sort()
        ends[station_id] = [end for end, _ in found]
    kept: list[Observation] = []
    for hour_end, hour in sorted(by_hour.items()):
        earliest = hour_end - timedelta(hours=OWN_HOURS)
        own: dict[str, list[float]] = {}
        for o in hour:
            times = ends.get(o.station_id, [])
            first, last = bisect_left(times, earliest), bisect_left(times, hour_end)
            own[o.station_id] = [v for _, v in by_station[o.station_id][first:last]]
        kept.extend(_in_line_of_hour(hour, own, stations))
    return kept
