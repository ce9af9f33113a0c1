"""Trip alerts: when a trip subscription is told (its days, across timezones), its route kept
in the state, the dose of each departure by the route plans' own dose code, the best
departure and what it saves, the category along the route, and deciding once a day.
"""

from __future__ import annotations

import itertools
import json
import math
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core.air.activities import speed_m_s
from cleanair_core.air.indexes import eu_eaqi
from cleanair_core.air.indexes.registry import OFFICIAL_INDEXES
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.alerts.alert_states import MalformedState
from cleanair_core.alerts.evaluation import Cell, CellAir, CellCategories, cell_of
from cleanair_core.alerts.events import AlertEvent, Direction, EventKind, forecast_event_id
from cleanair_core.alerts.forecasts import ForecastState
from cleanair_core.alerts.messages import TripAdvice, event_message
from cleanair_core.alerts.quiet_hours import QuietHours
from cleanair_core.alerts.subscriptions import (
    Audience,
    Disabled,
    Forecast,
    Observed,
    Place,
    StoredState,
    Subscription,
    TargetDay,
    Trip,
)
from cleanair_core.alerts.trip_routes import (
    ROUTE_STEP_M,
    TripRoute,
    decode_route,
    direct_route,
    encode_route,
    trip_route,
)
from cleanair_core.alerts.trips import (
    MATERIAL_SAVING,
    STEP,
    WINDOW,
    DepartureDose,
    TripAir,
    TripState,
    decide_trip,
    decode_trip_state,
    departure_doses,
    encode_trip_state,
    next_trip_due,
    route_category,
    route_cells,
    stored_route,
    trip_advice,
    trip_air_wanted,
    trip_course,
    trip_dose,
    trip_due,
    trip_times,
)
from cleanair_core.geo import EARTH_RADIUS_M, Point, distance_m
from cleanair_core.routes.enrichment import enrich
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.times import estimated_times

HELSINKI = ZoneInfo("Europe/Helsinki")  # UTC+2 in November
START = Point(60.17, 24.93)
EAQI = next(index for index in OFFICIAL_INDEXES if index.code == eu_eaqi.CODE)
HOUR = timedelta(hours=1)
#: Sunday 22 November 2026 at 21:05 in Helsinki: a "tomorrow at 21:00" trip alert is due,
#: about Monday's trip, usually leaving at 08:00 local, 06:00 UTC.
SUNDAY_EVENING = datetime(2026, 11, 22, 19, 5, tzinfo=UTC)
MONDAY = date(2026, 11, 23)
USUAL = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)
WEEKDAYS = frozenset(range(1, 6))


def east_of(start: Point, metres: float) -> Point:
    """The point `metres` due east of `start` (on its parallel, near enough for a city)."""
    degrees = math.degrees(metres / (EARTH_RADIUS_M * math.cos(math.radians(start.lat))))
    return Point(start.lat, start.lon + degrees)


#: A 1.5 km walk due east, about 19 minutes at 1.3 m/s, across three or four cells.
END = east_of(START, 1500)


TRIP = Trip(START, END, PlanActivityType.WALKING, time(8, 0), WEEKDAYS)


def trip_subscription(**changes: object) -> Subscription:
    fields: dict[str, object] = {
        "id": uuid.UUID(int=7),
        "owner": "alice",
        "connection_id": "c1",
        "created_at": SUNDAY_EVENING - timedelta(days=3),
        "target": TRIP,
        "index": eu_eaqi.CODE,
        "threshold": 2,
        "direction": Direction.WORSE,
        "audience": Audience.GENERAL,
        "kind": Forecast(TargetDay.TOMORROW, time(21, 0)),
        "timezone": "Europe/Helsinki",
    }
    fields.update(changes)
    return Subscription(**fields)  # type: ignore[arg-type]


def with_trip(subscription: Subscription, **changes: object) -> Subscription:
    assert isinstance(subscription.target, Trip)
    return attrs.evolve(subscription, target=attrs.evolve(subscription.target, **changes))  # type: ignore[arg-type]


ROUTE = direct_route(START, END)
COURSE = trip_course(ROUTE, TRIP)

AirOf = Callable[[Cell, datetime], float]
FIRST_END = datetime(2026, 11, 21, 0, 0, tzinfo=UTC)
HOURS = 120


