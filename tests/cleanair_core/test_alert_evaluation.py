"""Evaluating place subscriptions per grid cell: one cell's air for all its subscriptions,
categories as the official index functions give them, when each kind is due (across
timezones and clock changes), and rounds from concentrations to an alert and its all-clear.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core.air.indexes import eu_eaqi, uk_daqi, us_epa
from cleanair_core.air.indexes.registry import OFFICIAL_INDEXES
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import GriddedAir, Sample
from cleanair_core.alerts.alert_states import decode_state, encode_state
from cleanair_core.alerts.episodes import ObservedState
from cleanair_core.alerts.evaluation import (
    HISTORY_HOURS,
    Cell,
    CellAir,
    CellCategories,
    Decision,
    ForecastDue,
    ObservedDue,
    air_hours,
    air_wanted,
    category_number,
    cell_of,
    decide,
    due,
    fetch_cell_air,
    index_of,
    send_instant,
)
from cleanair_core.alerts.events import AlertEvent, Direction, EventKind
from cleanair_core.alerts.forecasts import ForecastState
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
from cleanair_core.geo import Point
from cleanair_core.routes.network import PlanActivityType

PARIS = ZoneInfo("Europe/Paris")
AUCKLAND = ZoneInfo("Pacific/Auckland")
HELSINKI_POINT = Point(60.1699, 24.9384)
NOW = datetime(2026, 11, 24, 10, 7, tzinfo=UTC)
HOUR = timedelta(hours=1)

AirFunction = Callable[[Point, datetime], Concentrations]


class FunctionAir:
    """A source answering samples from a function of place and time, counting its calls."""

    update_interval = 3600

    def __init__(self, air: AirFunction) -> None:
        self.air = air
        self.calls: list[list[Sample]] = []

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.calls.append(list(samples))
        return [self.air(sample.point, sample.at) for sample in samples]


class GriddedFunctionAir(FunctionAir):
    """The same, also answering arrays (a `GriddedAir`)."""

    def __init__(self, air: AirFunction) -> None:
        super().__init__(air)
        self.array_calls = 0

    def air_at_hour(self, lats: np.ndarray, lons: np.ndarray, hour: datetime) -> np.ndarray:
        self.array_calls += 1
        rows = []
        for lat, lon in zip(lats.tolist(), lons.tolist(), strict=True):
            air = self.air(Point(lat, lon), hour)
            rows.append([math.nan if air.get(p) is None else air[p] for p in SCORED])
        return np.array(rows, dtype=np.float64).reshape(-1, len(SCORED))


def pm25(value: Callable[[datetime], float]) -> AirFunction:
    """Air with only PM2.5, `value` of the sample's instant."""
    return lambda _, at: {Pollutant.PM25: value(at)}


def subscription(**changes: object) -> Subscription:
    fields: dict[str, object] = {
        "id": uuid.uuid4(),
        "owner": "alice",
        "connection_id": "c1",
        "created_at": NOW - timedelta(days=1),
        "target": Place(HELSINKI_POINT),
        "index": eu_eaqi.CODE,
        "threshold": 3,
        "direction": Direction.WORSE,
        "audience": Audience.GENERAL,
        "kind": Observed(hysteresis_categories=1, hysteresis_hours=2),
        "timezone": "Europe/Helsinki",
    }
    fields.update(changes)
    return Subscription(**fields)  # type: ignore[arg-type]


def forecast_kind(send_at: time, target: TargetDay = TargetDay.TOMORROW) -> Forecast:
    return Forecast(target_day=target, send_at=send_at)


FRESH = StoredState(0, None)


def round_at(
    source: FunctionAir,
    batch: Sequence[tuple[Subscription, StoredState]],
    now: datetime,
    countries: dict[Cell, str | None] | None = None,
) -> list[Decision]:
    cells = air_wanted((s for s, _ in batch), now)
    air = asyncio.run(fetch_cell_air(source, cells, now))
    return decide(batch, air, countries or {}, now)


