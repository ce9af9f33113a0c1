"""A point's past hours (`cleanair_core.air.history`): the span and its window, paging
through signed tokens, the charge per day, and each hour's provenance."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.air.fused_air import FusedAir
from cleanair_core.air.fusion import FUSION_PARAMETERS
from cleanair_core.air.history import (
    MAX_PAGE_SIZE,
    MEASURED_WEIGHT,
    HistorySpan,
    HourKind,
    OutsideHistoryWindow,
    history_hours,
    history_span,
)
from cleanair_core.air.history_pages import (
    TOKEN_LIFETIME,
    HistoryCursor,
    page_token,
    read_page_token,
    request_digest,
)
from cleanair_core.air.indexes.registry import indexes_for
from cleanair_core.air.observations import Observation, Station
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.clock import ManualClock
from cleanair_core.errors import Unprocessable
from cleanair_core.geo import Point
from cleanair_storage.memory import MemoryStore

NOW = datetime(2026, 3, 10, 12, 20, tzinfo=UTC)
HOUR = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
CENTRE = Point(60.17, 24.94)
KEY = b"k" * 32
CONNECTION = str(uuid.UUID(int=1))


class FlatAir:
    """The same air at every point and hour; counts its calls."""

    update_interval = 3600

    def __init__(self, value: float = 20.0) -> None:
        self.value = value
        self.calls: list[list[Sample]] = []

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.calls.append(list(samples))
        return [dict.fromkeys(SCORED, self.value) for _ in samples]


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


# -- the span and its window


def test_the_span_is_every_hour_from_starts_to_ends() -> None:
    span = history_span(HOUR - timedelta(hours=3, minutes=50), None, NOW)
    # 08:10 falls in 08:00; now (12:20) in 12:00, the conditions' hour: 08..12.
    assert span == HistorySpan(HOUR - timedelta(hours=4), 5)
    on_the_hour = history_span(HOUR - timedelta(hours=4), HOUR, NOW)
    assert [on_the_hour.hour(i) for i in range(on_the_hour.count)] == [
        HOUR - timedelta(hours=k) for k in (4, 3, 2, 1)
    ]


def test_naive_times_are_utc() -> None:
    naive = history_span(datetime(2026, 3, 10, 8, 0), datetime(2026, 3, 10, 10, 0), NOW)  # noqa: DTZ001
    assert naive == HistorySpan(HOUR - timedelta(hours=4), 2)


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (NOW - timedelta(days=30, seconds=1), None),
        (NOW - timedelta(days=31), NOW - timedelta(days=29)),
        (NOW - timedelta(hours=2), NOW + timedelta(seconds=1)),
        (NOW + timedelta(hours=1), NOW + timedelta(hours=3)),
        (NOW + timedelta(hours=1), None),
        (NOW, None),
    ],
    ids=[
        "just-over-30-days",
        "reaching-back-further",
        "into-the-future",
        "all-future",
        "starting-later-till-now",
        "starting-now",
    ],
)
def test_outside_the_past_window_is_refused(start: datetime, end: datetime | None) -> None:
    with pytest.raises(OutsideHistoryWindow) as refused:
        history_span(start, end, NOW)
    assert refused.value.detail == "History times must lie between 30 days ago and now"


def test_thirty_days_to_the_second_is_inside() -> None:
    span = history_span(NOW - timedelta(days=30), NOW, NOW)
    assert span.count == 30 * 24 + 1  # the hour 30 days ago falls in, to this one
    assert span.charged_days == 31


@pytest.mark.parametrize("end", [NOW - timedelta(hours=2), NOW - timedelta(hours=3)])
def test_an_end_not_after_the_start_is_unprocessable(end: datetime) -> None:
    with pytest.raises(Unprocessable) as refused:
        history_span(NOW - timedelta(hours=2), end, NOW)
    [violation] = refused.value.violations
    assert (violation.field, violation.rule) == ("end", "minimum")


@pytest.mark.parametrize(
    ("hours", "days"), [(1, 1), (23, 1), (24, 1), (25, 2), (48, 2), (168, 7), (721, 31)]
)
def test_the_span_is_charged_per_started_day(hours: int, days: int) -> None:
    assert HistorySpan(HOUR, hours).charged_days == days


# -- paging


@given(
    back=st.integers(min_value=0, max_value=30 * 24 * 3600 - 1),
    length=st.integers(min_value=1, max_value=30 * 24 * 3600),
    size=st.integers(min_value=1, max_value=MAX_PAGE_SIZE),
    now_offset=st.integers(min_value=0, max_value=3599),
)
def test_pages_cover_every_hour_of_the_span_once_in_order(
    back: int, length: int, size: int, now_offset: int
) -> None:
    now = HOUR + timedelta(seconds=now_offset)
    start = now - timedelta(seconds=back + 1)
    end = min(now, start + timedelta(seconds=length))
    span = history_span(start, end, now)
    digest = request_digest(CENTRE, start, end, None)
    cursor: HistoryCursor | None = HistoryCursor(span, 0, now)
    seen: list[datetime] = []
    while cursor is not None:
        hours, following = cursor.span.page(cursor.offset, size)
        assert 1 <= len(hours) <= size
        seen.extend(hours)
        if following is None:
            cursor = None
            continue
        token = page_token(KEY, CONNECTION, digest, HistoryCursor(span, following, now))
        cursor = read_page_token(KEY, token, CONNECTION, digest, now)
    first = start.replace(minute=0, second=0, microsecond=0)
    expected_count = math.ceil((end - first) / timedelta(hours=1))
    assert seen == [first + timedelta(hours=k) for k in range(expected_count)]
    assert seen[0] <= start < seen[0] + timedelta(hours=1)
    assert seen[-1] < end <= seen[-1] + timedelta(hours=1)


def _token(digest: str, offset: int = 24, paid: datetime = NOW) -> str:
    return page_token(KEY, CONNECTION, digest, HistoryCursor(HistorySpan(HOUR, 100), offset, paid))


def _refused(token: str, *, connection: str = CONNECTION, digest: str, now: datetime = NOW) -> str:
    with pytest.raises(Unprocessable) as refused:
        read_page_token(KEY, token, connection, digest, now)
    [violation] = refused.value.violations
    assert (violation.field, violation.rule) == ("page_token", "invalid")
    return violation.message


def _swap_char(text: str, at: int) -> str:
    return text[:at] + ("A" if text[at] != "A" else "B") + text[at + 1 :]


def test_a_token_reads_back() -> None:
    digest = request_digest(CENTRE, HOUR, None, None)
    cursor = read_page_token(KEY, _token(digest), CONNECTION, digest, NOW)
    assert cursor == HistoryCursor(HistorySpan(HOUR, 100), 24, NOW)


@given(at=st.integers(min_value=0, max_value=400))
def test_a_tampered_token_is_refused(at: int) -> None:
    digest = request_digest(CENTRE, HOUR, None, None)
    token = _token(digest)
    tampered = _swap_char(token, at % len(token))
    if tampered.replace(".", "") == token.replace(".", ""):
        return
    assert _refused(tampered, digest=digest) == "is not a page token of this request"


def test_a_token_edited_to_widen_its_span_is_refused() -> None:
    """Re-signing is what it would take: a payload with a longer span and the old MAC fails."""
    digest = request_digest(CENTRE, HOUR, None, None)
    wide = page_token(b"x" * 32, CONNECTION, digest, HistoryCursor(HistorySpan(HOUR, 720), 1, NOW))
    body, _, _ = wide.partition(".")
    _, _, mac = _token(digest).partition(".")
    _refused(f"{body}.{mac}", digest=digest)
    _refused(wide, digest=digest)  # signed with another key


def test_another_connections_or_requests_token_is_refused() -> None:
    digest = request_digest(CENTRE, HOUR, None, None)
    token = _token(digest)
    _refused(token, connection=str(uuid.UUID(int=2)), digest=digest)
    elsewhere = request_digest(Point(51.5, -0.13), HOUR, None, None)
    assert _refused(token, digest=elsewhere) == "is not a page token of this request"
    longer = request_digest(CENTRE, HOUR - timedelta(days=1), None, None)
    _refused(token, digest=longer)
    other_index = request_digest(CENTRE, HOUR, None, ["uk_daqi"])
    _refused(token, digest=other_index)
    for junk in ["", ".", "abc", "a.b", "☃.☃", "x" * 300]:
        _refused(junk, digest=digest)


def test_a_token_expires_an_hour_after_the_paid_page() -> None:
    digest = request_digest(CENTRE, HOUR, None, None)
    token = _token(digest, paid=NOW)
    read_page_token(KEY, token, CONNECTION, digest, NOW + TOKEN_LIFETIME)
    message = _refused(token, digest=digest, now=NOW + TOKEN_LIFETIME + timedelta(seconds=1))
    assert message == "has expired: ask again without it"


# -- the hours


def test_the_hours_and_their_indexes_come_from_one_call_to_the_source() -> None:
    source = FlatAir()
    hours = [HOUR - timedelta(hours=k) for k in range(47, -1, -1)]
    built = run(history_hours(source, CENTRE, hours, indexes_for("GB"), "embedded-model"))
    assert isinstance(built, list)
    assert len(source.calls) == 1
    # The 23 hours before the first feed its 24-hour means.
    assert [s.at for s in source.calls[0]] == [
        hours[0] - timedelta(hours=k) for k in range(23, 0, -1)
    ] + hours
    assert [h.time for h in built] == hours
    assert all(h.provenance.kind is HourKind.MODELLED for h in built)
    assert all(h.provenance.source == "embedded-model" for h in built)
    [daqi] = built[0].indexes
    assert daqi.concentrations[Pollutant.PM25].averaging.value == "24h"


def _fused(store: MemoryStore, clock: ManualClock) -> FusedAir:
    return FusedAir(FlatAir(), store, clock=clock, parameters=FUSION_PARAMETERS)


def _kinds(air: FusedAir, point: Point, hours: list[datetime]) -> list[HourKind]:
    built = run(history_hours(air, point, hours, indexes_for(None), "embedded-model"))
    assert isinstance(built, list)
    return [hour.provenance.kind for hour in built]


def test_provenance_with_a_station_near_and_far() -> None:
    """Hours a station beside the point measured are `measured`; the hours after its last
    measurement (its correction fading) `fused`; before it measured anything `modelled`. A
    station 80 km away moves the value but is out of reach: `fused`, never `measured`."""
    store, clock = MemoryStore(), ManualClock(NOW)
    near = Station("t:near", "Kallio", Point(60.171, 24.941))
    store.put_stations([near])
    measured = [HOUR - timedelta(hours=k) for k in (6, 5, 4)]
    store.put_observations([Observation(near.id, Pollutant.NO2, h, 60.0) for h in measured])
    hours = [HOUR - timedelta(hours=k) for k in range(8, -1, -1)]  # 04:00 .. 12:00
    kinds = _kinds(_fused(store, clock), CENTRE, hours)
    assert kinds == [
        HourKind.MODELLED,
        HourKind.MODELLED,
        HourKind.MEASURED,  # the hour ending at 06:00, measured beside the point
        HourKind.MEASURED,
        HourKind.MEASURED,
        *[HourKind.FUSED] * 4,  # 09:00 .. 12:00: the 08:00 value, fading
    ]
    built = run(history_hours(_fused(store, clock), CENTRE, hours, [], "embedded-model"))
    assert isinstance(built, list)
    [station] = built[2].provenance.stations
    assert station.id == near.id
    assert station.weight >= MEASURED_WEIGHT
    assert built[2].provenance.source == "embedded-model+stations"

    far_store = MemoryStore()
    far = Station("t:far", "Tallinn", Point(59.44, 24.75))
    far_store.put_stations([far])
    far_store.put_observations([Observation(far.id, Pollutant.NO2, h, 60.0) for h in measured])
    far_kinds = _kinds(_fused(far_store, clock), CENTRE, hours)
    assert HourKind.MEASURED not in far_kinds
    assert far_kinds[2:] == [HourKind.FUSED] * 7


def test_hours_older_than_the_observations_kept_can_only_be_modelled() -> None:
    """The retention prunes observations by the end of their hour: an hour before the cutoff
    has none of its own, nor any earlier one to fade from."""
    store, clock = MemoryStore(), ManualClock(NOW)
    near = Station("t:near", "Kallio", Point(60.171, 24.941))
    store.put_stations([near])
    hours = [HOUR - timedelta(hours=k) for k in range(9, -1, -1)]  # 03:00 .. 12:00
    store.put_observations([Observation(near.id, Pollutant.NO2, h, 60.0) for h in hours])
    store.delete_observations_before(HOUR - timedelta(hours=4))  # a retention of 4 h 20 min
    assert _kinds(_fused(store, clock), CENTRE, hours) == [
        *[HourKind.MODELLED] * 5,
        *[HourKind.MEASURED] * 5,
    ]