def cell_airs(cells: set[Cell], pm25: AirOf) -> dict[Cell, CellAir]:
    """PM2.5 only, `pm25(cell, hour_end)` for each hour from `FIRST_END` on."""
    ends = [FIRST_END + HOUR * k for k in range(HOURS)]
    return {
        cell: CellAir(FIRST_END, {Pollutant.PM25: [pm25(cell, e) for e in ends]}) for cell in cells
    }


def route_air(pm25: AirOf, route: TripRoute = ROUTE) -> dict[Cell, CellAir]:
    return cell_airs(set(route_cells(route)), pm25)


def hour_end_of(at: datetime) -> datetime:
    """The end of the hour `at` lies in, by hand."""
    return at.replace(minute=0, second=0, microsecond=0) + HOUR


def clean_then_poor(cell: Cell, hour_end: datetime) -> float:
    """Good air (5) in the hours ending by 06:00 UTC on Monday, Poor (60) after them."""
    return 5.0 if hour_end <= USUAL else 60.0


# -- when a trip is told ------------------------------------------------------------------------


def test_a_tomorrow_forecast_is_due_from_its_sending_time_until_midnight() -> None:
    subscription = trip_subscription()
    due = trip_due(subscription, SUNDAY_EVENING)
    assert due is not None
    assert due.target_day == MONDAY
    assert due.departure == USUAL
    assert due.send == datetime(2026, 11, 22, 19, 0, tzinfo=UTC)
    assert due.until == datetime(2026, 11, 22, 22, 0, tzinfo=UTC)  # local midnight
    assert trip_due(subscription, due.send - timedelta(microseconds=1)) is None
    assert trip_due(subscription, due.until - timedelta(microseconds=1)) == due
    assert trip_due(subscription, due.until) is None


def test_a_day_without_a_trip_has_nothing_to_tell() -> None:
    subscription = trip_subscription()
    friday_evening = datetime(2026, 11, 27, 19, 5, tzinfo=UTC)  # about Saturday's trip
    assert trip_due(subscription, friday_evening) is None
    thursday_evening = friday_evening - timedelta(days=1)  # about Friday's
    due = trip_due(subscription, thursday_evening)
    assert due is not None
    assert due.target_day == date(2026, 11, 27)
    weekends = with_trip(subscription, days=frozenset({6, 7}))
    assert trip_due(weekends, thursday_evening) is None
    assert trip_due(weekends, friday_evening) is not None


@pytest.mark.parametrize(
    ("zone", "now", "target_day"),
    [
        # Monday 06:10 in Auckland (UTC+13) is Sunday 17:10 UTC.
        ("Pacific/Auckland", datetime(2026, 11, 22, 17, 10, tzinfo=UTC), MONDAY),
        ("Pacific/Auckland", datetime(2026, 11, 23, 17, 10, tzinfo=UTC), None),  # Tuesday there
        ("Pacific/Auckland", datetime(2026, 11, 22, 16, 50, tzinfo=UTC), None),  # 05:50 there
        ("Pacific/Auckland", datetime(2026, 11, 22, 19, 30, tzinfo=UTC), None),  # left at 08:30
        # Monday 06:10 in Los Angeles (UTC-8) is Monday 14:10 UTC.
        ("America/Los_Angeles", datetime(2026, 11, 23, 14, 10, tzinfo=UTC), MONDAY),
        ("America/Los_Angeles", datetime(2026, 11, 22, 17, 10, tzinfo=UTC), None),  # Sunday
        ("America/Los_Angeles", datetime(2026, 11, 24, 7, 10, tzinfo=UTC), None),  # Monday 23:10
        ("Asia/Kolkata", datetime(2026, 11, 23, 0, 40, tzinfo=UTC), MONDAY),  # 06:10, UTC+5:30
    ],
)
def test_the_trips_days_are_its_own_timezones(
    zone: str, now: datetime, target_day: date | None
) -> None:
    subscription = with_trip(
        trip_subscription(timezone=zone, kind=Forecast(TargetDay.TODAY, time(6, 0))),
        departure=time(8, 30),
        days=frozenset({1}),
    )
    due = trip_due(subscription, now)
    assert (None if due is None else due.target_day) == target_day
    if due is not None:
        local = due.departure.astimezone(ZoneInfo(zone))
        assert (local.date(), local.time()) == (MONDAY, time(8, 30))


def test_a_today_forecast_sent_after_the_trip_is_never_due() -> None:
    subscription = trip_subscription(kind=Forecast(TargetDay.TODAY, time(9, 0)))
    monday = datetime(2026, 11, 23, tzinfo=UTC)
    assert all(
        trip_due(subscription, monday + timedelta(minutes=10 * k)) is None for k in range(144)
    )


