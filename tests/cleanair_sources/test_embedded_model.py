"""The embedded model: deterministic, plausible patterns, finite and non-negative everywhere."""

from __future__ import annotations

import asyncio
import itertools
import math
import re
import statistics
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cleanair_core.air.pollutants import SCORED, Pollutant
from cleanair_core.air.quality_source import AirQualitySource, Sample
from cleanair_core.geo import Point
from cleanair_sources.embedded_model import REGIONS, EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer

DELHI = Point(28.6139, 77.2090)
BEIJING = Point(39.9042, 116.4074)
REYKJAVIK = Point(64.1466, -21.9426)
MID_PACIFIC = Point(0.0, -150.0)
PATAGONIA = Point(-46.0, -70.0)  # steppe of Santa Cruz province, far from any town
PARIS = Point(48.8566, 2.3522)
PARIS_80_KM_SOUTH = Point(48.1366, 2.3522)  # fields of the Gâtinais
LONDON = Point(51.5074, -0.1278)

DOC = Path(__file__).parents[2] / "docs" / "air-quality-model.md"

#: A spread of days: a Monday in each season of two years.
DAYS = (
    date(2025, 1, 13),
    date(2025, 4, 14),
    date(2025, 7, 14),
    date(2025, 10, 13),
    date(2026, 2, 2),
)


@pytest.fixture(scope="module")
def gazetteer() -> Gazetteer:
    return Gazetteer.load()


@pytest.fixture(scope="module")
def model(gazetteer: Gazetteer) -> EmbeddedModel:
    return EmbeddedModel(gazetteer)


def at_local(point: Point, day: date, hour: float) -> datetime:
    """The UTC instant when local solar time at `point` is `hour` on `day`."""
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return midnight + timedelta(hours=hour - point.lon / 15.0)


def daily_mean(model: EmbeddedModel, point: Point, day: date, pollutant: Pollutant) -> float:
    values = [model.concentrations_at(point, at_local(point, day, h))[pollutant] for h in range(24)]
    return statistics.fmean(v for v in values if v is not None)


def value(model: EmbeddedModel, point: Point, at: datetime, pollutant: Pollutant) -> float:
    result = model.concentrations_at(point, at)[pollutant]
    assert result is not None
    return result


def hours(start: datetime, count: int, step: timedelta = timedelta(hours=1)) -> Iterator[datetime]:
    for k in range(count):
        yield start + k * step


def test_it_is_an_hourly_air_quality_source(model: EmbeddedModel) -> None:
    source: AirQualitySource = model
    assert source.update_interval == 3600


def test_it_answers_every_scored_pollutant(model: EmbeddedModel) -> None:
    result = model.concentrations_at(PARIS, datetime(2025, 6, 1, 12, tzinfo=UTC))
    assert set(result) == set(SCORED)
    assert all(isinstance(v, float) and v > 0 for v in result.values())


def test_two_instances_agree_whatever_was_asked_before(gazetteer: Gazetteer) -> None:
    first, second = EmbeddedModel(gazetteer), EmbeddedModel(Gazetteer.load())
    samples = [
        (point, datetime(2024, 2, 29, 0, tzinfo=UTC) + timedelta(hours=7 * k))
        for k in range(40)
        for point in (DELHI, REYKJAVIK, MID_PACIFIC, Point(89.99, 179.99), Point(-33.9, 151.2))
    ]
    forward = [first.concentrations_at(p, t) for p, t in samples]
    backward = [second.concentrations_at(p, t) for p, t in reversed(samples)]
    assert forward == list(reversed(backward))
    # And again from warm caches.
    assert forward == [first.concentrations_at(p, t) for p, t in samples]


def test_an_offset_timezone_means_the_same_instant(model: EmbeddedModel) -> None:
    utc = datetime(2025, 3, 3, 6, tzinfo=UTC)
    helsinki_time = utc.astimezone(ZoneInfo("Europe/Helsinki"))
    assert model.concentrations_at(PARIS, utc) == model.concentrations_at(PARIS, helsinki_time)


def test_a_naive_datetime_is_refused(model: EmbeddedModel) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        model.concentrations_at(PARIS, datetime(2025, 3, 3, 6))  # noqa: DTZ001 - under test