# --- cells ----------------------------------------------------------------------------------


def test_a_cell_is_the_embedded_models_hundredth_of_a_degree() -> None:
    assert cell_of(Point(60.1699, 24.9384)) == Cell(6017, 2494)
    assert cell_of(Point(60.1651, 24.9449)) == Cell(6017, 2494)
    assert cell_of(Point(60.1649, 24.9449)) == Cell(6016, 2494)
    assert cell_of(Point(-33.8688, 151.2093)) == Cell(-3387, 15121)
    assert Cell(6017, 2494).centre == Point(60.17, 24.94)


@given(
    st.floats(-90, 90, allow_nan=False),
    st.floats(-180, 180, allow_nan=False),
)
def test_a_point_is_within_half_a_cell_of_its_cells_centre(lat: float, lon: float) -> None:
    centre = cell_of(Point(lat, lon)).centre
    assert abs(centre.lat - lat) <= 0.005 + 1e-9
    assert abs(centre.lon - lon) <= 0.005 + 1e-9


def test_two_subscriptions_in_one_cell_cost_one_cells_air() -> None:
    source = FunctionAir(pm25(lambda _: 60.0))
    near = Point(HELSINKI_POINT.lat + 0.002, HELSINKI_POINT.lon - 0.003)
    assert cell_of(near) == cell_of(HELSINKI_POINT)
    first, second = subscription(), subscription(target=Place(near))
    decisions = round_at(source, [(first, FRESH), (second, FRESH)], NOW)
    assert len(source.calls) == 1
    (samples,) = source.calls
    assert len(samples) == HISTORY_HOURS  # one cell's history of the hour, not two
    assert {sample.point for sample in samples} == {cell_of(HELSINKI_POINT).centre}
    # Both decided on it: PM2.5 of 60 is EAQI "Poor" (3), the threshold.
    assert [d.subscription_id for d in decisions] == [first.id, second.id]
    assert all([e.kind for e in d.events] == [EventKind.ALERT] for d in decisions)


def test_cells_apart_are_asked_in_one_call_per_chunk() -> None:
    source = FunctionAir(pm25(lambda _: 10.0))
    points = [Point(60.0 + k * 0.01, 25.0) for k in range(5)]
    batch = [(subscription(target=Place(p)), FRESH) for p in points]
    cells = air_wanted((s for s, _ in batch), NOW)
    assert len(cells) == 5
    air = asyncio.run(fetch_cell_air(source, cells, NOW, chunk_cells=2))
    assert len(source.calls) == 3
    assert sum(len(call) for call in source.calls) == 5 * HISTORY_HOURS
    assert set(air) == set(cells)


def test_the_air_is_asked_in_the_middle_of_each_hour_up_to_the_last() -> None:
    hours = air_hours(NOW, forecast=False)
    assert hours[-1] == datetime(2026, 11, 24, 10, tzinfo=UTC)
    assert hours == [hours[-1] - HOUR * k for k in range(HISTORY_HOURS - 1, -1, -1)]
    source = FunctionAir(pm25(lambda _: 1.0))
    asyncio.run(fetch_cell_air(source, {Cell(6017, 2494): False}, NOW))
    assert [s.at for s in source.calls[0]] == [end - timedelta(minutes=30) for end in hours]
    # A forecast's window holds today's and tomorrow's hours in any zone, with history.
    wide = air_hours(NOW, forecast=True)
    assert wide[0] <= NOW - timedelta(hours=25 + HISTORY_HOURS)
    assert wide[-1] >= NOW + timedelta(hours=49)