def test_an_observed_trip_is_told_an_hour_before_its_usual_departure() -> None:
    # Leaving at 00:30 on Tuesdays: told from Monday 23:30 local, about Tuesday's trip.
    subscription = with_trip(
        trip_subscription(kind=Observed()), departure=time(0, 30), days=frozenset({2})
    )
    departure = datetime(2026, 11, 23, 22, 30, tzinfo=UTC)
    due = trip_due(subscription, departure - timedelta(minutes=59))
    assert due is not None
    assert (due.target_day, due.departure) == (date(2026, 11, 24), departure)
    assert (due.send, due.until) == (departure - HOUR, departure)
    assert trip_due(subscription, departure - timedelta(minutes=61)) is None
    assert trip_due(subscription, departure) is None
    # Wednesday's trip would be told on Tuesday at 23:30: not a trip day.
    assert trip_due(subscription, departure + timedelta(days=1) - timedelta(minutes=30)) is None


def test_the_departures_compared_are_ten_minutes_apart_within_an_hour() -> None:
    due = trip_due(trip_subscription(), SUNDAY_EVENING)
    assert due is not None
    assert timedelta(minutes=60) == WINDOW
    assert timedelta(minutes=10) == STEP
    assert due.departures == [USUAL + timedelta(minutes=m) for m in range(-60, 61, 10)]


def test_disabled_and_place_subscriptions_are_not_trips_due() -> None:
    disabled = trip_subscription(disabled=Disabled("gone", SUNDAY_EVENING))
    assert trip_due(disabled, SUNDAY_EVENING) is None
    assert trip_due(trip_subscription(target=Place(START)), SUNDAY_EVENING) is None


def test_a_trip_is_next_due_hourly_while_told_then_at_its_next_telling() -> None:
    subscription = trip_subscription()
    # Told Sunday 21:05 local: again at 22:00 and 23:00, then Monday 21:00 (Tuesday's trip).
    assert next_trip_due(subscription, None, SUNDAY_EVENING) == datetime(
        2026, 11, 22, 20, 0, tzinfo=UTC
    )
    late = datetime(2026, 11, 22, 21, 30, tzinfo=UTC)
    assert next_trip_due(subscription, None, late) == datetime(2026, 11, 23, 19, 0, tzinfo=UTC)
    # Friday evening's would be about Saturday: next told on Sunday at 21:00.
    friday = datetime(2026, 11, 27, 19, 5, tzinfo=UTC)
    assert next_trip_due(subscription, None, friday) == datetime(2026, 11, 29, 19, 0, tzinfo=UTC)
    # The observed kind: an hour before each trip.
    observed = trip_subscription(kind=Observed())
    assert next_trip_due(observed, None, SUNDAY_EVENING) == USUAL - HOUR


def test_a_held_event_brings_the_next_evaluation_forward() -> None:
    quiet = trip_subscription(quiet_hours=QuietHours(time(21, 0), time(7, 45)))
    decision = decide_trip(
        quiet, StoredState(0, None), ROUTE, route_air(clean_then_poor), {}, SUNDAY_EVENING
    )
    assert decision is not None
    assert decision.events == ()
    late = datetime(2026, 11, 22, 21, 30, tzinfo=UTC)
    assert next_trip_due(quiet, decision.blob, late) == datetime(2026, 11, 23, 5, 45, tzinfo=UTC)


# -- the route ----------------------------------------------------------------------------------


def test_a_route_is_resampled_every_step_along_its_length() -> None:
    bend = Point(60.17, 24.9345)  # about 250 m east
    north = Point(60.173, 24.9345)  # about 334 m north
    route = trip_route([START, bend, north])
    length = distance_m(START, bend) + distance_m(bend, north)
    assert route.length_m == pytest.approx(length, abs=0.1)
    assert route.distances[:-1] == tuple(k * ROUTE_STEP_M for k in range(len(route.points) - 1))
    assert len(route.points) == math.ceil(length / ROUTE_STEP_M) + 1
    assert route.points[0] == START
    assert route.points[-1] == north
    # A point past the bend lies on the second leg, as far along it as the route says.
    assert distance_m(bend, route.points[3]) == pytest.approx(
        300 - distance_m(START, bend), abs=0.2
    )


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.builds(Point, st.floats(60.1, 60.25), st.floats(24.8, 25.1)), min_size=1, max_size=12
    )
)
def test_a_resampled_route_keeps_its_length_and_never_jumps(points: list[Point]) -> None:
    route = trip_route(points)
    length = sum(distance_m(a, b) for a, b in itertools.pairwise(points))
    assert route.length_m == pytest.approx(length, abs=0.06)
    assert route.distances[:-1] == tuple(k * ROUTE_STEP_M for k in range(len(route.points) - 1))
    # Kept points are never farther apart than the route between them (rounding aside).
    for a, b, before, after in zip(
        route.points, route.points[1:], route.distances, route.distances[1:], strict=False
    ):
        assert distance_m(a, b) <= after - before + 0.5