@pytest.mark.parametrize("polluted", [DELHI, BEIJING], ids=["Delhi", "Beijing"])
@pytest.mark.parametrize(
    "remote", [REYKJAVIK, MID_PACIFIC, PATAGONIA], ids=["Reykjavik", "mid-Pacific", "Patagonia"]
)
@pytest.mark.parametrize("pollutant", [Pollutant.PM25, Pollutant.NO2])
def test_polluted_regions_are_worse_than_remote_ones(
    model: EmbeddedModel, polluted: Point, remote: Point, pollutant: Pollutant
) -> None:
    for day in DAYS:
        assert daily_mean(model, polluted, day, pollutant) > daily_mean(
            model, remote, day, pollutant
        )


def test_the_dust_belt_has_more_pm10_than_western_europe(model: EmbeddedModel) -> None:
    niamey, riyadh = Point(13.51, 2.11), Point(24.71, 46.68)
    days = [date(2025, 1, 1) + timedelta(days=9 * k) for k in range(40)]
    london = [daily_mean(model, LONDON, day, Pollutant.PM10) for day in days]
    for dusty in (niamey, riyadh):
        levels = [daily_mean(model, dusty, day, Pollutant.PM10) for day in days]
        assert all(d > c for d, c in zip(levels, london, strict=True))
        assert statistics.fmean(levels) > 2 * statistics.fmean(london)


def test_annual_means_have_plausible_magnitudes(model: EmbeddedModel) -> None:
    """Orders of magnitude of WHO/EEA annual means (µg/m³), not station values."""

    def annual(point: Point, pollutant: Pollutant) -> float:
        start = datetime(2025, 1, 1, tzinfo=UTC)
        return statistics.fmean(
            value(model, point, t, pollutant)
            for t in hours(start, 365 * 4, timedelta(hours=6, minutes=1))
        )

    assert 50 < annual(DELHI, Pollutant.PM25) < 150
    assert 5 < annual(LONDON, Pollutant.PM25) < 20
    assert 15 < annual(LONDON, Pollutant.NO2) < 50
    assert annual(MID_PACIFIC, Pollutant.PM25) < 5
    assert annual(MID_PACIFIC, Pollutant.NO2) < 2
    assert 20 < annual(MID_PACIFIC, Pollutant.O3) < 100


def test_a_city_centre_is_worse_than_the_countryside_80_km_away(
    model: EmbeddedModel, gazetteer: Gazetteer
) -> None:
    assert gazetteer.urban_intensity(PARIS_80_KM_SOUTH) < 0.1
    for day in DAYS:
        for pollutant in (Pollutant.PM25, Pollutant.NO2):
            centre = daily_mean(model, PARIS, day, pollutant)
            assert centre > daily_mean(model, PARIS_80_KM_SOUTH, day, pollutant)
        # ...while ozone is titrated in the city.
        assert daily_mean(model, PARIS, day, Pollutant.O3) < daily_mean(
            model, PARIS_80_KM_SOUTH, day, Pollutant.O3
        )


@pytest.mark.parametrize("city", [PARIS, DELHI, Point(40.71, -74.0)], ids=["Paris", "Delhi", "NY"])
def test_no2_peaks_with_the_morning_rush(model: EmbeddedModel, city: Point) -> None:
    weekdays = [DAYS[0] + timedelta(days=7 * w + d) for w in range(8) for d in range(5)]
    for day in weekdays:
        rush = value(model, city, at_local(city, day, 8), Pollutant.NO2)
        night = value(model, city, at_local(city, day, 3), Pollutant.NO2)
        assert rush > night


@pytest.mark.parametrize(
    "city", [PARIS, LONDON, Point(40.71, -74.0)], ids=["Paris", "London", "NY"]
)
def test_no2_is_lower_on_sundays(model: EmbeddedModel, city: Point) -> None:
    wednesdays = [date(2025, 1, 1) + timedelta(days=7 * w) for w in range(52)]
    for hour in (8, 13, 18):
        weekday = statistics.fmean(
            value(model, city, at_local(city, d, hour), Pollutant.NO2) for d in wednesdays
        )
        sunday = statistics.fmean(
            value(model, city, at_local(city, d + timedelta(days=4), hour), Pollutant.NO2)
            for d in wednesdays
        )
        assert sunday < 0.9 * weekday