def test_a_gridded_source_gives_the_same_air_in_arrays() -> None:
    def air(point: Point, at: datetime) -> Concentrations:
        hours = at.timestamp() / 3600
        return {
            Pollutant.PM25: 5 + point.lat + hours % 7,
            Pollutant.NO2: 3 * (hours % 5) + point.lon,
            Pollutant.O3: None,
        }

    cells = {Cell(6017, 2494): True, Cell(6020, 2500): False}
    by_samples = asyncio.run(fetch_cell_air(FunctionAir(air), cells, NOW))
    gridded = GriddedFunctionAir(air)
    assert isinstance(gridded, GriddedAir)
    by_arrays = asyncio.run(fetch_cell_air(gridded, cells, NOW))
    assert not gridded.calls
    assert gridded.array_calls == len(air_hours(NOW, forecast=True))
    for cell in cells:
        assert by_arrays[cell].first_end == by_samples[cell].first_end
        for pollutant in SCORED:
            mine = by_arrays[cell].values[pollutant]
            theirs = [
                v if v is None else pytest.approx(v) for v in by_samples[cell].values[pollutant]
            ]
            assert mine == theirs


# --- categories -----------------------------------------------------------------------------

#: A concentration for every pollutant, or an hour without one.
concentration = st.one_of(st.none(), st.floats(0, 700, allow_nan=False))


def expected_number(code: str, value: int) -> int:
    """The category number from the index's value, by the index documents' bands."""
    if code == eu_eaqi.CODE:
        return value - 1
    if code == uk_daqi.CODE:
        return 0 if value <= 3 else 1 if value <= 6 else 2 if value <= 9 else 3
    return next(n for n, (top, *_) in enumerate(us_epa.CATEGORIES) if value <= top)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(HISTORY_HOURS, HISTORY_HOURS + 30).flatmap(
        lambda hours: st.fixed_dictionaries(
            {p: st.lists(concentration, min_size=hours, max_size=hours) for p in SCORED}
        )
    ),
    st.sampled_from(OFFICIAL_INDEXES),
)
def test_categories_are_the_official_index_functions(
    values: dict[Pollutant, list[float | None]], index: object
) -> None:
    from cleanair_core.air.indexes import OfficialIndex

    assert isinstance(index, OfficialIndex)
    first_end = datetime(2026, 3, 1, tzinfo=UTC)
    air = CellAir(first_end, values)
    categories = CellCategories(air)
    hours = len(values[Pollutant.PM25])
    found: list[int | None] = []
    for position in range(hours):
        history = {p: series[: position + 1][-HISTORY_HOURS:] for p, series in values.items()}
        value = index.compute(history)
        expected = None if value is None else expected_number(index.code, value.value)
        if value is not None:
            assert category_number(value) == expected
        assert categories.at(index, position) == expected
        found.append(expected)
    # A day's worst: the worst hour whose middle is in the day.
    start, end = first_end + timedelta(hours=3), first_end + timedelta(hours=20)
    in_day = [c for k, c in enumerate(found) if 3 <= k - 0.5 < 20 and c is not None]
    assert categories.worst(index, start, end) == (max(in_day) if in_day else None)


def test_a_place_without_a_named_index_uses_its_countrys() -> None:
    unnamed = subscription(index=None)
    assert index_of(unnamed, "FR").code == eu_eaqi.CODE
    assert index_of(unnamed, "GB").code == uk_daqi.CODE
    assert index_of(unnamed, "US").code == us_epa.CODE
    assert index_of(unnamed, None).code == us_epa.CODE  # none official: the first
    assert index_of(subscription(index=uk_daqi.CODE), "FR").code == uk_daqi.CODE
    # PM2.5 of 20: EAQI "Moderate" (2), US AQI "Moderate" (1): a threshold of 2 alerts in
    # France only.
    source = FunctionAir(pm25(lambda _: 20.0))
    watching = subscription(index=None, threshold=2)
    cell = cell_of(HELSINKI_POINT)
    (french,) = round_at(source, [(watching, FRESH)], NOW, {cell: "FR"})
    assert [e.kind for e in french.events] == [EventKind.ALERT]
    assert french.events[0].category == 2
    (american,) = round_at(source, [(watching, FRESH)], NOW, {cell: "US"})
    assert american.events == ()


# --- when each kind is due ------------------------------------------------------------------