def test_a_route_of_one_place_is_one_point() -> None:
    route = direct_route(START, START)
    assert route == TripRoute((START,), (0.0,))


@pytest.mark.parametrize(
    ("points", "distances"),
    [((), ()), ((START,), (1.0,)), ((START, END), (0.0, -1.0)), ((START, END), (0.0,))],
)
def test_a_route_refuses_distances_that_do_not_fit(
    points: tuple[Point, ...], distances: tuple[float, ...]
) -> None:
    with pytest.raises(ValueError, match="route"):
        TripRoute(points, distances)


def test_a_straight_routes_times_are_the_route_plans_times() -> None:
    times = trip_times(ROUTE, TRIP, USUAL)
    planned = estimated_times(ROUTE.points, USUAL, speed_m_s(TRIP.activity.activity))
    assert max(abs((a - b).total_seconds()) for a, b in zip(times, planned, strict=True)) < 0.05
    assert times[-1] - times[0] == timedelta(seconds=ROUTE.length_m / 1.3)


# -- the dose of each departure -----------------------------------------------------------------


def plan_dose(route: TripRoute, departure: datetime, pm25: AirOf) -> float | None:
    """The dose the route-enrichment code gives for the same points and times, with each
    point's air looked up here by hand."""
    times = trip_times(route, TRIP, departure)
    airs: list[Concentrations] = [
        {Pollutant.PM25: pm25(cell_of(p), hour_end_of(t))}
        for p, t in zip(route.points, times, strict=True)
    ]
    return enrich(route.points, times, airs, TRIP.activity.activity).summary.inhaled_dose


def test_a_constant_airs_dose_is_its_load_times_the_time_times_the_breathing() -> None:
    air = TripAir(route_air(lambda cell, end: 30.0))  # twice the WHO guideline
    assert air.air(cell_of(START), USUAL) == {Pollutant.PM25: 30.0}
    assert air.air(cell_of(START), FIRST_END + HOURS * HOUR) == {Pollutant.PM25: None}
    assert air.air(cell_of(START), FIRST_END - HOUR) == {}
    assert air.air(Cell(0, 0), USUAL) == {}
    dose = trip_dose(COURSE, air, USUAL)
    hours = ROUTE.length_m / 1.3 / 3600
    # Walking breathes 26 L/min; times are kept to the microsecond, hence the tolerance.
    assert dose == pytest.approx(2 * hours * 26 / 12, rel=1e-9)
    assert dose == plan_dose(ROUTE, USUAL, lambda cell, end: 30.0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 300), min_size=6, max_size=6),
    st.lists(st.floats(0, 3), min_size=8, max_size=8),
    st.integers(0, 59),
)
def test_a_departures_dose_is_the_route_plans_dose_in_stepped_air(
    by_hour: list[float], by_column: list[float], minute: int
) -> None:
    def pm25(cell: Cell, hour_end: datetime) -> float:
        hour = int((hour_end - USUAL) / HOUR) % len(by_hour)
        return by_hour[hour] * by_column[cell.column % len(by_column)]

    departure = USUAL - HOUR + timedelta(minutes=minute)
    air = TripAir(route_air(pm25))
    assert trip_dose(COURSE, air, departure) == plan_dose(ROUTE, departure, pm25)


def test_a_point_without_air_leaves_the_dose_unknown() -> None:
    cells = route_air(lambda cell, end: 10.0)
    del cells[cell_of(END)]
    assert trip_dose(COURSE, TripAir(cells), USUAL) is None


def test_cycling_breathes_more_but_goes_faster() -> None:
    cycling = attrs.evolve(TRIP, activity=PlanActivityType.CYCLING)
    air = TripAir(route_air(lambda cell, end: 15.0))
    dose = trip_dose(trip_course(ROUTE, cycling), air, USUAL)
    assert dose == pytest.approx(ROUTE.length_m / 5.0 / 3600 * 50 / 12, rel=1e-9)