@pytest.mark.parametrize("place", [PARIS, PARIS_80_KM_SOUTH, DELHI, Point(-23.55, -46.63)], ids=str)
def test_ozone_peaks_in_the_afternoon(model: EmbeddedModel, place: Point) -> None:
    for day in [DAYS[0] + timedelta(days=5 * k) for k in range(60)]:
        afternoon = value(model, place, at_local(place, day, 15), Pollutant.O3)
        before_dawn = value(model, place, at_local(place, day, 5), Pollutant.O3)
        assert afternoon > before_dawn


def test_days_differ_at_the_same_hour(model: EmbeddedModel) -> None:
    for place in (PARIS, DELHI, MID_PACIFIC):
        for pollutant in (Pollutant.PM25, Pollutant.NO2, Pollutant.O3):
            series = [
                value(model, place, at_local(place, DAYS[1] + timedelta(days=7 * k), 12), pollutant)
                for k in range(10)
            ]
            assert max(series) > 1.2 * min(series), (place, pollutant)


@pytest.mark.parametrize(
    "place",
    [PARIS, DELHI, MID_PACIFIC, Point(0.0, 179.99), Point(-60.0, -179.99), Point(70.0, 100.0)],
    ids=str,
)
def test_hourly_values_change_smoothly_also_across_midnight_utc(
    model: EmbeddedModel, place: Point
) -> None:
    start = datetime(2025, 3, 1, tzinfo=UTC)
    series = [model.concentrations_at(place, t) for t in hours(start, 24 * 21)]
    for before, after in itertools.pairwise(series):
        for pollutant in SCORED:
            a, b = before[pollutant], after[pollutant]
            assert a is not None
            assert b is not None
            assert abs(b - a) <= 0.4 * max(a, b)
    # No jump at the day boundary itself: one second either side of midnight UTC.
    for k in range(21):
        midnight = start + timedelta(days=k)
        just_before = model.concentrations_at(place, midnight - timedelta(seconds=1))
        just_after = model.concentrations_at(place, midnight + timedelta(seconds=1))
        for pollutant in SCORED:
            a, b = just_before[pollutant], just_after[pollutant]
            assert a is not None
            assert b is not None
            assert math.isclose(a, b, rel_tol=1e-3)


def test_concentrations_answers_each_sample_in_order(model: EmbeddedModel) -> None:
    samples = [
        Sample(point, datetime(2025, 9, 1, tzinfo=UTC) + timedelta(hours=k))
        for k, point in enumerate([DELHI, REYKJAVIK, PARIS, MID_PACIFIC])
    ]
    answered = asyncio.run(model.concentrations(samples))
    assert answered == [model.concentrations_at(s.point, s.at) for s in samples]
    assert asyncio.run(model.concentrations([])) == []


@settings(max_examples=300, deadline=None)
@given(
    lat=st.floats(-90, 90),
    lon=st.floats(-180, 180),
    at=st.datetimes(
        # Hypothesis takes naive bounds and applies `timezones` to what it draws.
        min_value=datetime(2020, 1, 1),  # noqa: DTZ001
        max_value=datetime(2030, 12, 31, 23, 59),  # noqa: DTZ001
        timezones=st.just(UTC),
    ),
)
@example(lat=90.0, lon=0.0, at=datetime(2020, 1, 1, tzinfo=UTC))
@example(lat=-90.0, lon=180.0, at=datetime(2030, 12, 31, 23, 59, tzinfo=UTC))
@example(lat=0.0, lon=-180.0, at=datetime(2025, 6, 21, 12, tzinfo=UTC))
@example(lat=0.0, lon=180.0, at=datetime(2025, 6, 21, 12, tzinfo=UTC))
@example(lat=28.6139, lon=77.209, at=datetime(2024, 12, 1, 8, tzinfo=UTC))
def test_every_place_and_time_gives_finite_non_negative_values(
    model: EmbeddedModel, lat: float, lon: float, at: datetime
) -> None:
    result = model.concentrations_at(Point(lat, lon), at)
    assert set(result) == set(SCORED)
    for pollutant in SCORED:
        level = result[pollutant]
        assert level is not None
        assert math.isfinite(level)
        assert level >= 0
    assert result[Pollutant.PM10] >= result[Pollutant.PM25]  # type: ignore[operator]