def test_observed_subscriptions_are_due_every_hour_on_the_hour_that_ended() -> None:
    observed = subscription()
    assert due(observed, NOW) == ObservedDue(datetime(2026, 11, 24, 10, tzinfo=UTC))
    assert due(observed, NOW + HOUR) == ObservedDue(datetime(2026, 11, 24, 11, tzinfo=UTC))


def test_disabled_and_trip_subscriptions_are_never_due_nor_decided() -> None:
    stopped = subscription(disabled=Disabled("endpoint gone", NOW - HOUR))
    trip = subscription(
        target=Trip(
            HELSINKI_POINT,
            Point(60.18, 24.95),
            PlanActivityType.WALKING,
            time(8),
            frozenset({1, 2, 3, 4, 5}),
        ),
        kind=forecast_kind(time(7)),
    )
    waiting = AlertEvent(
        id=uuid.uuid4(),
        kind=EventKind.ALERT,
        subscription_id=stopped.id,
        category=3,
        decided_at=NOW - 2 * HOUR,
        due_at=NOW - HOUR,
        hour=NOW - 2 * HOUR,
        episode=1,
    )
    held = StoredState(4, encode_state(ObservedState(episodes=1, open=True, pending=(waiting,))))
    for skipped in (stopped, trip):
        assert due(skipped, NOW) is None
        assert due(skipped, datetime(2026, 11, 25, 23, tzinfo=UTC)) is None
    source = FunctionAir(pm25(lambda _: 300.0))
    assert round_at(source, [(stopped, held), (trip, FRESH), (trip, held)], NOW) == []
    assert source.calls == []


@pytest.mark.parametrize(
    ("zone", "day", "wall", "expected"),
    [
        # Paris springs forward at 01:00 UTC on 29 March 2026 (02:00 becomes 03:00): a time
        # in the gap is due at the jump, a later one at summer time.
        (PARIS, date(2026, 3, 29), time(2, 30), datetime(2026, 3, 29, 1, tzinfo=UTC)),
        (PARIS, date(2026, 3, 29), time(2), datetime(2026, 3, 29, 1, tzinfo=UTC)),
        (PARIS, date(2026, 3, 29), time(1, 59), datetime(2026, 3, 29, 0, 59, tzinfo=UTC)),
        (PARIS, date(2026, 3, 29), time(8), datetime(2026, 3, 29, 6, tzinfo=UTC)),
        (PARIS, date(2026, 3, 28), time(8), datetime(2026, 3, 28, 7, tzinfo=UTC)),
        # It falls back at 01:00 UTC on 25 October (03:00 becomes 02:00): a repeated time is
        # due at its first pass.
        (PARIS, date(2026, 10, 25), time(2, 30), datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),
        (PARIS, date(2026, 10, 25), time(21), datetime(2026, 10, 25, 20, tzinfo=UTC)),
        # Auckland is a day ahead of UTC: its 07:00 of 28 November is 18:00 UTC on the 27th
        # (NZDT, +13); it springs forward on 27 September 2026 (02:00 becomes 03:00, at
        # 14:00 UTC the day before) and falls back on 5 April (03:00 becomes 02:00).
        (AUCKLAND, date(2026, 11, 28), time(7), datetime(2026, 11, 27, 18, tzinfo=UTC)),
        (AUCKLAND, date(2026, 9, 27), time(2, 15), datetime(2026, 9, 26, 14, tzinfo=UTC)),
        (AUCKLAND, date(2026, 4, 5), time(2, 15), datetime(2026, 4, 4, 13, 15, tzinfo=UTC)),
        (AUCKLAND, date(2026, 4, 5), time(0), datetime(2026, 4, 4, 11, tzinfo=UTC)),
    ],
)
def test_the_sending_time_is_the_first_the_clock_shows_it(
    zone: ZoneInfo, day: date, wall: time, expected: datetime
) -> None:
    assert send_instant(zone, day, wall) == expected