# -- the best departure -------------------------------------------------------------------------


def doses_of(pm25: AirOf) -> list[DepartureDose]:
    due = trip_due(trip_subscription(), SUNDAY_EVENING)
    assert due is not None
    return departure_doses(COURSE, TripAir(route_air(pm25)), due)


def test_the_best_departure_is_the_least_dose_nearest_the_usual_one() -> None:
    doses = doses_of(clean_then_poor)
    assert [d.dose for d in doses] == [
        plan_dose(ROUTE, d.departure, clean_then_poor) for d in doses
    ]
    advice = trip_advice(doses, USUAL, SUNDAY_EVENING, HELSINKI)
    # 07:00 to 07:40 arrive before 08:00 in good air, all alike: the nearest to 08:00 wins.
    assert advice == TripAdvice(time(7, 40), round(1 - 5 / 60, 3))
    known = [d.dose or 0.0 for d in doses]
    assert known[4] == known[0] < known[5]


def test_the_usual_departure_stays_unless_another_saves_materially() -> None:
    assert trip_advice(doses_of(lambda c, e: 20.0), USUAL, SUNDAY_EVENING, HELSINKI) == TripAdvice(
        time(8, 0), 0.0
    )
    slightly = doses_of(lambda c, e: 20.0 if e <= USUAL else 20.0 / (1 - MATERIAL_SAVING / 2))
    assert trip_advice(slightly, USUAL, SUNDAY_EVENING, HELSINKI) == TripAdvice(time(8, 0), 0.0)
    enough = doses_of(lambda c, e: 20.0 if e <= USUAL else 20.0 / (1 - MATERIAL_SAVING * 2))
    assert trip_advice(enough, USUAL, SUNDAY_EVENING, HELSINKI).best_departure == time(7, 40)


def test_departures_before_the_alert_goes_out_are_not_advised() -> None:
    doses = doses_of(clean_then_poor)
    advice = trip_advice(doses, USUAL, USUAL - timedelta(minutes=15), HELSINKI)
    best = min(doses[5:], key=lambda d: d.dose or math.inf)
    assert best.departure == USUAL - timedelta(minutes=10)
    assert advice.best_departure == time(7, 50)
    assert advice.dose_saved == round(1 - (best.dose or 0) / (doses[6].dose or 1), 3)


def test_without_doses_there_is_no_advice() -> None:
    unknown = [DepartureDose(USUAL + STEP * k, None) for k in range(-6, 7)]
    assert trip_advice(unknown, USUAL, SUNDAY_EVENING, HELSINKI) == TripAdvice()
    # A usual dose unknown: the least known is advised, with no saving to tell.
    some = [*unknown[:6], DepartureDose(USUAL, None), DepartureDose(USUAL + STEP, 1.0)]
    assert trip_advice(some, USUAL, SUNDAY_EVENING, HELSINKI) == TripAdvice(time(8, 10), None)


def test_the_alert_reads_like_the_issues_example() -> None:
    decision = decide_trip(
        trip_subscription(),
        StoredState(0, None),
        ROUTE,
        route_air(clean_then_poor),
        {},
        SUNDAY_EVENING,
    )
    assert decision is not None
    assert len(decision.events) == 1
    event = decision.events[0]
    body = json.loads(event_message(trip_subscription(), event, trip=decision.advice[event.id]))
    assert body["data"]["message"] == (
        "Forecast for 2026-11-23: the air on your 08:00 walking trip will reach Poor at its "
        "worst, at or worse than your threshold of Moderate; leave at 07:40 to breathe 92 % less."
    )
    assert body["data"]["trip"] == {"best_departure": "07:40", "dose_saved": 0.917}


# -- the category along the route ---------------------------------------------------------------


def test_the_category_is_the_worst_the_trip_meets_where_and_when_it_passes() -> None:
    cells = route_cells(ROUTE)
    first, last = cells[0], cells[-1]
    assert first != last
    off_route = Cell(first.row + 5, first.column)

    def pm25(cell: Cell, hour_end: datetime) -> float:
        if cell == off_route:
            return 200.0  # Extremely poor, but nowhere near the trip
        if cell == last:  # Very poor from 08:00 UTC on, Good before
            return 100.0 if hour_end > USUAL + 2 * HOUR else 5.0
        return 30.0  # Moderate

    air = TripAir(cell_airs({*cells, off_route}, pm25))
    # Leaving at 06:00 UTC the trip is off the last cell by 06:20: Moderate at worst.
    assert route_category(COURSE, air, EAQI, USUAL) == 2
    # Leaving at 07:50 it reaches the last cell after 08:00: Very poor.
    later = USUAL + timedelta(minutes=110)
    assert route_category(COURSE, air, EAQI, later) == 4
    categories = CellCategories(air.cells[last])
    reached = trip_times(ROUTE, TRIP, later)[-1]
    assert categories.at(EAQI, air.cells[last].position(hour_end_of(reached))) == 4


