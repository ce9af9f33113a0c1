"""Evaluating place subscriptions: from the air of grid cells to each subscription's new
state and the events to deliver (issue 32, "Evaluation at scale"; docs/alerts.md,
"Evaluation").

Every subscription in one grid cell shares that cell's air and its index categories, so a
round costs one evaluation per cell and hour however many subscriptions a cell holds:

- `cell_of` puts a point in its 0.01 degree cell, the embedded model's own grid;
- `due` says what a subscription is evaluated on at `now` (the hour that just ended, or a
  forecast's local target day), `air_wanted` which cells' air a batch needs and for how many
  hours, and `fetch_cell_air` asks the source for all of it in one call per chunk of cells;
- `decide` runs the state machines (`episodes.observe`, `forecasts.forecast`) on those
  categories and returns, per subscription, the state to save by compare-and-set and the
  events to record.

Everything here but `fetch_cell_air` is pure: the time is passed in, nothing is stored.
Trip subscriptions are not evaluated here (their alerts need the departures computation).
"""

from __future__ import annotations

import functools
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, TypeAlias
from zoneinfo import ZoneInfo

import attrs

from cleanair_core.air.indexes import (
    HourlyHistory,
    IndexValue,
    OfficialIndex,
    eu_eaqi,
    uk_daqi,
    us_epa,
)
from cleanair_core.air.indexes.registry import OFFICIAL_INDEXES, indexes_for
from cleanair_core.air.point_score import current_hour
from cleanair_core.air.pollutants import SCORED, Pollutant
from cleanair_core.air.quality_source import AirQualitySource, GriddedAir, Sample
from cleanair_core.alerts.alert_states import (
    AlertState,
    MalformedState,
    decode_state,
    encode_state,
)
from cleanair_core.alerts.episodes import ObservedRule, ObservedState, observe
from cleanair_core.alerts.events import Events, release
from cleanair_core.alerts.forecasts import ForecastRule, ForecastState, forecast
from cleanair_core.alerts.subscriptions import (
    Forecast,
    Observed,
    Place,
    StoredState,
    Subscription,
    TargetDay,
)
from cleanair_core.geo import Point
from cleanair_core.offload import Offload, inline

# NumPy is imported by the functions that compute, as in the air modules: the operator
# CLI's commands import the core and start faster without it.
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

#: Cells per degree of latitude and of longitude: the embedded model's static fields are
#: evaluated at the centres of 0.01 degree cells (`EmbeddedModel.cell_of`), so two points
#: of one cell differ only by the street level (docs/alerts.md tells the cost).
CELLS_PER_DEGREE = 100
HOUR = timedelta(hours=1)
_HALF_HOUR = timedelta(minutes=30)
#: Hours of history an index may average over (the longest: 24 h for PM's daily means).
HISTORY_HOURS = max(index.hours_needed for index in OFFICIAL_INDEXES)
#: Hours ending at or before the last hour that a forecast's window reaches back: today's
#: first local hour can have begun up to a day (25 h on the night clocks fall back) ago.
_TODAY_BEHIND = 26
#: Hours after the last one that a forecast's window reaches: the end of tomorrow, local,
#: is at most 48 h (49 h over a fall-back night) away.
FORECAST_AHEAD = 50
#: Cells whose air one source call asks for (`fetch_cell_air`): about 25,000 samples when
#: each wants a forecast's hours.
CHUNK_CELLS = 256


@attrs.frozen(order=True)
class Cell:
    """A 0.01 degree grid cell, by the integer row and column of its centre (hundredths of a
    degree): the unit of evaluation, shared by every subscription whose place is in it."""

    row: int
    column: int

    @property
    def centre(self) -> Point:
        """The point the cell's air is asked at."""
        return Point(self.row / CELLS_PER_DEGREE, self.column / CELLS_PER_DEGREE)


def cell_of(point: Point) -> Cell:
    """The cell of `point`: the one whose centre is nearest, as the embedded model rounds."""
    return Cell(round(point.lat * CELLS_PER_DEGREE), round(point.lon * CELLS_PER_DEGREE))


@attrs.frozen
class ObservedDue:
    """An observed subscription is evaluated on the hour ending at `hour_end`."""

    hour_end: datetime


@attrs.frozen
class ForecastDue:
    """A forecast subscription is evaluated on the local `target_day`, the instants from
    `start` (included) to `end` (excluded), UTC."""

    target_day: date
    start: datetime
    end: datetime


Due: TypeAlias = ObservedDue | ForecastDue


def last_hour_end(now: datetime) -> datetime:
    """The end of the hour that ended last at `now` (the start of the current one), UTC."""
    return current_hour(now, 3600)