def test_a_forecast_is_due_from_its_sending_time_until_the_local_day_ends() -> None:
    watching = subscription(timezone="Europe/Paris", kind=forecast_kind(time(2, 30)))
    jump = datetime(2026, 3, 29, 1, tzinfo=UTC)
    assert due(watching, jump - timedelta(seconds=1)) is None
    evaluated = due(watching, jump)
    # Tomorrow, 30 March, a 24-hour day of summer time.
    assert evaluated == ForecastDue(
        date(2026, 3, 30),
        datetime(2026, 3, 29, 22, tzinfo=UTC),
        datetime(2026, 3, 30, 22, tzinfo=UTC),
    )
    # Again later that day (a worse forecast may alert), not on the next before 02:30.
    assert due(watching, datetime(2026, 3, 29, 21, 59, tzinfo=UTC)) == evaluated
    assert due(watching, datetime(2026, 3, 29, 22, 30, tzinfo=UTC)) is None
    # Today's, on the spring-forward day: a 23-hour day.
    today = subscription(timezone="Europe/Paris", kind=forecast_kind(time(6), TargetDay.TODAY))
    assert due(today, datetime(2026, 3, 29, 3, 59, tzinfo=UTC)) is None
    assert due(today, datetime(2026, 3, 29, 4, tzinfo=UTC)) == ForecastDue(
        date(2026, 3, 29),
        datetime(2026, 3, 28, 23, tzinfo=UTC),
        datetime(2026, 3, 29, 22, tzinfo=UTC),
    )


def test_a_forecast_stays_due_through_the_repeated_hour() -> None:
    # 02:30 on 25 October in Paris passes twice; once due, the second pass (02:10 again,
    # at 01:10 UTC) does not make it undue.
    watching = subscription(
        timezone="Europe/Paris", kind=forecast_kind(time(2, 30), TargetDay.TODAY)
    )
    assert due(watching, datetime(2026, 10, 25, 0, 29, tzinfo=UTC)) is None
    fall_back_day = ForecastDue(
        date(2026, 10, 25),
        datetime(2026, 10, 24, 22, tzinfo=UTC),
        datetime(2026, 10, 25, 23, tzinfo=UTC),  # a 25-hour day
    )
    assert due(watching, datetime(2026, 10, 25, 0, 30, tzinfo=UTC)) == fall_back_day
    assert due(watching, datetime(2026, 10, 25, 1, 10, tzinfo=UTC)) == fall_back_day


def test_a_forecast_in_auckland_is_due_on_its_own_day() -> None:
    watching = subscription(timezone="Pacific/Auckland", kind=forecast_kind(time(7)))
    # 18:00 UTC on the 27th is 07:00 on the 28th in Auckland: tomorrow is the 29th.
    assert due(watching, datetime(2026, 11, 27, 17, 59, tzinfo=UTC)) is None
    assert due(watching, datetime(2026, 11, 27, 18, tzinfo=UTC)) == ForecastDue(
        date(2026, 11, 29),
        datetime(2026, 11, 28, 11, tzinfo=UTC),
        datetime(2026, 11, 29, 11, tzinfo=UTC),
    )


ZONES = ["Europe/Paris", "Pacific/Auckland", "America/New_York", "Asia/Kolkata", "UTC"]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(ZONES),
    st.times(),
    st.datetimes(
        min_value=datetime(2026, 1, 1),  # noqa: DTZ001 - hypothesis wants naive bounds
        max_value=datetime(2027, 1, 1),  # noqa: DTZ001
        timezones=st.just(UTC),
    ),
)
def test_a_forecast_is_due_once_the_wall_clock_showed_its_time_that_day(
    zone_name: str, send_at: time, now: datetime
) -> None:
    zone = ZoneInfo(zone_name)
    send_at = send_at.replace(fold=0)
    watching = subscription(timezone=zone_name, kind=forecast_kind(send_at, TargetDay.TODAY))
    today = now.astimezone(zone).date()
    instant = send_instant(zone, today, send_at)
    local = instant.astimezone(zone)
    # The instant shows the time (or the first after a jump) on that day, and a second
    # before it the clock showed an earlier time (or the day before).
    assert local.date() == today
    assert local.time() >= send_at
    before = (instant - timedelta(seconds=1)).astimezone(zone)
    assert before.date() < today or before.time() < send_at
    evaluated = due(watching, now)
    assert (evaluated is not None) == (now >= instant)
    if evaluated is not None:
        assert isinstance(evaluated, ForecastDue)
        assert evaluated.target_day == today
        assert evaluated.start <= now < evaluated.end
        assert evaluated.start.astimezone(zone).date() == today
        assert (evaluated.end - timedelta(seconds=1)).astimezone(zone).date() == today