def test_a_trip_without_a_named_index_is_told_on_its_start_countrys() -> None:
    subscription = trip_subscription(index=None, threshold=1)
    countries = {cell_of(START): "GB"}
    decision = decide_trip(
        subscription,
        StoredState(0, None),
        ROUTE,
        route_air(clean_then_poor),
        countries,
        SUNDAY_EVENING,
    )
    assert decision is not None
    assert decision.index == "uk_daqi"
    no_country = decide_trip(
        subscription, StoredState(0, None), ROUTE, route_air(clean_then_poor), {}, SUNDAY_EVENING
    )
    assert no_country is not None
    assert no_country.index == "us_epa_2024"


# -- deciding -----------------------------------------------------------------------------------


def test_a_due_trip_past_its_threshold_alerts_with_its_advice_once() -> None:
    subscription = trip_subscription()
    air = TripAir(route_air(clean_then_poor))
    decision = decide_trip(subscription, StoredState(0, None), ROUTE, air, {}, SUNDAY_EVENING)
    assert decision is not None
    (event,) = decision.events
    assert event == AlertEvent(
        id=forecast_event_id(subscription.id, MONDAY, 3),
        kind=EventKind.FORECAST,
        subscription_id=subscription.id,
        category=3,
        decided_at=SUNDAY_EVENING,
        due_at=SUNDAY_EVENING,
        target_day=MONDAY,
    )
    assert decision.advice == {event.id: TripAdvice(time(7, 40), 0.917)}
    assert (decision.expected_version, decision.index, decision.restarted) == (
        0,
        eu_eaqi.CODE,
        False,
    )
    assert decode_trip_state(decision.blob) == TripState(ROUTE, ForecastState(MONDAY, 3))
    # The rounds after it tell nothing new the same evening ...
    stored = StoredState(1, decision.blob)
    assert decide_trip(subscription, stored, ROUTE, air, {}, SUNDAY_EVENING + HOUR) is None
    # ... unless the forecast worsens by a category (Very poor).
    worse = route_air(lambda c, e: 5.0 if e <= USUAL else 100.0)
    again = decide_trip(subscription, stored, ROUTE, worse, {}, SUNDAY_EVENING + HOUR)
    assert again is not None
    assert [e.category for e in again.events] == [4]


def test_a_trip_under_its_threshold_keeps_its_route_and_tells_nothing() -> None:
    subscription = trip_subscription()
    clean = route_air(lambda c, e: 5.0)
    first = decide_trip(subscription, StoredState(0, None), ROUTE, clean, {}, SUNDAY_EVENING)
    assert first is not None
    assert first.events == ()
    assert stored_route(StoredState(1, first.blob)) == ROUTE
    assert (
        decide_trip(subscription, StoredState(1, first.blob), ROUTE, clean, {}, SUNDAY_EVENING)
        is None
    )


def test_a_first_evaluation_keeps_the_route_even_when_not_due() -> None:
    friday = datetime(2026, 11, 27, 19, 5, tzinfo=UTC)
    decision = decide_trip(trip_subscription(), StoredState(0, None), ROUTE, {}, {}, friday)
    assert decision is not None
    assert decision.events == ()
    assert stored_route(StoredState(1, decision.blob)) == ROUTE
    assert stored_route(StoredState(0, None)) is None
    assert stored_route(StoredState(1, "{}")) is None
    kept = StoredState(1, decision.blob)
    assert decide_trip(trip_subscription(), kept, ROUTE, {}, {}, friday) is None
    # A route planned anew replaces the one kept.
    other = direct_route(START, east_of(START, 900))
    replaced = decide_trip(trip_subscription(), kept, other, {}, {}, friday)
    assert replaced is not None
    assert stored_route(StoredState(2, replaced.blob)) == other


def test_without_air_a_due_trip_decides_nothing_new() -> None:
    decision = decide_trip(trip_subscription(), StoredState(0, None), ROUTE, {}, {}, SUNDAY_EVENING)
    assert decision is not None
    assert decision.events == ()
    assert decode_trip_state(decision.blob).forecast_state == ForecastState()


