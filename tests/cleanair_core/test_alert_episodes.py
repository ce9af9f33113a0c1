"""Observed episodes and forecast alerts: one alert per episode, an all-clear for each, the
hysteresis, missing and repeated hours, quiet hours and stable ids, on an injected clock.

The expected decisions are computed here by scanning the whole sequence of hours for runs
(`expected_observed`), not step by step as the module does.
"""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from cleanair_core.alerts.episodes import ObservedRule, ObservedState, observe
from cleanair_core.alerts.events import AlertEvent, Direction, EventKind, release
from cleanair_core.alerts.forecasts import ForecastRule, ForecastState, forecast
from cleanair_core.alerts.quiet_hours import QuietHours, is_quiet, quiet_until

SUBSCRIPTION = uuid.UUID("5b0c3c9e-3f7e-4c47-9a51-0d8a4b6f1e20")
HELSINKI = ZoneInfo("Europe/Helsinki")
NEW_YORK = ZoneInfo("America/New_York")
START = datetime(2026, 1, 15, 10, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
#: Evaluations run a little after the hour's data is in.
LAG = timedelta(minutes=10)
#: Near a clock change in each zone: Helsinki falls back on 25 October 2026, New York on
#: 1 November, and both spring forward in March.
NEAR_CHANGES = [
    datetime(2026, 3, 7, 12, tzinfo=UTC),
    datetime(2026, 3, 28, 12, tzinfo=UTC),
    datetime(2026, 10, 24, 12, tzinfo=UTC),
    datetime(2026, 10, 31, 12, tzinfo=UTC),
]


def observed_rule(**changes: object) -> ObservedRule:
    settings_ = {"subscription_id": SUBSCRIPTION, "threshold": 3, "zone": HELSINKI}
    settings_.update(changes)
    return ObservedRule(**settings_)  # type: ignore[arg-type]


def reaches(rule: ObservedRule, category: int) -> bool:
    if rule.direction is Direction.WORSE:
        return category >= rule.threshold
    return category <= rule.threshold


def clear(rule: ObservedRule, category: int) -> bool:
    if rule.direction is Direction.WORSE:
        return category <= rule.threshold - rule.hysteresis_categories
    return category >= rule.threshold + rule.hysteresis_categories


def expected_observed(rule: ObservedRule, categories: list[int]) -> list[tuple[EventKind, int]]:
    """(kind, index of the deciding hour) for the observed hours in order: an alert at the
    first hour past the threshold once armed, an all-clear at the first hour completing
    `hysteresis_hours` clear hours in a row after it, and armed again after that."""
    decided: list[tuple[EventKind, int]] = []
    armed_from = 0
    hours = rule.hysteresis_hours
    while True:
        start = next(
            (i for i in range(armed_from, len(categories)) if reaches(rule, categories[i])),
            None,
        )
        if start is None:
            return decided
        decided.append((EventKind.ALERT, start))
        end = next(
            (
                j
                for j in range(start + hours, len(categories))
                if all(clear(rule, c) for c in categories[j - hours + 1 : j + 1])
            ),
            None,
        )
        if end is None:
            return decided
        decided.append((EventKind.ALL_CLEAR, end))
        armed_from = end + 1


def run_observed(
    rule: ObservedRule,
    hours: list[tuple[datetime, int]],
    *,
    retry: bool = False,
    lag: timedelta = LAG,
) -> tuple[ObservedState, list[AlertEvent]]:
    """Observe every hour (twice each with `retry`, as a retrying worker would), then release
    what is still pending once every quiet period is over."""
    state, sent = ObservedState(), list[AlertEvent]()
    for hour, category in hours:
        for _ in range(2 if retry else 1):
            state, events = observe(state, rule, hour, category, hour + lag)
            sent.extend(events)
    state, events = release(state, datetime(2100, 1, 1, tzinfo=UTC))
    return state, [*sent, *events]


def assert_episodes_alternate(events: list[AlertEvent], still_open: bool) -> None:
    """Alert, all-clear, alert, ...: every all-clear ends the episode its alert started."""
    kinds = [event.kind for event in events]
    assert kinds == [EventKind.ALERT, EventKind.ALL_CLEAR] * (len(kinds) // 2) + [
        EventKind.ALERT
    ] * (len(kinds) % 2)
    for alert, all_clear in zip(events[::2], events[1::2], strict=False):
        assert all_clear.episode == alert.episode
    assert still_open == (kinds[-1:] == [EventKind.ALERT])


# --- observed: examples ---------------------------------------------------------------------


def test_an_episode_alerts_once_and_ends_with_an_all_clear_after_the_hysteresis() -> None:
    rule = observed_rule(threshold=3, hysteresis_categories=2, hysteresis_hours=3)
    hours = [(START + i * HOUR, c) for i, c in enumerate([1, 3, 5, 4, 1, 1, 2, 1, 1, 0, 3])]
    state, events = run_observed(rule, hours)
    # 2 is not two categories below 3: it restarts the count; the third clear hour in a row
    # (index 9) ends the episode, and the next crossing starts episode 2.
    assert [(e.kind, e.hour, e.category, e.episode) for e in events] == [
        (EventKind.ALERT, START + HOUR, 3, 1),
        (EventKind.ALL_CLEAR, START + 9 * HOUR, 0, 1),
        (EventKind.ALERT, START + 10 * HOUR, 3, 2),
    ]
    assert all(e.due_at == e.decided_at == e.hour + LAG for e in events if e.hour)
    assert state.open
    assert state.episodes == 2


def test_good_air_alerts_when_the_category_falls_to_the_threshold() -> None:
    rule = observed_rule(threshold=1, direction=Direction.BETTER, hysteresis_hours=2)
    hours = [(START + i * HOUR, c) for i, c in enumerate([3, 1, 0, 2, 3, 3])]
    _, events = run_observed(rule, hours)
    assert [(e.kind, e.category) for e in events] == [
        (EventKind.ALERT, 1),
        (EventKind.ALL_CLEAR, 3),
    ]


def test_a_new_subscription_alerts_if_the_air_is_already_past_the_threshold() -> None:
    _, events = observe(ObservedState(), observed_rule(), START, 4, START + LAG)
    assert [e.kind for e in events] == [EventKind.ALERT]


def test_a_missing_hour_neither_counts_nor_restarts_the_hysteresis() -> None:
    rule = observed_rule(hysteresis_hours=2)
    # Hour 2 is missing: hours 1 and 3 are two clear hours in a row.
    hours = [(START, 4), (START + HOUR, 0), (START + 3 * HOUR, 0)]
    _, events = run_observed(rule, hours)
    assert [(e.kind, e.hour) for e in events] == [
        (EventKind.ALERT, START),
        (EventKind.ALL_CLEAR, START + 3 * HOUR),
    ]


def test_an_hour_observed_again_or_out_of_order_decides_nothing() -> None:
    rule = observed_rule()
    state, events = observe(ObservedState(), rule, START, 4, START + LAG)
    assert events
    assert observe(state, rule, START, 4, START + LAG) == (state, ())
    assert observe(state, rule, START - HOUR, 0, START + LAG) == (state, ())
    # A retry of the same hour later changes nothing either, nor does different data for it.
    assert observe(state, rule, START, 0, START + 5 * HOUR) == (state, ())


def test_event_ids_are_stable_and_distinct() -> None:
    rule = observed_rule()
    hours = [(START + i * HOUR, c) for i, c in enumerate([4, 0, 4, 0])]
    _, events = run_observed(rule, hours)
    _, replayed = run_observed(rule, hours, lag=timedelta(minutes=40))
    assert [e.id for e in events] == [e.id for e in replayed]
    assert len({e.id for e in events}) == 4
    _, other = run_observed(attrs.evolve(rule, subscription_id=uuid.uuid4()), hours)
    assert not {e.id for e in events} & {e.id for e in other}


def test_observed_rules_refuse_impossible_settings_without_echoing_them() -> None:
    for field, minimum in (("threshold", 0), ("hysteresis_categories", 1), ("hysteresis_hours", 1)):
        # The message names the field and its bound, never the value given.
        with pytest.raises(ValueError, match=f"^{field} must be at least {minimum}$"):
            observed_rule(**{field: -7})
    with pytest.raises(ValueError, match="0 or more"):
        observe(ObservedState(), observed_rule(), START, -1, START)
    naive = datetime(2026, 1, 15)  # noqa: DTZ001 - a naive instant, to be refused
    with pytest.raises(ValueError, match="timezone-aware"):
        observe(ObservedState(), observed_rule(), naive, 1, START)


# --- observed: quiet hours, examples --------------------------------------------------------

NIGHT = QuietHours(time(22), time(7))
# 22:00 in Helsinki in January is 20:00 UTC; 07:00 is 05:00 UTC.
EVENING = datetime(2026, 1, 15, 19, 0, tzinfo=UTC)
MORNING = datetime(2026, 1, 16, 5, 0, tzinfo=UTC)


def test_an_episode_begun_and_ended_in_one_quiet_period_is_never_told() -> None:
    rule = observed_rule(quiet=NIGHT)
    state, events = observe(ObservedState(), rule, EVENING + 2 * HOUR, 4, EVENING + 2 * HOUR)
    assert events == ()
    assert [e.kind for e in state.pending] == [EventKind.ALERT]
    assert state.pending[0].due_at == MORNING
    state, events = observe(state, rule, EVENING + 3 * HOUR, 0, EVENING + 3 * HOUR)
    assert events == ()
    assert state.pending == ()
    assert not state.open
    assert release(state, MORNING) == (state, ())


def test_an_alert_held_back_goes_out_when_quiet_hours_end() -> None:
    rule = observed_rule(quiet=NIGHT)
    state, _ = observe(ObservedState(), rule, EVENING + 2 * HOUR, 4, EVENING + 2 * HOUR)
    assert release(state, MORNING - timedelta(seconds=1)) == (state, ())
    state, events = release(state, MORNING)
    assert [(e.kind, e.decided_at, e.due_at) for e in events] == [
        (EventKind.ALERT, EVENING + 2 * HOUR, MORNING)
    ]
    assert state.pending == ()
    assert state.open


def test_an_all_clear_for_an_alert_told_waits_for_the_end_of_quiet_hours() -> None:
    rule = observed_rule(quiet=NIGHT)
    state, events = observe(ObservedState(), rule, EVENING, 4, EVENING)
    assert [e.kind for e in events] == [EventKind.ALERT]
    state, events = observe(state, rule, EVENING + 2 * HOUR, 0, EVENING + 2 * HOUR)
    assert events == ()
    assert [e.kind for e in state.pending] == [EventKind.ALL_CLEAR]
    # The next evaluation after quiet hours hands it over before deciding anything new.
    state, events = observe(state, rule, MORNING + HOUR, 4, MORNING + HOUR)
    assert [(e.kind, e.episode) for e in events] == [
        (EventKind.ALL_CLEAR, 1),
        (EventKind.ALERT, 2),
    ]


def test_an_alert_due_before_its_episode_ended_is_told_with_its_all_clear() -> None:
    rule = observed_rule(quiet=NIGHT)
    state, _ = observe(ObservedState(), rule, MORNING - HOUR, 4, MORNING - HOUR)
    # Nothing was released at 07:00; the episode ends at 08:00, after the alert was due.
    state, events = observe(state, rule, MORNING + HOUR, 0, MORNING + HOUR)
    assert [e.kind for e in events] == [EventKind.ALERT, EventKind.ALL_CLEAR]


# --- observed: properties -------------------------------------------------------------------

rules = st.builds(
    observed_rule,
    threshold=st.integers(0, 5),
    direction=st.sampled_from(Direction),
    hysteresis_categories=st.integers(1, 3),
    hysteresis_hours=st.integers(1, 4),
)
categories = st.lists(st.integers(0, 6), max_size=60)


def hours_of(
    values: list[int], gaps: list[int], start: datetime = START
) -> list[tuple[datetime, int]]:
    hours, at = [], start
    for i, value in enumerate(values):
        at += HOUR * (gaps[i % len(gaps)] if gaps else 1)
        hours.append((at, value))
    return hours


@settings(max_examples=300, deadline=None)
@given(rule=rules, values=categories, gaps=st.lists(st.integers(1, 4), max_size=10))
def test_observed_decisions_follow_the_episode_rules(
    rule: ObservedRule, values: list[int], gaps: list[int]
) -> None:
    hours = hours_of(values, gaps)
    state, events = run_observed(rule, hours)
    index: dict[datetime | None, int] = {hour: i for i, (hour, _) in enumerate(hours)}
    assert [(e.kind, index[e.hour]) for e in events] == expected_observed(rule, values)
    assert_episodes_alternate(events, state.open)
    assert [e.episode for e in events[::2]] == list(range(1, len(events[::2]) + 1))
    assert all(e.category == values[index[e.hour]] for e in events)
    assert len({e.id for e in events}) == len(events)


@settings(max_examples=200, deadline=None)
@given(rule=rules, values=categories, gaps=st.lists(st.integers(1, 4), max_size=10))
def test_retries_and_missing_hours_change_no_decision(
    rule: ObservedRule, values: list[int], gaps: list[int]
) -> None:
    contiguous = run_observed(rule, hours_of(values, []))
    retried = run_observed(rule, hours_of(values, []), retry=True)
    assert retried == contiguous
    _state, events = run_observed(rule, hours_of(values, gaps))
    assert [(e.id, e.kind, e.category, e.episode) for e in events] == [
        (e.id, e.kind, e.category, e.episode) for e in contiguous[1]
    ]


quarter_hours = st.builds(time, st.integers(0, 23), st.sampled_from([0, 15, 30, 45]))


@settings(max_examples=300, deadline=None)
@given(
    rule=rules,
    zone=st.sampled_from([HELSINKI, NEW_YORK]),
    start=st.sampled_from(NEAR_CHANGES),
    quiet=st.tuples(quarter_hours, quarter_hours).filter(lambda q: q[0] != q[1]),
    values=categories,
    lag_minutes=st.integers(0, 90),
    releases=st.lists(st.booleans(), max_size=20),
)
def test_quiet_hours_hold_events_back_and_drop_untold_episodes(
    rule: ObservedRule,
    zone: ZoneInfo,
    start: datetime,
    quiet: tuple[time, time],
    values: list[int],
    lag_minutes: int,
    releases: list[bool],
) -> None:
    rule = attrs.evolve(rule, zone=zone)
    quiet_rule = attrs.evolve(rule, quiet=QuietHours(*quiet))
    hours = hours_of(values, [], start)
    lag = timedelta(minutes=lag_minutes)
    _, decided = run_observed(rule, hours, lag=lag)
    # Told: every episode but those whose all-clear was decided before their alert was due.
    told: list[uuid.UUID] = []
    for alert, all_clear in zip(decided[::2], [*decided[1::2], None], strict=False):
        due = quiet_until(quiet_rule.quiet, zone, alert.decided_at)
        if all_clear is None or all_clear.decided_at >= due:
            told += [alert.id] + ([all_clear.id] if all_clear else [])
    # Evaluate hour by hour, releasing on some half hours in between, as a scheduler would.
    state, sent = ObservedState(), list[tuple[datetime, AlertEvent]]()
    for i, (hour, category) in enumerate(hours):
        state, events = observe(state, quiet_rule, hour, category, hour + lag)
        sent += [(hour + lag, e) for e in events]
        if releases and releases[i % len(releases)]:
            state, events = release(state, hour + lag + HOUR / 2)
            sent += [(hour + lag + HOUR / 2, e) for e in events]
    end = datetime(2100, 1, 1, tzinfo=UTC)
    state, events = release(state, end)
    sent += [(end, e) for e in events]
    assert [e.id for _, e in sent] == told
    for handed_at, event in sent:
        assert event.due_at == quiet_until(quiet_rule.quiet, zone, event.decided_at)
        assert not is_quiet(quiet_rule.quiet, zone, event.due_at)  # type: ignore[arg-type]
        assert event.decided_at <= event.due_at <= handed_at
    assert_episodes_alternate([e for _, e in sent], state.open)


# --- forecast -------------------------------------------------------------------------------

DAY = date(2026, 1, 16)


def forecast_rule(**changes: object) -> ForecastRule:
    settings_ = {"subscription_id": SUBSCRIPTION, "threshold": 3, "zone": HELSINKI}
    settings_.update(changes)
    return ForecastRule(**settings_)  # type: ignore[arg-type]


def run_forecasts(
    rule: ForecastRule, forecasts: list[tuple[date, int, datetime]]
) -> tuple[ForecastState, list[AlertEvent]]:
    state, sent = ForecastState(), list[AlertEvent]()
    for day, category, now in forecasts:
        state, events = forecast(state, rule, day, category, now)
        sent.extend(events)
    return state, sent


def test_a_forecast_alerts_once_a_day_unless_it_worsens_by_a_category() -> None:
    at = EVENING - 2 * HOUR
    day_after = DAY + timedelta(days=1)
    _, events = run_forecasts(
        forecast_rule(),
        [
            (DAY, 2, at),
            (DAY, 3, at + HOUR),
            (DAY, 3, at + 2 * HOUR),
            (DAY, 4, at + 3 * HOUR),
            (DAY, 3, at + 4 * HOUR),
            (DAY, 5, at + 5 * HOUR),
            (day_after, 4, at + 24 * HOUR),
            (DAY, 6, at + 25 * HOUR),
        ],
    )
    assert [(e.kind, e.target_day, e.category) for e in events] == [
        (EventKind.FORECAST, DAY, 3),
        (EventKind.FORECAST, DAY, 4),
        (EventKind.FORECAST, DAY, 5),
        (EventKind.FORECAST, day_after, 4),
    ]
    assert len({e.id for e in events}) == 4


def test_a_good_air_forecast_alerts_again_only_for_better_air() -> None:
    rule = forecast_rule(threshold=1, direction=Direction.BETTER)
    at = EVENING - 2 * HOUR
    _, events = run_forecasts(rule, [(DAY, 2, at), (DAY, 1, at), (DAY, 2, at), (DAY, 0, at)])
    assert [e.category for e in events] == [1, 0]


def test_a_forecast_in_quiet_hours_waits_and_a_worse_one_replaces_it() -> None:
    rule = forecast_rule(quiet=NIGHT)
    state, events = forecast(ForecastState(), rule, DAY, 3, EVENING + 2 * HOUR)
    assert events == ()
    state, events = forecast(state, rule, DAY, 4, EVENING + 3 * HOUR)
    assert events == ()
    assert [e.category for e in state.pending] == [4]
    state, events = release(state, MORNING)
    assert [(e.category, e.due_at) for e in events] == [(4, MORNING)]
    # Told 4: a forecast of 4 again after quiet hours is nothing new.
    assert forecast(state, rule, DAY, 4, MORNING + HOUR) == (state, ())


def test_a_forecast_that_could_only_go_out_after_its_day_is_dropped() -> None:
    rule = forecast_rule(quiet=NIGHT)
    # 23:00 in Helsinki on the 16th, for the 16th: quiet until the 17th.
    state, events = forecast(ForecastState(), rule, DAY, 5, EVENING + 2 * HOUR + 24 * HOUR)
    assert events == ()
    assert state.pending == ()
    # Without quiet hours, too late is too late as well.
    late = datetime(2026, 1, 16, 22, 30, tzinfo=UTC)  # 00:30 on the 17th in Helsinki
    assert forecast(ForecastState(), forecast_rule(), DAY, 5, late)[1] == ()


@settings(max_examples=300, deadline=None)
@given(
    threshold=st.integers(0, 5),
    direction=st.sampled_from(Direction),
    quiet=st.none() | st.tuples(quarter_hours, quarter_hours).filter(lambda q: q[0] != q[1]),
    steps=st.lists(
        st.tuples(st.sampled_from([-1, 0, 0, 0, 1]), st.integers(0, 6), st.integers(0, 600)),
        max_size=40,
    ),
)
def test_forecasts_alert_at_most_once_a_day_unless_worse(
    threshold: int,
    direction: Direction,
    quiet: tuple[time, time] | None,
    steps: list[tuple[int, int, int]],
) -> None:
    rule = forecast_rule(
        threshold=threshold, direction=direction, quiet=QuietHours(*quiet) if quiet else None
    )
    sign = 1 if direction is Direction.WORSE else -1
    day, now, state = DAY, datetime(2026, 1, 15, 6, tzinfo=UTC), ForecastState()
    sent: list[tuple[datetime, AlertEvent]] = []
    latest: date | None = None
    told: dict[date, int] = {}  # the last category decided per day, told or waiting
    for day_step, category, minutes in steps:
        day += timedelta(days=day_step)
        now += timedelta(minutes=minutes)
        known = {e.id for _, e in sent} | {e.id for e in state.pending}
        state, events = forecast(state, rule, day, category, now)
        sent += [(now, e) for e in events]
        # Retried, it decides nothing new.
        assert forecast(state, rule, day, category, now) == (state, ())
        decided = bool({e.id for e in (*events, *state.pending)} - known)
        current = latest is None or day >= latest
        latest = day if current else latest
        fresh = day not in told or sign * (category - told[day]) >= 1
        reached = sign * (category - threshold) >= 0
        in_time = quiet_until(rule.quiet, HELSINKI, now).astimezone(HELSINKI).date() <= day
        if current and reached and fresh and in_time:
            told[day] = category
        else:
            assert not decided
    state, events = release(state, datetime(2100, 1, 1, tzinfo=UTC))
    sent += [(datetime(2100, 1, 1, tzinfo=UTC), e) for e in events]
    by_day: dict[date, list[int]] = {}
    for handed_at, event in sent:
        assert event.kind is EventKind.FORECAST
        assert event.target_day is not None
        assert event.decided_at <= event.due_at <= handed_at
        assert event.due_at.astimezone(HELSINKI).date() <= event.target_day
        if rule.quiet:
            assert not is_quiet(rule.quiet, HELSINKI, event.due_at)
        by_day.setdefault(event.target_day, []).append(sign * event.category)
    for told_categories in by_day.values():
        assert all(b - a >= 1 for a, b in itertools.pairwise(told_categories))
    assert {day: categories[-1] for day, categories in by_day.items()} == {
        day: sign * category for day, category in told.items()
    }


# --- everything together, on one clock ------------------------------------------------------


class AlertMachine(RuleBasedStateMachine):
    """Observed hours, forecasts and releases interleaved in any order as time passes, near
    a clock change, with retries; every event handed over is checked as it goes."""

    @initialize(
        zone=st.sampled_from([HELSINKI, NEW_YORK]),
        start=st.sampled_from(NEAR_CHANGES),
        quiet=st.tuples(quarter_hours, quarter_hours).filter(lambda q: q[0] != q[1]),
        threshold=st.integers(1, 4),
        hysteresis=st.tuples(st.integers(1, 2), st.integers(1, 3)),
    )
    def start(
        self,
        zone: ZoneInfo,
        start: datetime,
        quiet: tuple[time, time],
        threshold: int,
        hysteresis: tuple[int, int],
    ) -> None:
        self.zone, self.quiet = zone, QuietHours(*quiet)
        self.observed_rule = ObservedRule(
            subscription_id=SUBSCRIPTION,
            threshold=threshold,
            hysteresis_categories=hysteresis[0],
            hysteresis_hours=hysteresis[1],
            zone=zone,
            quiet=self.quiet,
        )
        self.forecast_rule = ForecastRule(
            subscription_id=SUBSCRIPTION, threshold=threshold, zone=zone, quiet=self.quiet
        )
        self.now, self.hour = start, start.replace(minute=0)
        self.observed, self.forecasts = ObservedState(), ForecastState()
        self.sent: list[AlertEvent] = []
        self.last_observe: tuple[datetime, int] | None = None

    def hand_over(self, events: tuple[AlertEvent, ...]) -> None:
        for event in events:
            assert event.decided_at <= event.due_at <= self.now
            assert not is_quiet(self.quiet, self.zone, event.due_at)
        self.sent.extend(events)

    @rule(category=st.integers(0, 6), gap=st.integers(1, 3), lag=st.integers(0, 59))
    def observe_an_hour(self, category: int, gap: int, lag: int) -> None:
        self.hour += gap * HOUR
        self.now = max(self.now, self.hour + timedelta(minutes=lag))
        self.observed, events = observe(
            self.observed, self.observed_rule, self.hour, category, self.now
        )
        self.last_observe = (self.hour, category)
        self.hand_over(events)

    @rule()
    def retry_the_last_hour(self) -> None:
        if self.last_observe is None:
            return
        hour, category = self.last_observe
        state, events = observe(self.observed, self.observed_rule, hour, category, self.now)
        assert (state, events) == (self.observed, ())

    @rule(tomorrow=st.booleans(), category=st.integers(0, 6))
    def forecast_a_day(self, tomorrow: bool, category: int) -> None:
        day = self.now.astimezone(self.zone).date() + timedelta(days=int(tomorrow))
        self.forecasts, events = forecast(
            self.forecasts, self.forecast_rule, day, category, self.now
        )
        self.hand_over(events)

    @rule(minutes=st.integers(1, 600))
    def time_passes_and_pending_events_are_released(self, minutes: int) -> None:
        self.now += timedelta(minutes=minutes)
        self.observed, events = release(self.observed, self.now)
        self.hand_over(events)
        self.forecasts, events = release(self.forecasts, self.now)
        self.hand_over(events)

    @invariant()
    def episodes_alternate_and_ids_are_unique(self) -> None:
        observed = [e for e in self.sent if e.kind is not EventKind.FORECAST]
        assert_episodes_alternate([*observed, *self.observed.pending], self.observed.open)
        assert len({e.id for e in self.sent}) == len(self.sent)

    @invariant()
    def forecasts_worsen_by_a_category_within_a_day(self) -> None:
        by_day: dict[date | None, list[int]] = {}
        for event in self.sent:
            if event.kind is EventKind.FORECAST:
                by_day.setdefault(event.target_day, []).append(event.category)
        for told in by_day.values():
            assert all(b - a >= 1 for a, b in itertools.pairwise(told))


AlertMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestAlertMachine = AlertMachine.TestCase