def due(subscription: Subscription, now: datetime) -> Due | None:
    """What `subscription` is evaluated on at `now`, or None when it is not due.

    Observed ones every hour, on the hour that just ended. Forecast ones from the first
    instant the wall clock of their timezone shows `send_at` on the local day of `now`
    (`send_instant`) until that day ends, each round: the first evaluation decides the
    alert, later ones only catch a forecast that worsened (`forecasts.forecast` sends
    nothing otherwise). Disabled and trip subscriptions never."""
    if subscription.disabled is not None or not isinstance(subscription.target, Place):
        return None
    kind = subscription.kind
    if isinstance(kind, Observed):
        return ObservedDue(last_hour_end(now))
    zone = subscription.zone
    today = now.astimezone(zone).date()
    if now < send_instant(zone, today, kind.send_at):
        return None
    target = today if kind.target_day is TargetDay.TODAY else today + timedelta(days=1)
    return ForecastDue(
        target,
        send_instant(zone, target, time(0)),
        send_instant(zone, target + timedelta(days=1), time(0)),
    )


@functools.lru_cache(maxsize=4096)
def send_instant(zone: ZoneInfo, day: date, wall: time) -> datetime:
    """The first instant (UTC) at which the wall clock in `zone` shows `wall` or later on
    `day`: the wall time itself; its first pass when the clocks fall back over it; the moment
    they jump when they spring forward over it (02:30 in Paris on the last Sunday of March
    is due at 03:00 summer time, the first time the clock shows 02:30 or later)."""
    naive = datetime.combine(day, wall.replace(tzinfo=None, fold=0))
    first = naive.replace(tzinfo=zone).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == naive:
        return first
    # Skipped: one fold reads the time with the offset before the jump, the other with the
    # one after; the jump lies between them, and zones jump at whole seconds.
    other = naive.replace(tzinfo=zone, fold=1).astimezone(UTC)
    low, high = int(min(first, other).timestamp()), int(max(first, other).timestamp())
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, zone).replace(tzinfo=None) >= naive:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)


@attrs.frozen
class CellAir:
    """A cell's hourly concentrations (µg/m³), each pollutant's values parallel, for the
    consecutive hours ending at `first_end`, `first_end` + 1 h, ... (None where the source
    has no value)."""

    first_end: datetime
    values: Mapping[Pollutant, Sequence[float | None]]

    @property
    def hours(self) -> int:
        return max((len(series) for series in self.values.values()), default=0)

    def position(self, hour_end: datetime) -> int:
        """The position of the hour ending at `hour_end` (may be outside the values)."""
        return math.floor((hour_end - self.first_end) / HOUR)


def air_hours(now: datetime, forecast: bool) -> list[datetime]:
    """The ends of the hours a cell's air is asked for at `now`: the last hour and the
    `HISTORY_HOURS` its indexes average over; with `forecast`, also every hour of today and
    tomorrow (in any timezone) and the history of today's first hour."""
    last = last_hour_end(now)
    behind = HISTORY_HOURS - 1 + (_TODAY_BEHIND if forecast else 0)
    ahead = FORECAST_AHEAD if forecast else 0
    return [last + HOUR * k for k in range(-behind, ahead + 1)]


def air_wanted(subscriptions: Iterable[Subscription], now: datetime) -> dict[Cell, bool]:
    """The cells whose air the subscriptions due at `now` need, each with whether it needs
    the forecast's hours (True) or only the last hour's history (False)."""
    wanted: dict[Cell, bool] = {}
    for subscription in subscriptions:
        when = due(subscription, now)
        if when is None:
            continue
        assert isinstance(subscription.target, Place)  # due() evaluates places only
        cell = cell_of(subscription.target.point)
        wanted[cell] = wanted.get(cell, False) or isinstance(when, ForecastDue)
    return wanted


async def fetch_cell_air(
    source: AirQualitySource,
    cells: Mapping[Cell, bool],
    now: datetime,
    *,
    chunk_cells: int = CHUNK_CELLS,
    offload: Offload = inline,
) -> dict[Cell, CellAir]:
    """The air of `cells` (as `air_wanted` gives them) over `air_hours`, asked at each
    cell's centre in the middle of each hour (where fusion compares an hour's observations
    with the background). A source that computes its values (`GriddedAir`) is asked one
    array per hour for every cell at once, on `offload`; any other in one `concentrations`
    call per `chunk_cells` cells. SourceUnavailable from the source propagates."""
    if not cells:
        return {}
    if isinstance(source, GriddedAir):
        return await _gridded_air(source, cells, now, offload)
    found: dict[Cell, CellAir] = {}
    ordered = sorted(cells)
    for first in range(0, len(ordered), chunk_cells):
        chunk = ordered[first : first + chunk_cells]
        hours = {cell: air_hours(now, cells[cell]) for cell in chunk}
        samples = [Sample(cell.centre, end - _HALF_HOUR) for cell in chunk for end in hours[cell]]
        airs = await source.concentrations(samples)
        taken = 0
        for cell in chunk:
            mine = airs[taken : taken + len(hours[cell])]
            taken += len(hours[cell])
            found[cell] = CellAir(hours[cell][0], {p: [air.get(p) for air in mine] for p in SCORED})
    return found