def test_an_alert_held_by_quiet_hours_keeps_its_advice_for_when_it_goes_out() -> None:
    subscription = trip_subscription(quiet_hours=QuietHours(time(21, 0), time(7, 45)))
    decision = decide_trip(
        subscription, StoredState(0, None), ROUTE, route_air(clean_then_poor), {}, SUNDAY_EVENING
    )
    assert decision is not None
    assert decision.events == ()
    state = decode_trip_state(decision.blob)
    (held,) = state.forecast_state.pending
    quiet_end = datetime(2026, 11, 23, 5, 45, tzinfo=UTC)
    assert held.due_at == quiet_end
    # It goes out at 07:45 local: leaving at 07:40 is past by then, 07:50 is the best left.
    doses = [d.dose or 0.0 for d in doses_of(clean_then_poor)]
    assert state.advice == {held.id: TripAdvice(time(7, 50), round(1 - doses[5] / doses[6], 3))}
    stored = StoredState(1, decision.blob)
    assert (
        decide_trip(subscription, stored, ROUTE, {}, {}, quiet_end - timedelta(minutes=1)) is None
    )
    released = decide_trip(subscription, stored, ROUTE, {}, {}, quiet_end)
    assert released is not None
    assert released.events == (held,)
    assert released.advice == {held.id: state.advice[held.id]}
    assert decode_trip_state(released.blob).advice == {}


def test_an_alert_that_could_only_go_out_after_the_last_departure_is_not_decided() -> None:
    subscription = trip_subscription(quiet_hours=QuietHours(time(21, 0), time(9, 30)))
    decision = decide_trip(
        subscription, StoredState(0, None), ROUTE, route_air(clean_then_poor), {}, SUNDAY_EVENING
    )
    assert decision is not None
    assert decision.events == ()
    assert decode_trip_state(decision.blob).forecast_state == ForecastState()


@pytest.mark.parametrize(
    "blob", ["", "{}", '{"kind":"forecast","v":1,"target_day":null,"alerted":null,"pending":[]}']
)
def test_an_unreadable_state_restarts(blob: str) -> None:
    decision = decide_trip(
        trip_subscription(),
        StoredState(4, blob),
        ROUTE,
        route_air(clean_then_poor),
        {},
        SUNDAY_EVENING,
    )
    assert decision is not None
    assert decision.restarted
    assert decision.expected_version == 4
    assert len(decision.events) == 1


def test_only_trip_subscriptions_are_decided_here() -> None:
    with pytest.raises(ValueError, match="trip"):
        decide_trip(
            trip_subscription(target=Place(START)),
            StoredState(0, None),
            ROUTE,
            {},
            {},
            SUNDAY_EVENING,
        )
    disabled = trip_subscription(disabled=Disabled("gone", SUNDAY_EVENING))
    assert decide_trip(disabled, StoredState(0, None), ROUTE, {}, {}, SUNDAY_EVENING) is None


def test_the_cells_wanted_are_the_due_trips_routes_with_the_forecasts_hours() -> None:
    due, not_due = trip_subscription(), with_trip(trip_subscription(), days=frozenset({6}))
    other = direct_route(Point(60.2, 25.0), Point(60.21, 25.0))
    wanted = trip_air_wanted([(due, ROUTE), (not_due, other)], SUNDAY_EVENING)
    assert wanted == dict.fromkeys(route_cells(ROUTE), True)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.sampled_from([3.0, 10.0, 30.0, 60.0, 100.0]), min_size=HOURS, max_size=HOURS),
    st.sampled_from(
        [
            Forecast(TargetDay.TOMORROW, time(21, 0)),
            Forecast(TargetDay.TODAY, time(6, 0)),
            Observed(),
        ]
    ),
)
def test_a_trip_alerts_at_most_once_a_trip_day_unless_worse(
    hourly: list[float], kind: Forecast | Observed
) -> None:
    subscription = trip_subscription(kind=kind)
    air = TripAir(route_air(lambda c, e: hourly[int((e - FIRST_END) / HOUR)]))
    stored = StoredState(0, None)
    told: list[AlertEvent] = []
    now = datetime(2026, 11, 21, 0, 5, tzinfo=UTC)  # Saturday to Wednesday night
    while now < datetime(2026, 11, 25, 20, 0, tzinfo=UTC):
        decision = decide_trip(subscription, stored, ROUTE, air, {}, now)
        if decision is not None:
            stored = StoredState(stored.version + 1, decision.blob)
            told += decision.events
            assert set(decision.advice) == {e.id for e in decision.events}
        now += timedelta(minutes=20)
    assert len({e.id for e in told}) == len(told)
    by_day: dict[date, list[int]] = {}
    for event in told:
        assert event.target_day is not None
        assert event.target_day.isoweekday() in WEEKDAYS
        assert event.category >= subscription.threshold
        by_day.setdefault(event.target_day, []).append(event.category)
    assert all(categories == sorted(set(categories)) for categories in by_day.values())


