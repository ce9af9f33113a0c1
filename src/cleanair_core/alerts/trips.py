"""Trip alerts: the air on a usual trip, told before it is made, with the best departure
within an hour of the usual one and the dose it saves (issue 32; docs/alerts.md, "Trip
alerts").

A trip subscription is told about one trip at a time, the one made on a target day:

- `trip_due` says when: the forecast kind from its `send_at` on the local day, about today's
  or tomorrow's trip, until that day ends or the trip's usual departure, whichever is first;
  the observed kind `OBSERVED_LEAD` before the usual departure, about that very trip. A
  target day that is not one of the trip's `days` has no trip: nothing to tell.
- `route_category` is what the threshold is checked on: the worst official index category
  of the hours the usual departure's trip spends in each grid cell along the route.
- `forecasts.forecast` decides, on that category and the target day: once a day unless it
  worsens by a category, quiet hours respected.
- `trip_advice` is what an alert adds: every departure `STEP` apart within `WINDOW` of the
  usual one, its inhaled dose along the route by the dose rules a route plan uses
  (`trip_dose`), and the least.
- `decide_trip` does all of it for one subscription and its stored state, which also keeps
  the route (`TripState`).

Everything here is pure: the time, the air and the route are passed in, nothing is stored.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import attrs

from cleanair_core.air.activities import speed_m_s, ventilation_ratio
from cleanair_core.air.dose import air_load, dose_pollutants
from cleanair_core.air.indexes import OfficialIndex
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.alerts.alert_states import MalformedState, decode_state, encode_state
from cleanair_core.alerts.evaluation import (
    HOUR,
    Cell,
    CellAir,
    CellCategories,
    cell_of,
    index_of,
    last_hour_end,
    send_instant,
)
from cleanair_core.alerts.events import Events, release
from cleanair_core.alerts.forecasts import ForecastRule, ForecastState, forecast
from cleanair_core.alerts.messages import TripAdvice
from cleanair_core.alerts.quiet_hours import quiet_until
from cleanair_core.alerts.rounds import MIN_PAUSE, TRIP_PAUSE
from cleanair_core.alerts.subscriptions import (
    Forecast,
    StoredState,
    Subscription,
    TargetDay,
    Trip,
)
from cleanair_core.alerts.trip_routes import MalformedRoute, TripRoute, decode_route, encode_route
from cleanair_core.routes.departures import saved_pct
from cleanair_core.routes.planner import MATERIAL_REDUCTION_PCT
from cleanair_core.routes.times import time_weights

#: Departures are tried up to this long before and after the usual one ...
WINDOW = timedelta(minutes=60)
#: ... this far apart: 13 departures, the usual one in the middle.
STEP = timedelta(minutes=10)
#: The observed kind tells a trip this long before its usual departure (docs/alerts.md
#: says why a trip's "observed" alert is this one): the whole window is then still ahead.
OBSERVED_LEAD = timedelta(hours=1)
#: A departure other than the usual one is advised only when it saves at least this share
#: of the usual dose: the route planner's bar for a materially cleaner route (3 %), within
#: which two doses are not told apart.
MATERIAL_SAVING = MATERIAL_REDUCTION_PCT / 100
#: The format of the trip state written; `decode_trip_state` reads it.
TRIP_STATE_VERSION = 1


# -- When a trip is told --------------------------------------------------------------------


@attrs.frozen
class TripDue:
    """A trip subscription is told, from `send` (included) to `until` (excluded), about the
    trip of the local `target_day`, usually leaving at `departure` (UTC)."""

    target_day: date
    departure: datetime
    send: datetime
    until: datetime

    @property
    def departures(self) -> list[datetime]:
        """The departures compared: every `STEP` within `WINDOW` of the usual one, in order."""
        steps = WINDOW // STEP
        return [self.departure + STEP * k for k in range(-steps, steps + 1)]


def _occasion(subscription: Subscription, day: date) -> TripDue | None:
    """The telling that belongs to the local `day`: for the forecast kind, the one sent on
    that day; for the observed kind, the one about that day's trip. None when its target day
    has no trip, or it would end before it starts (a "today" forecast sent after the trip)."""
    trip = subscription.target
    assert isinstance(trip, Trip)
    zone, kind = subscription.zone, subscription.kind
    if isinstance(kind, Forecast):
        target = day if kind.target_day is TargetDay.TODAY else day + timedelta(days=1)
        send = send_instant(zone, day, kind.send_at)
        departure = send_instant(zone, target, trip.departure)
        until = min(departure, send_instant(zone, day + timedelta(days=1), time(0)))
    else:
        target = day
        departure = send_instant(zone, target, trip.departure)
        send, until = departure - OBSERVED_LEAD, departure
    if target.isoweekday() not in trip.days or send >= until:
        return None
    return TripDue(target, departure, send, until)


def _occasions(subscription: Subscription, first: date, days: int) -> Iterator[TripDue]:
    for k in range(days):
        found = _occasion(subscription, first + timedelta(days=k))
        if found is not None:
            yield found


def trip_due(subscription: Subscription, now: datetime) -> TripDue | None:
    """What the trip subscription is told about at `now`, or None when it is not due (a
    disabled one, a place's, or between its tellings)."""
    if subscription.disabled is not None or not isinstance(subscription.target, Trip):
        return None
    today = now.astimezone(subscription.zone).date()
    # An observed telling starts an hour before its trip: the day before's, after 23:00.
    for due in _occasions(subscription, today - timedelta(days=1), 3):
        if due.send <= now < due.until:
            return due
    return None


def next_trip_due(subscription: Subscription, blob: str | None, now: datetime) -> datetime:
    """When the trip subscription, evaluated at `now` into the state `blob`, is due again:
    every hour while it is due (a forecast that worsened), else at its next telling; sooner
    when an event held back by quiet hours comes due. What `rounds.next_due` is for places."""
    if not isinstance(subscription.target, Trip):
        raise ValueError("not a trip subscription")
    today = now.astimezone(subscription.zone).date()
    current = trip_due(subscription, now)
    hourly = last_hour_end(now) + HOUR
    if current is not None and hourly < current.until:
        due = hourly
    else:
        later = (d.send for d in _occasions(subscription, today - timedelta(days=1), 10))
        due = next((send for send in later if send > now), now + TRIP_PAUSE)
    held = _first_held(blob)
    if held is not None:
        due = min(due, max(held, now + MIN_PAUSE))
    return due


def _first_held(blob: str | None) -> datetime | None:
    if blob is None:
        return None
    try:
        pending = decode_trip_state(blob).forecast_state.pending
    except MalformedState:
        return None
    return pending[0].due_at if pending else None


# -- The air along the route ------------------------------------------------------------------


#: Instants are counted in microseconds since 1970 (`datetime`'s own resolution) and hours
#: by the number of their end, so that a point's hour is one integer division.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_HOUR_US = 3_600_000_000
#: A cell's hour is keyed by one int, `cell code x _HOUR_KEYS + hour number`: hour numbers
#: stay below it until the year 3100, and cell codes (`_cell_code`) are distinct.
_HOUR_KEYS = 10**7
#: The dose is per hour of breathing (`air.dose`).
_SECONDS_PER_HOUR = 3600.0


def _micros(at: datetime) -> int:
    return (at - _EPOCH) // _MICROSECOND


def _cell_code(cell: Cell) -> int:
    # Rows are within +-9000 and columns within +-18000: no two cells share a code.
    return cell.row * 100_000 + cell.column


class TripAir:
    """The hourly air of the cells trips cross (`evaluation.fetch_cell_air`, the forecast's
    hours), with what is read from it kept for every trip of a round: each cell's hours as
    concentrations, their air loads (`air.dose.air_load`) and their categories
    (`evaluation.CellCategories`). The value asked in the middle of an hour stands for all
    of it, as the categories of places take it."""

    def __init__(self, cells: Mapping[Cell, CellAir]) -> None:
        self.cells = cells
        self._by_code = {_cell_code(cell): cell for cell in cells}
        self._airs: dict[int, Concentrations] = {}
        self._loads: dict[tuple[Pollutant, ...], dict[int, float]] = {}
        self._categories: dict[str, dict[int, int | None]] = {}
        self._cell_categories: dict[Cell, CellCategories] = {}

    def air(self, cell: Cell, hour_end: datetime) -> Concentrations:
        """The concentrations of `cell` in the hour ending at `hour_end` (empty when
        unknown)."""
        return self._air(_cell_code(cell) * _HOUR_KEYS + _micros(hour_end) // _HOUR_US)

    def category(self, cell: Cell, index: OfficialIndex, hour_end: datetime) -> int | None:
        """The category on `index` of `cell`'s hour ending at `hour_end`; None without data."""
        return self._category(index, _cell_code(cell) * _HOUR_KEYS + _micros(hour_end) // _HOUR_US)

    def _cell_hour(self, key: int) -> tuple[CellAir | None, int]:
        """The air of the key's cell (None: not asked) and the position of its hour."""
        code, hour = divmod(key, _HOUR_KEYS)
        cell = self._by_code.get(code)
        cell_air = None if cell is None else self.cells[cell]
        if cell_air is None:
            return None, -1
        return cell_air, cell_air.position(_EPOCH + HOUR * hour)

    def _air(self, key: int) -> Concentrations:
        found = self._airs.get(key)
        if found is None:
            found = {}
            cell_air, k = self._cell_hour(key)
            if cell_air is not None and k >= 0:
                found = {
                    p: series[k] if k < len(series) else None
                    for p, series in cell_air.values.items()
                }
            self._airs[key] = found
        return found

    def _loads_of(self, keys: Iterable[int], pollutants: tuple[Pollutant, ...]) -> dict[int, float]:
        table = self._loads.setdefault(pollutants, {})
        for key in keys:
            if key not in table:
                table[key] = air_load(self._air(key), pollutants)
        return table

    def _category(self, index: OfficialIndex, key: int) -> int | None:
        table = self._categories.setdefault(index.code, {})
        if key not in table:
            cell_air, k = self._cell_hour(key)
            if cell_air is None:
                table[key] = None
            else:
                cell = self._by_code[key // _HOUR_KEYS]
                categories = self._cell_categories.get(cell)
                if categories is None:
                    categories = self._cell_categories[cell] = CellCategories(cell_air)
                table[key] = categories.at(index, k)
        return table[key]


def route_cells(route: TripRoute) -> list[Cell]:
    """The grid cell of each point of `route`."""
    return [cell_of(point) for point in route.points]


def trip_air_wanted(
    trips: Iterable[tuple[Subscription, TripRoute]], now: datetime
) -> dict[Cell, bool]:
    """The cells whose air the trips due at `now` need, all with the forecast's hours (True):
    `evaluation.air_wanted`'s form, to merge with the places' (a cell wanting the forecast's
    hours for either)."""
    wanted: dict[Cell, bool] = {}
    for subscription, route in trips:
        if trip_due(subscription, now) is not None:
            wanted.update(dict.fromkeys(route_cells(route), True))
    return wanted


def trip_times(route: TripRoute, trip: Trip, departure: datetime) -> list[datetime]:
    """When a trip leaving at `departure` reaches each point of `route`: at the activity's
    speed, as a route plan times its waypoints (`routes.times.estimated_times`)."""
    speed = speed_m_s(trip.activity.activity)
    return [departure + timedelta(seconds=metres / speed) for metres in route.distances]


@attrs.frozen
class TripCourse:
    """A trip along its route, the same whenever it leaves: each point's cell (`codes`: as
    `TripAir` keys them), the microseconds from the departure to it (`trip_times`), the
    seconds of the trip each point stands for (`routes.times.time_weights`), and how much
    the activity breathes (`air.activities.ventilation_ratio`)."""

    codes: tuple[int, ...]
    offsets: tuple[int, ...]
    weights: tuple[float, ...]
    ventilation_ratio: float


def trip_course(route: TripRoute, trip: Trip) -> TripCourse:
    """The course of `trip` along `route`: computed once, it serves every departure."""
    times = trip_times(route, trip, _EPOCH)
    return TripCourse(
        codes=tuple(_cell_code(cell) for cell in route_cells(route)),
        offsets=tuple(_micros(at) for at in times),
        weights=tuple(time_weights(times)),
        ventilation_ratio=ventilation_ratio(trip.activity.activity),
    )


def _hour_keys(course: TripCourse, departure: datetime) -> list[int]:
    """Per point, the key of its cell's hour when the trip leaves at `departure`: the hour
    it is reached in (a point reached at 08:00 sharp is in the hour ending 09:00)."""
    start = _micros(departure)
    return [
        code * _HOUR_KEYS + (start + offset) // _HOUR_US + 1
        for code, offset in zip(course.codes, course.offsets, strict=True)
    ]


def trip_dose(course: TripCourse, air: TripAir, departure: datetime) -> float | None:
    """The relative inhaled dose of the trip leaving at `departure`, by the rules of a route
    plan's dose (`routes.enrichment.enrich`, outdoors: `air.dose.inhaled_dose`), on the air of
    each point's cell in the hour it is reached: the dose pollutants are those known at every
    point (`dose_pollutants`), each point's air load (`air_load`) weighs the seconds it stands
    for, times the activity's breathing. None when no pollutant is known at every point.
    Loads are kept per cell and hour in `air`: the same figures `inhaled_dose` sums."""
    keys = _hour_keys(course, departure)
    distinct = set(keys)
    pollutants = dose_pollutants([air._air(key) for key in distinct])
    if not pollutants:
        return None
    loads = air._loads_of(distinct, pollutants)
    exposure_s = sum(
        [loads[key] * weight for key, weight in zip(keys, course.weights, strict=True)]
    )
    return exposure_s / _SECONDS_PER_HOUR * course.ventilation_ratio


def route_category(
    course: TripCourse, air: TripAir, index: OfficialIndex, departure: datetime
) -> int | None:
    """The worst category on `index` along the route for the trip leaving at `departure`:
    of each point's cell in the hour it is reached. None when no point has one."""
    found = [
        c
        for key in set(_hour_keys(course, departure))
        if (c := air._category(index, key)) is not None
    ]
    return max(found) if found else None


@attrs.frozen
class DepartureDose:
    """One departure compared and its trip's dose (None: unknown)."""

    departure: datetime
    dose: float | None


def departure_doses(course: TripCourse, air: TripAir, due: TripDue) -> list[DepartureDose]:
    """Every departure of `due` (`TripDue.departures`) with its trip's dose, in order."""
    return [DepartureDose(t, trip_dose(course, air, t)) for t in due.departures]


def trip_advice(
    doses: Sequence[DepartureDose], usual: datetime, not_before: datetime, zone: ZoneInfo
) -> TripAdvice:
    """The best departure among `doses` not before `not_before` (when the alert goes out),
    as a local time in `zone`, and the share of the usual departure's dose it saves.

    The least dose wins, the departure nearest the usual one among equals, then the earlier.
    The usual departure stays the advice (saving 0) unless another saves at least
    `MATERIAL_SAVING`. Unknown (None) without any dose to compare."""
    usual_dose = next((d.dose for d in doses if d.departure == usual), None)
    open_ = [d for d in doses if d.departure >= not_before and d.dose is not None]
    if not open_:
        return TripAdvice()
    best = min(open_, key=lambda d: (d.dose, abs(d.departure - usual), d.departure))
    if usual_dose is not None and usual >= not_before:
        assert best.dose is not None
        if best.dose > usual_dose * (1 - MATERIAL_SAVING):
            best = DepartureDose(usual, usual_dose)
    pct = saved_pct(best.dose, usual_dose)
    return TripAdvice(
        best_departure=best.departure.astimezone(zone).time().replace(fold=0),
        dose_saved=None if pct is None else round(pct / 100, 3),
    )


# -- The state kept -------------------------------------------------------------------------------


@attrs.frozen
class TripState:
    """What a trip subscription's evaluator keeps: its usual `route`, the forecast state
    machine's state, and the advice of each event it holds back (by id), decided with it."""

    route: TripRoute
    forecast_state: ForecastState = attrs.field(factory=ForecastState)
    advice: Mapping[uuid.UUID, TripAdvice] = attrs.field(factory=dict, hash=False)


def encode_trip_state(state: TripState) -> str:
    """`state` as compact JSON text: `{"kind": "trip", "v", "route", "forecast", "advice"}`,
    the forecast's part as `alert_states` writes a forecast state."""
    document = {
        "kind": "trip",
        "v": TRIP_STATE_VERSION,
        "route": encode_route(state.route),
        "forecast": json.loads(encode_state(state.forecast_state)),
        "advice": [
            {
                "event_id": str(event_id),
                "best_departure": None
                if advice.best_departure is None
                else advice.best_departure.isoformat(),
                "dose_saved": advice.dose_saved,
            }
            for event_id, advice in sorted(state.advice.items())
        ],
    }
    return json.dumps(document, separators=(",", ":"))


def decode_trip_state(blob: str) -> TripState:
    """The state `encode_trip_state` wrote; MalformedState for anything else."""
    try:
        document = json.loads(blob)
        if document["kind"] != "trip":
            raise MalformedState("the stored alert state is not a trip's")
        if document["v"] != TRIP_STATE_VERSION:
            raise MalformedState("the state was written in a format this release cannot read")
        forecast_state = decode_state(json.dumps(document["forecast"]))
        if not isinstance(forecast_state, ForecastState):
            raise MalformedState("a trip's state holds a forecast state")
        advice = {
            uuid.UUID(item["event_id"]): TripAdvice(
                best_departure=_read_time(item["best_departure"]),
                dose_saved=_read_share(item["dose_saved"]),
            )
            for item in document["advice"]
        }
        return TripState(decode_route(document["route"]), forecast_state, advice)
    except MalformedState:
        raise
    except (MalformedRoute, ValueError, KeyError, TypeError, AttributeError) as error:
        raise MalformedState("the stored trip state is not readable") from error


def _read_time(text: object) -> time | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError("a departure is a local time")
    return time.fromisoformat(text)


def _read_share(value: object) -> float | None:
    if value is None:
        return None
    if type(value) not in (int, float):
        raise TypeError("a saving is a number")
    return float(value)  # type: ignore[arg-type]


def stored_route(state: StoredState) -> TripRoute | None:
    """The route kept in a trip subscription's stored state; None before the first
    evaluation or when the state cannot be read (the caller plans the route then)."""
    if state.blob is None:
        return None
    try:
        return decode_trip_state(state.blob).route
    except MalformedState:
        return None


# -- Deciding -------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TripDecision:
    """What an evaluation decided for one trip subscription: as `evaluation.Decision` (save
    `blob` if the stored version is still `expected_version`, record `events` with it), with
    the `advice` of each event (by id) for its message (`messages.event_message`'s `trip`)
    and the `index` code the category was read on (its `index`)."""

    subscription_id: uuid.UUID
    expected_version: int
    blob: str
    events: Events
    advice: Mapping[uuid.UUID, TripAdvice]
    index: str
    restarted: bool = False


def decide_trip(
    subscription: Subscription,
    state: StoredState,
    route: TripRoute,
    cell_air: Mapping[Cell, CellAir] | TripAir,
    countries: Mapping[Cell, str | None],
    now: datetime,
) -> TripDecision | None:
    """Evaluate the trip `subscription` with its stored `state` at `now`, along `route` (the
    one kept in the state, `stored_route`, or newly planned), on the air of the route's cells
    (`fetch_cell_air` of `trip_air_wanted`'s cells; a `TripAir` shares the work between the
    trips of a round) and the country of the trip's start cell, for an index not named.

    None when nothing changed; else the decision, whose blob keeps `route` (a first
    evaluation always decides, to keep it). A due trip with
    no air at the usual departure decides nothing new, nor one whose alert could only be
    delivered (quiet hours) after the last departure compared: both release held-back
    events only. CPU work: a caller on an event loop runs it on its `Offload`."""
    trip = subscription.target
    if not isinstance(trip, Trip):
        raise ValueError("not a trip subscription")
    if subscription.disabled is not None:
        return None
    air = cell_air if isinstance(cell_air, TripAir) else TripAir(cell_air)
    old, restarted = _trip_state_of(state, route)
    index = index_of(subscription, countries.get(cell_of(trip.start)))
    when = trip_due(subscription, now)
    new_forecast, events = release(old.forecast_state, now)
    advice: dict[uuid.UUID, TripAdvice] = dict(old.advice)
    if when is not None:
        course = trip_course(route, trip)
        category = route_category(course, air, index, when.departure)
        last = when.departures[-1]
        if (
            category is not None
            and quiet_until(subscription.quiet_hours, subscription.zone, now) <= last
        ):
            rule = ForecastRule(
                subscription_id=subscription.id,
                threshold=subscription.threshold,
                direction=subscription.direction,
                zone=subscription.zone,
                quiet=subscription.quiet_hours,
            )
            new_forecast, events = forecast(
                old.forecast_state, rule, when.target_day, category, now
            )
            decided = [e for e in (*events, *new_forecast.pending) if e.id not in advice]
            if decided:
                doses = departure_doses(course, air, when)
                for event in decided:
                    advice[event.id] = trip_advice(
                        doses, when.departure, event.due_at, subscription.zone
                    )
    waiting = {e.id: advice.get(e.id, TripAdvice()) for e in new_forecast.pending}
    new = TripState(route, new_forecast, waiting)
    # A first evaluation saves the route even when nothing is told: it is planned once.
    if state.blob is not None and not restarted and not events and new == old:
        return None
    return TripDecision(
        subscription_id=subscription.id,
        expected_version=state.version,
        blob=encode_trip_state(new),
        events=events,
        advice={e.id: advice.get(e.id, TripAdvice()) for e in events},
        index=index.code,
        restarted=restarted,
    )


def _trip_state_of(stored: StoredState, route: TripRoute) -> tuple[TripState, bool]:
    """The stored state (with `route`, which may be new), or a fresh one (and True) when it
    cannot be read."""
    if stored.blob is None:
        return TripState(route), False
    try:
        state = decode_trip_state(stored.blob)
    except MalformedState:
        return TripState(route), True
    return state, False