async def _gridded_air(
    source: GriddedAir, cells: Mapping[Cell, bool], now: datetime, offload: Offload
) -> dict[Cell, CellAir]:
    import numpy as np

    ordered = sorted(cells)
    lats = np.array([cell.row / CELLS_PER_DEGREE for cell in ordered], dtype=np.float64)
    lons = np.array([cell.column / CELLS_PER_DEGREE for cell in ordered], dtype=np.float64)
    wide = np.array([cells[cell] for cell in ordered], dtype=np.bool_)
    hours = air_hours(now, True)
    narrow = set(air_hours(now, False))

    def compute() -> FloatArray:
        # One (cells, pollutants) array per hour, stacked (cells, hours, pollutants); the
        # hours only a forecast wants are asked for the cells that want them.
        cube = np.full((len(ordered), len(hours), len(SCORED)), np.nan)
        for column, end in enumerate(hours):
            asked = np.ones(len(ordered), dtype=np.bool_) if end in narrow else wide
            if asked.any():
                cube[asked, column] = source.air_at_hour(lats[asked], lons[asked], end - _HALF_HOUR)
        return cube

    cube = await offload(compute)
    found: dict[Cell, CellAir] = {}
    for position, cell in enumerate(ordered):
        own = hours if cells[cell] else [end for end in hours if end in narrow]
        offset = hours.index(own[0])
        block = cube[position, offset : offset + len(own)]
        found[cell] = CellAir(
            own[0],
            {
                pollutant: [None if math.isnan(v) else v for v in block[:, k].tolist()]
                for k, pollutant in enumerate(SCORED)
            },
        )
    return found


#: Each index's category names, best first: a category's number is its position here, as
#: a subscription's threshold counts them (`subscriptions.INDEX_CATEGORIES`).
_CATEGORY_NAMES: dict[str, tuple[str, ...]] = {
    us_epa.CODE: tuple(row[1] for row in us_epa.CATEGORIES),
    eu_eaqi.CODE: tuple(row[0] for row in eu_eaqi.BANDS),
    uk_daqi.CODE: tuple(row[1] for row in uk_daqi.BANDS),
}
_BY_CODE = {index.code: index for index in OFFICIAL_INDEXES}


def category_number(value: IndexValue) -> int:
    """The category of an index value as a threshold counts it: 0 the best."""
    return _CATEGORY_NAMES[value.code].index(value.category)


def index_of(subscription: Subscription, country: str | None) -> OfficialIndex:
    """The index `subscription` is judged on: the one it names, else the place's own (the
    official index of `country`; where there is none, the first the service computes, as
    the conditions' advice is the first index's)."""
    if subscription.index is not None:
        return _BY_CODE[subscription.index]
    return indexes_for(country)[0]


class CellCategories:
    """The categories of one cell's hours on each index, computed once each whatever number
    of subscriptions ask (the official index functions on the `HISTORY_HOURS` ending at
    each hour, as the conditions compute them)."""

    def __init__(self, air: CellAir) -> None:
        self.air = air
        self._hours = air.hours
        self._known: dict[tuple[str, int], int | None] = {}
        self._worst: dict[tuple[str, datetime, datetime], int | None] = {}

    def at(self, index: OfficialIndex, position: int) -> int | None:
        """The category of the hour at `position` on `index`; None without data."""
        if not 0 <= position < self._hours:
            return None
        key = (index.code, position)
        if key not in self._known:
            start = max(0, position + 1 - HISTORY_HOURS)
            history: HourlyHistory = {
                p: series[start : position + 1] for p, series in self.air.values.items()
            }
            value = index.compute(history)
            self._known[key] = None if value is None else category_number(value)
        return self._known[key]

    def worst(self, index: OfficialIndex, start: datetime, end: datetime) -> int | None:
        """The worst category of the hours whose middle lies in [start, end); None when
        none of them has data. Kept per day: a cell's subscriptions share few days."""
        key = (index.code, start, end)
        if key not in self._worst:
            self._worst[key] = self._scan(index, start, end)
        return self._worst[key]

    def _scan(self, index: OfficialIndex, start: datetime, end: datetime) -> int | None:
        first = max(0, math.ceil((start + _HALF_HOUR - self.air.first_end) / HOUR))
        stop = min(self._hours, math.ceil((end + _HALF_HOUR - self.air.first_end) / HOUR))
        found = [c for k in range(first, stop) if (c := self.at(index, k)) is not None]
        return max(found) if found else None