# -- the state's JSON ---------------------------------------------------------------------------


instants = st.datetimes(
    min_value=datetime(2001, 1, 1),  # noqa: DTZ001 - hypothesis wants naive bounds
    max_value=datetime(2099, 1, 1),  # noqa: DTZ001
    timezones=st.just(UTC),
)
small = st.integers(min_value=0, max_value=10_000)


@st.composite
def routes(draw: st.DrawFn) -> TripRoute:
    points = draw(
        st.lists(
            st.builds(Point, st.floats(-90, 90), st.floats(-180, 180)), min_size=1, max_size=30
        )
    )
    steps = draw(st.lists(st.floats(0, 1e4), min_size=len(points) - 1, max_size=len(points) - 1))
    distances = [0.0]
    for step in steps:
        distances.append(distances[-1] + step)
    return TripRoute(tuple(points), tuple(distances))


@st.composite
def forecast_events(draw: st.DrawFn) -> AlertEvent:
    return AlertEvent(
        id=draw(st.uuids()),
        kind=EventKind.FORECAST,
        subscription_id=draw(st.uuids()),
        category=draw(small),
        decided_at=draw(instants),
        due_at=draw(instants),
        target_day=draw(st.dates()),
    )


advice = st.builds(
    TripAdvice,
    st.none() | st.times(),
    st.none() | st.floats(allow_nan=False, allow_infinity=False),
)
trip_states = st.builds(
    TripState,
    routes(),
    st.builds(
        ForecastState,
        st.none() | st.dates(),
        st.none() | small,
        st.lists(forecast_events(), max_size=3).map(tuple),
    ),
    st.dictionaries(st.uuids(), advice, max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(trip_states)
def test_a_trip_state_survives_its_json(state: TripState) -> None:
    blob = encode_trip_state(state)
    decoded = decode_trip_state(blob)
    assert decoded == state
    assert encode_trip_state(decoded) == blob
    assert decode_route(json.loads(json.dumps(encode_route(state.route)))) == state.route


@pytest.mark.parametrize(
    "blob",
    [
        "",
        "[]",
        '{"kind":"forecast","v":1,"target_day":null,"alerted":null,"pending":[]}',
        '{"kind":"trip","v":2,"route":[[60,24,0]],"forecast":{},"advice":[]}',
        '{"kind":"trip","v":1,"route":[],"forecast":{"kind":"forecast","v":1,"target_day":null,"alerted":null,"pending":[]},"advice":[]}',
        '{"kind":"trip","v":1,"route":[[60,24,0],[60,25,-1]],"forecast":{"kind":"forecast","v":1,"target_day":null,"alerted":null,"pending":[]},"advice":[]}',
        '{"kind":"trip","v":1,"route":[[60,24,"0"]],"forecast":{"kind":"forecast","v":1,"target_day":null,"alerted":null,"pending":[]},"advice":[]}',
        '{"kind":"trip","v":1,"route":[[60,24,0]],"forecast":{"kind":"observed","v":1,"last_hour":null,"episodes":0,"open":false,"clear_hours":0,"pending":[]},"advice":[]}',
        '{"kind":"trip","v":1,"route":[[60,24,0]],"forecast":{"kind":"forecast","v":1,"target_day":null,"alerted":null,"pending":[]},"advice":[{"event_id":"x","best_departure":null,"dose_saved":null}]}',
        '{"kind":"trip","v":1,"route":[[60,24,0]],"forecast":{"kind":"forecast","v":1,"target_day":null,"alerted":null,"pending":[]},"advice":[{"event_id":"00000000-0000-0000-0000-000000000001","best_departure":7,"dose_saved":null}]}',
    ],
)
def test_an_unreadable_trip_state_is_one_error(blob: str) -> None:
    with pytest.raises(MalformedState):
        decode_trip_state(blob)