# --- rounds ---------------------------------------------------------------------------------


def apply(stored: StoredState, decision: Decision) -> StoredState:
    """What the store keeps after the decision's compare-and-set."""
    assert decision.expected_version == stored.version
    return StoredState(stored.version + 1, decision.blob)


def test_observed_from_concentrations_to_an_alert_then_an_all_clear() -> None:
    # PM2.5 (EAQI "Poor", 3, above 50) from 09:00 to 12:00 UTC, clean air around it.
    polluted_from = datetime(2026, 11, 24, 9, tzinfo=UTC)
    polluted_until = datetime(2026, 11, 24, 12, tzinfo=UTC)
    source = FunctionAir(pm25(lambda at: 80.0 if polluted_from <= at < polluted_until else 4.0))
    watching = subscription()  # EAQI, threshold 3, 2 hours 1 category back
    stored = FRESH
    told: list[tuple[datetime, AlertEvent]] = []
    now = datetime(2026, 11, 24, 6, 5, tzinfo=UTC)
    for _ in range(12):
        decisions = round_at(source, [(watching, stored)], now)
        for decision in decisions:
            stored = apply(stored, decision)
            told += [(now, event) for event in decision.events]
        now += HOUR
    assert [(at.hour, e.kind, e.category, e.hour) for at, e in told] == [
        (10, EventKind.ALERT, 3, datetime(2026, 11, 24, 10, tzinfo=UTC)),
        (14, EventKind.ALL_CLEAR, 0, datetime(2026, 11, 24, 14, tzinfo=UTC)),
    ]
    assert told[0][1].episode == told[1][1].episode == 1
    state = decode_state(stored.blob or "")
    assert isinstance(state, ObservedState)
    assert state.open is False
    assert state.last_hour == datetime(2026, 11, 24, 17, tzinfo=UTC)
    # The same round again decides nothing new: the hour was taken.
    assert round_at(source, [(watching, stored)], now - HOUR) == []


def test_an_hour_without_air_decides_nothing() -> None:
    source = FunctionAir(lambda *_: {})
    assert round_at(source, [(subscription(), FRESH)], NOW) == []


def test_a_forecast_alerts_on_the_worst_hour_of_its_local_day() -> None:
    # Paris, tomorrow (25 November, 23:00 UTC on the 24th to 23:00 on the 25th): one hour
    # of "Very poor" PM2.5 (4) at 22:00 UTC on the 25th, the day's last local hour; the hour
    # after it belongs to the 26th and is worse still.
    def air(_: Point, at: datetime) -> Concentrations:
        if datetime(2026, 11, 25, 22, tzinfo=UTC) <= at < datetime(2026, 11, 25, 23, tzinfo=UTC):
            return {Pollutant.PM25: 100.0}
        if datetime(2026, 11, 25, 23, tzinfo=UTC) <= at < datetime(2026, 11, 26, tzinfo=UTC):
            return {Pollutant.PM25: 200.0}
        return {Pollutant.PM25: 4.0}

    watching = subscription(timezone="Europe/Paris", kind=forecast_kind(time(21)), threshold=3)
    before = datetime(2026, 11, 24, 19, 59, tzinfo=UTC)
    source = FunctionAir(air)
    assert round_at(source, [(watching, FRESH)], before) == []
    assert source.calls == []  # not due: no air asked
    at = datetime(2026, 11, 24, 20, 0, tzinfo=UTC)
    (decision,) = round_at(source, [(watching, FRESH)], at)
    (event,) = decision.events
    assert (event.kind, event.category, event.target_day) == (
        EventKind.FORECAST,
        4,
        date(2026, 11, 25),
    )
    stored = apply(FRESH, decision)
    # An hour later the same forecast tells nothing new; the state stays as it was.
    assert round_at(source, [(watching, stored)], at + HOUR) == []