@attrs.frozen(kw_only=True)
class Decision:
    """What an evaluation decided for one subscription: save `blob` (its new state) if the
    stored version is still `expected_version`, and record `events` in the same unit of
    work; a lost compare-and-set means another worker decided first, and nothing here may
    be used. `restarted` says the stored state was unreadable and was replaced by a fresh
    one (the caller logs it)."""

    subscription_id: uuid.UUID
    expected_version: int
    blob: str
    events: Events
    restarted: bool = False


def decide(
    batch: Iterable[tuple[Subscription, StoredState]],
    air: Mapping[Cell, CellAir],
    countries: Mapping[Cell, str | None],
    now: datetime,
) -> list[Decision]:
    """Evaluate each subscription of `batch` with its stored state at `now`, on the air of
    its cell (`fetch_cell_air`) and the cell's country (the caller looks it up; a cell
    missing is one without a country), for the subscriptions without a named index.

    A decision is returned for every subscription whose state changed or that has events:
    due ones, and any whose held-back events came due (their quiet hours over). A cell
    without air for the hours asked decides nothing new (a missing hour, for episodes).

    This is CPU work (about 0.1 ms a subscription): a caller on an event loop runs it on
    its `Offload`, a batch of a few thousand subscriptions at a time.
    """
    categories: dict[Cell, CellCategories] = {}
    decisions: list[Decision] = []
    for subscription, stored in batch:
        target = subscription.target
        if subscription.disabled is not None or not isinstance(target, Place):
            continue
        when = due(subscription, now)
        if when is None and stored.blob is None:
            continue
        state, restarted = _state_of(subscription, stored)
        if when is None:
            new_state, events = release(state, now)
        else:
            cell = cell_of(target.point)
            cell_air = air.get(cell)
            if cell_air is not None and cell not in categories:
                categories[cell] = CellCategories(cell_air)
            found = categories.get(cell)
            index = index_of(subscription, countries.get(cell))
            new_state, events = _evaluate(subscription, state, when, found, index, now)
        if not restarted and not events and new_state == state:
            continue
        decisions.append(
            Decision(
                subscription_id=subscription.id,
                expected_version=stored.version,
                blob=encode_state(new_state),
                events=events,
                restarted=restarted,
            )
        )
    return decisions


def _state_of(subscription: Subscription, stored: StoredState) -> tuple[AlertState, bool]:
    """The stored state, or a fresh one (and True) when it is unreadable or of the other
    kind than the subscription's."""
    fresh: AlertState = (
        ObservedState() if isinstance(subscription.kind, Observed) else ForecastState()
    )
    if stored.blob is None:
        return fresh, False
    try:
        state = decode_state(stored.blob)
    except MalformedState:
        return fresh, True
    if type(state) is not type(fresh):
        return fresh, True
    return state, False


def _evaluate(
    subscription: Subscription,
    state: AlertState,
    when: Due,
    cell: CellCategories | None,
    index: OfficialIndex,
    now: datetime,
) -> tuple[AlertState, Events]:
    kind = subscription.kind
    if isinstance(when, ObservedDue):
        assert isinstance(kind, Observed)
        assert isinstance(state, ObservedState)
        category = None if cell is None else cell.at(index, cell.air.position(when.hour_end))
        if category is None:
            return release(state, now)
        rule = ObservedRule(
            subscription_id=subscription.id,
            threshold=subscription.threshold,
            direction=subscription.direction,
            hysteresis_categories=kind.hysteresis_categories,
            hysteresis_hours=kind.hysteresis_hours,
            zone=subscription.zone,
            quiet=subscription.quiet_hours,
        )
        return observe(state, rule, when.hour_end, category, now)
    assert isinstance(kind, Forecast)
    assert isinstance(state, ForecastState)
    worst = None if cell is None else cell.worst(index, when.start, when.end)
    if worst is None:
        return release(state, now)
    forecast_rule = ForecastRule(
        subscription_id=subscription.id,
        threshold=subscription.threshold,
        direction=subscription.direction,
        zone=subscription.zone,
        quiet=subscription.quiet_hours,
    )
    return forecast(state, forecast_rule, when.target_day, worst, now)
