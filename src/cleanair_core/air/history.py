"""A point's past hours: concentrations, score, official indexes and how each hour was made
(the extension API's `POST /ext/v1/airquality/history`).

A request names a span (`start` to `end`, both within the contract's past window); the span
is every hour of the source's cadence from the one `start` falls in to the one before `end`
(the one `end` falls in when it is not on the hour), oldest first, and is served a page at a
time. Each hour is the air at the hour's start instant, as the conditions' `data_time`: the
last hour of a span ending now is the conditions' hour. Each hour's provenance says how it
was made (`HourKind`); docs/air-quality-model.md ("History") gives the rules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum

import attrs

from cleanair_core.air.conditions import HISTORY_HOURS
from cleanair_core.air.conditions import _stations as stations_of
from cleanair_core.air.fused_air import FusedAir, FusedValue, StationUsed, background_values
from cleanair_core.air.fusion import observation_hour
from cleanair_core.air.indexes import IndexValue, OfficialIndex
from cleanair_core.air.point_score import current_hour
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import AirQualitySource, Sample
from cleanair_core.air.score import clean_air_score
from cleanair_core.errors import OutsideDataWindow, SourceUnavailable, Unprocessable, Violation
from cleanair_core.geo import Point
from cleanair_core.offload import Offload, inline

#: The contract's past data window (section 8), as the routes' (`routes.times`, which the
#: air rules do not import: routes are built over them).
PAST_WINDOW = timedelta(days=30)

#: Hours per page when the request names none, and the most a page may hold (a week).
DEFAULT_PAGE_SIZE = 24
MAX_PAGE_SIZE = 168
#: The span is charged per started block of this many hours ("a day of history").
CHARGED_HOURS = 24

#: A station is "within reach" of a point when its weight in the point's correction (its
#: residual's share, as `FusedAir.explain` reports it) is at least this: the fusion itself
#: lets it set at least half of the correction there, so the value is in the main its
#: measurement. Beyond, its weight fades with the fusion's fitted ranges.
MEASURED_WEIGHT = 0.5


class OutsideHistoryWindow(OutsideDataWindow):
    """A history span reaching over 30 days back, or into the future (the forecast's)."""

    detail = "History times must lie between 30 days ago and now"


class HourKind(StrEnum):
    """How an hour's values were made."""

    #: A station within reach (`MEASURED_WEIGHT`) measured the hour the instant falls in,
    #: and the fusion corrected the value with that very measurement (no fade).
    MEASURED = "measured"
    #: Station observations moved a value by more than 0.1 % (older ones fading, or
    #: stations farther than reach): the background was fused.
    FUSED = "fused"
    #: No station moved any value: the background (model or CAMS) alone.
    MODELLED = "modelled"


@attrs.frozen
class HourProvenance:
    """How one hour was made: its kind, the source (`embedded-model`/`cams`, with
    `+stations` when observations moved a value by more than 0.1 %) and the stations whose
    weight at the point is at least 1 % for some pollutant, heaviest first."""

    kind: HourKind
    source: str
    stations: tuple[StationUsed, ...]


@attrs.frozen
class HistoryHour:
    """One past hour at a point; `clean_air_score` is None (and `pollutants` empty) when
    the source has no value for the hour."""

    time: datetime
    clean_air_score: int | None
    pollutants: dict[Pollutant, float]
    #: Per pollutant of `pollutants`: its standard error and 90 % interval.
    uncertainty: dict[Pollutant, FusedValue]
    indexes: tuple[IndexValue, ...]
    provenance: HourProvenance


@attrs.frozen
class HistorySpan:
    """The hours of a history request: `count` hours of `step_seconds` from `first` (the
    start of the hour its `start` falls in)."""

    first: datetime
    count: int
    step_seconds: int = 3600

    def hour(self, index: int) -> datetime:
        return self.first + timedelta(seconds=self.step_seconds * index)

    def page(self, offset: int, size: int) -> tuple[list[datetime], int | None]:
        """The hours of the page from `offset` (at most `size`), and the next page's offset
        (None on the last page)."""
        if not 0 <= offset < self.count or size < 1:
            raise ValueError("a page starts inside the span and holds an hour at least")
        stop = min(self.count, offset + size)
        return [self.hour(i) for i in range(offset, stop)], (stop if stop < self.count else None)

    @property
    def charged_days(self) -> int:
        """The started blocks of `CHARGED_HOURS` hours the span covers: what it is charged
        for, whatever the page size."""
        hours = self.count * self.step_seconds / 3600
        return max(1, math.ceil(hours / CHARGED_HOURS - 1e-9))


def history_span(
    start: datetime, end: datetime | None, now: datetime, step_seconds: int = 3600
) -> HistorySpan:
    """The span from `start` to `end` (default: `now`), both read as UTC without an offset.
    Raises Unprocessable when `end` is given and not after `start`, and OutsideHistoryWindow
    when `start` is over 30 days before `now`, or not before it, or `end` after `now` (the
    past window; the future is the forecast's)."""
    try:
        begin = _utc(start)
        finish = now if end is None else _utc(end)
    except OverflowError:  # a time UTC cannot hold (year 9999 with an offset): far outside
        raise OutsideHistoryWindow() from None
    if end is not None and finish <= begin:  # the request's own shape, whatever the clock
        raise Unprocessable(violations=[Violation("end", "minimum", "must be after start")])
    # Without `end`, a `start` from now on asks for no past hour: the window's refusal.
    if begin < now - PAST_WINDOW or finish > now or begin >= now:
        raise OutsideHistoryWindow()
    step = max(1, step_seconds)
    first = current_hour(begin, step)
    count = math.ceil((finish - first).total_seconds() / step)
    return HistorySpan(first, count, step)


def _utc(at: datetime) -> datetime:
    """`at` in UTC; a naive datetime is UTC already."""
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


async def history_hours(
    source: AirQualitySource,
    point: Point,
    hours: Sequence[datetime],
    indexes: Sequence[OfficialIndex],
    background: str,
    offload: Offload = inline,
) -> list[HistoryHour]:
    """The history of `hours` (consecutive, oldest first) at `point` from `source`, asked
    in one call with the `HISTORY_HOURS - 1` hours before the first (each hour's indexes
    average over the day before it, as the conditions' do). The hours are built on
    `offload` (a week's indexes take tens of milliseconds). Raises SourceUnavailable when no
    hour has data."""
    if not hours:
        return []
    step = (hours[1] - hours[0]) if len(hours) > 1 else timedelta(hours=1)
    lead = [hours[0] - step * k for k in range(HISTORY_HOURS - 1, 0, -1)]
    window = [*lead, *hours]
    if isinstance(source, FusedAir):
        explained = await source.explain_hours(point, window)
        airs: list[Concentrations] = [{p: v.value for p, v in e.items()} for e in explained]
    else:
        airs = await source.concentrations([Sample(point, at) for at in window])
        explained = [background_values(air) for air in airs]
    built = await offload(
        lambda: build_hours(window, airs, explained, indexes, background, len(lead))
    )
    if all(hour.clean_air_score is None for hour in built):
        raise SourceUnavailable("No air-quality data is available for this location")
    return built


def build_hours(
    window: Sequence[datetime],
    airs: Sequence[Concentrations],
    explained: Sequence[dict[Pollutant, FusedValue]],
    indexes: Sequence[OfficialIndex],
    background: str,
    lead: int,
) -> list[HistoryHour]:
    """The hours of `window` from `lead` on, each with its indexes computed from up to
    `HISTORY_HOURS` hours ending with it (the lead hours feed the first ones)."""
    built: list[HistoryHour] = []
    for i in range(lead, len(window)):
        air = airs[i]
        score = clean_air_score(air)
        since = max(0, i - HISTORY_HOURS + 1)
        history = {p: [a.get(p) for a in airs[since : i + 1]] for p in SCORED}
        # An hour without data has no index, whatever the hours before it had.
        computed = () if score is None else (index.compute(history) for index in indexes)
        values = tuple(value for value in computed if value is not None)
        known = explained[i]
        built.append(
            HistoryHour(
                time=window[i],
                clean_air_score=score,
                pollutants={p: v for p, v in air.items() if v is not None},
                uncertainty=known,
                indexes=values,
                provenance=provenance_of(window[i], known, background),
            )
        )
    return built


def provenance_of(
    at: datetime, known: dict[Pollutant, FusedValue], background: str
) -> HourProvenance:
    """How the values at `at` were made (`HourKind`), from their explanation."""
    corrected = any(value.corrected for value in known.values())
    measured_hour = observation_hour(at)
    measured = any(
        station.last_hour_end == measured_hour and abs(station.weight) >= MEASURED_WEIGHT
        for value in known.values()
        for station in value.stations
    )
    kind = HourKind.MEASURED if measured else HourKind.FUSED if corrected else HourKind.MODELLED
    return HourProvenance(
        kind=kind,
        source=background + ("+stations" if corrected else ""),
        stations=stations_of(known.values()),
    )