def test_a_forecast_better_than_its_threshold_alerts_on_a_good_day() -> None:
    source = FunctionAir(pm25(lambda _: 3.0))  # EAQI "Good" (0) all day
    watching = subscription(
        timezone="Europe/Paris",
        kind=forecast_kind(time(21)),
        threshold=1,
        direction=Direction.BETTER,
    )
    (decision,) = round_at(source, [(watching, FRESH)], datetime(2026, 11, 24, 20, tzinfo=UTC))
    assert [(e.kind, e.category) for e in decision.events] == [(EventKind.FORECAST, 0)]


def test_held_events_go_out_when_quiet_hours_end_even_when_not_due() -> None:
    # Decided at 23:00 Paris into quiet hours until 07:00; the subscription is not due
    # again before 23:00, but the alert goes out at the first round from 07:00.
    watching = subscription(
        timezone="Europe/Paris",
        kind=forecast_kind(time(23)),
        quiet_hours=QuietHours(time(22), time(7)),
    )
    source = FunctionAir(pm25(lambda _: 80.0))
    (decided,) = round_at(source, [(watching, FRESH)], datetime(2026, 11, 24, 22, tzinfo=UTC))
    assert decided.events == ()
    stored = apply(FRESH, decided)
    assert round_at(source, [(watching, stored)], datetime(2026, 11, 25, 5, 59, tzinfo=UTC)) == []
    source.calls.clear()
    (released,) = round_at(source, [(watching, stored)], datetime(2026, 11, 25, 6, 0, tzinfo=UTC))
    assert [e.kind for e in released.events] == [EventKind.FORECAST]
    assert released.expected_version == 1
    assert source.calls == []


@pytest.mark.parametrize(
    "blob",
    [
        "not json",
        '{"kind": "observed", "v": 99}',
        encode_state(ForecastState(target_day=date(2026, 11, 24))),  # the other kind's
    ],
)
def test_an_unreadable_state_restarts_from_a_fresh_one(blob: str) -> None:
    source = FunctionAir(pm25(lambda _: 80.0))
    watching = subscription()
    (decision,) = round_at(source, [(watching, StoredState(7, blob))], NOW)
    assert decision.restarted is True
    assert decision.expected_version == 7
    # Fresh and armed: the polluted hour opens episode 1.
    assert [(e.kind, e.episode) for e in decision.events] == [(EventKind.ALERT, 1)]
    state = decode_state(decision.blob)
    assert isinstance(state, ObservedState)
    assert state.episodes == 1


def test_an_unreadable_state_restarts_even_without_air() -> None:
    source = FunctionAir(lambda *_: {})
    (decision,) = round_at(source, [(subscription(), StoredState(2, "{"))], NOW)
    assert decision.restarted is True
    assert decision.events == ()
    assert decode_state(decision.blob) == ObservedState()


def test_decisions_carry_the_version_read() -> None:
    source = FunctionAir(pm25(lambda _: 10.0))
    watching = subscription()
    stored = StoredState(41, encode_state(ObservedState()))
    (decision,) = round_at(source, [(watching, stored)], NOW)
    assert decision.expected_version == 41
    assert decision.restarted is False
    assert decode_state(decision.blob) == ObservedState(
        last_hour=datetime(2026, 11, 24, 10, tzinfo=UTC)
    )