def test_the_dateline_is_seamless(model: EmbeddedModel) -> None:
    """lon 180 and -180 are the same meridian: the same values, at the same instant."""
    for lat in (-60.0, 0.0, 52.0):
        for at in hours(datetime(2025, 1, 1, tzinfo=UTC), 10, timedelta(hours=7)):
            east = model.concentrations_at(Point(lat, 180.0), at)
            west = model.concentrations_at(Point(lat, -180.0), at)
            for pollutant in (Pollutant.PM25, Pollutant.O3, Pollutant.SO2):
                # The weekday does change across the date line; these ignore it at I = 0.
                assert math.isclose(east[pollutant], west[pollutant], rel_tol=1e-9)  # type: ignore[arg-type]


def test_the_documented_region_table_is_the_code() -> None:
    times = "\N{MULTIPLICATION SIGN}"
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 8 and times in cells[2] and cells[0] != "region":
            lat, lon = (float(v) for v in cells[1].split(","))
            sigma_lat, sigma_lon = (float(v) for v in cells[2].split(times))
            rows[cells[0]] = (lat, lon, sigma_lat, sigma_lon, tuple(float(v) for v in cells[3:]))
    assert rows == {r.name: (r.lat, r.lon, r.sigma_lat, r.sigma_lon, r.increment) for r in REGIONS}


def test_the_documented_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    (example,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    exec(compile(example, str(DOC), "exec"), {})
    assert "more NO2 at the kerb" in capsys.readouterr().out


@settings(max_examples=40, deadline=None)
@given(
    st.floats(-80.0, 80.0),
    st.floats(-179.0, 179.0),
    st.integers(0, 24 * 800),
    st.integers(0, 2**31),
)
def test_the_array_answer_is_the_sample_by_sample_answer(
    model: EmbeddedModel, lat: float, lon: float, hour: int, seed: int
) -> None:
    """`air_at_hour` (NumPy, for a plan's nodes) gives what `concentrations_at` gives, for
    points scattered over cells and weather nodes, at any hour."""
    rng = np.random.default_rng(seed)
    lats = np.clip(lat + rng.uniform(-6.0, 6.0, 60), -89.9, 89.9)
    lons = np.clip(lon + rng.uniform(-6.0, 6.0, 60), -179.99, 179.99)
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=hour)
    air = model.air_at_hour(lats, lons, at)
    for row, (a, o) in enumerate(zip(lats.tolist(), lons.tolist(), strict=True)):
        one = model.concentrations_at(Point(a, o), at)
        expected = [one[p] for p in SCORED]
        assert air[row].tolist() == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_no_points_is_an_empty_array(model: EmbeddedModel) -> None:
    air = model.air_at_hour(np.array([]), np.array([]), datetime(2026, 1, 1, tzinfo=UTC))
    assert air.shape == (0, len(SCORED))


def test_the_array_answer_holds_at_the_poles_and_across_the_date_line(
    model: EmbeddedModel,
) -> None:
    """Cells at the grid's edges (their centres beyond them) agree in both answers."""
    lats = np.array([90.0, -90.0, 89.996, -89.996, 0.0, 0.0, 45.0, -45.0])
    lons = np.array([0.0, 10.0, 179.996, -179.996, 180.0, -180.0, 179.994, -179.994])
    at = datetime(2026, 3, 1, 12, tzinfo=UTC)
    air = model.air_at_hour(lats, lons, at)
    for row, (a, o) in enumerate(zip(lats.tolist(), lons.tolist(), strict=True)):
        one = model.concentrations_at(Point(a, o), at)
        assert air[row].tolist() == pytest.approx([one[p] for p in SCORED], rel=1e-12, abs=1e-12)
