"""Street-level downscaling: background + g(h) · (local increment - the cell's mean increment)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.air.street_level import (
    MAX_LOCAL_SHARE,
    STREET_POLLUTANTS,
    TRAFFIC_PROFILE,
    GridCell,
    StreetLevelAir,
    downscale,
    downscale_rows,
    street_value,
    traffic_factor,
)
from cleanair_core.geo import Point

NO2 = STREET_POLLUTANTS.index(Pollutant.NO2)
O3 = STREET_POLLUTANTS.index(Pollutant.O3)

amounts = st.floats(0.0, 200.0, allow_nan=False)
increments = st.lists(st.floats(-30.0, 60.0, allow_nan=False), min_size=4, max_size=4)


def background(no2: float = 20.0) -> Concentrations:
    return {
        Pollutant.PM25: 8.0,
        Pollutant.PM10: 15.0,
        Pollutant.NO2: no2,
        Pollutant.O3: 50.0,
        Pollutant.SO2: 2.0,
    }


def test_the_traffic_profile_is_tnos_road_transport_profile_with_mean_one() -> None:
    assert math.isclose(sum(TRAFFIC_PROFILE) / 24, 1.0)
    # TNO / MACC hourly factors for road transport (Denier van der Gon et al. 2011), which
    # already average 1: morning peak at 7-8, evening peak at 16-17.
    assert TRAFFIC_PROFILE[8] == pytest.approx(1.86)
    assert TRAFFIC_PROFILE[17] == pytest.approx(2.08)
    assert max(TRAFFIC_PROFILE) == TRAFFIC_PROFILE[17]
    night = [TRAFFIC_PROFILE[h] for h in (22, 23, 0, 1, 2, 3, 4, 5)]
    day = [TRAFFIC_PROFILE[h] for h in range(6, 18)]
    # Night over day hourly flow: 0.14 here; the EU noise working group's defaults
    # (06-18 day, 22-06 night) give 0.15-0.21 by road class.
    assert 0.13 <= (sum(night) / len(night)) / (sum(day) / len(day)) <= 0.21


def test_the_traffic_factor_follows_local_solar_time_without_steps() -> None:
    at = datetime(2026, 11, 24, 6, tzinfo=UTC)
    # 15 degrees east is one hour later in solar time.
    assert math.isclose(traffic_factor(15.0, at), traffic_factor(0.0, at + timedelta(hours=1)))
    assert math.isclose(traffic_factor(0.0, at), TRAFFIC_PROFILE[6])
    just_before = traffic_factor(0.0, at - timedelta(microseconds=1))
    assert math.isclose(just_before, TRAFFIC_PROFILE[6], rel_tol=1e-6)
    # Across midnight too.
    midnight = datetime(2026, 11, 24, tzinfo=UTC)
    assert math.isclose(
        traffic_factor(0.0, midnight - timedelta(microseconds=1)), TRAFFIC_PROFILE[0], rel_tol=1e-6
    )


def test_the_traffic_factor_needs_an_aware_time() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        traffic_factor(0.0, datetime(2026, 11, 24, 6))  # noqa: DTZ001 - under test


@given(increments, increments, st.floats(0.1, 2.0), st.integers(0, 3), st.floats(0.0, 40.0))
def test_more_local_traffic_never_lowers_a_traffic_pollutant(
    local: list[float], mean: list[float], g: float, index: int, extra: float
) -> None:
    higher = list(local)
    higher[index] += extra
    before, after = (
        downscale(background(), local, mean, g),
        downscale(background(), higher, mean, g),
    )
    pollutant = STREET_POLLUTANTS[index]
    assert after[pollutant] >= before[pollutant]  # type: ignore[operator]


@given(increments, increments, st.floats(0.0, 2.0), amounts)
def test_downscaled_values_are_never_negative_and_pm10_holds_pm25(
    local: list[float], mean: list[float], g: float, no2: float
) -> None:
    result = downscale(background(no2), local, mean, g)
    assert all(v is not None and v >= 0 for v in result.values())
    assert result[Pollutant.PM10] >= result[Pollutant.PM25]  # type: ignore[operator]
    assert result[Pollutant.SO2] == 2.0  # no traffic effect


@given(increments, st.floats(0.0, 2.0))
def test_a_point_with_the_cells_mean_increment_gets_the_background(
    mean: list[float], g: float
) -> None:
    base: Concentrations = dict.fromkeys(STREET_POLLUTANTS, 1000.0)  # no cap applies
    result = downscale(base, mean, mean, g)
    for pollutant in STREET_POLLUTANTS:
        assert math.isclose(result[pollutant], base[pollutant])  # type: ignore[arg-type]


@pytest.mark.parametrize("g", [0.5, 1.0, 2.0])
def test_no_more_than_the_local_share_of_the_cell_is_taken_out_at_any_hour(g: float) -> None:
    mean = [0.0, 0.0, 30.0, 0.0]
    result = downscale(background(no2=10.0), [0.0, 0.0, 0.0, 0.0], mean, g)
    assert math.isclose(result[Pollutant.NO2], 10.0 * (1 - MAX_LOCAL_SHARE))  # type: ignore[arg-type]


def test_the_issues_node_keeps_the_background_left_after_the_cells_traffic() -> None:
    """The issue's case, 14:20 UTC: B 9.823, g 2.028, the point's increment 1.029, the cell's
    5.894. Capping the daily mean at 60 % of B still took out g x 5.894 = 11.95, more than B."""
    b, g, local, mean = 9.823, 2.028, 1.029, 5.894
    value = street_value(b, local, mean, g)
    assert value == pytest.approx((1 - MAX_LOCAL_SHARE) * b + g * local)
    assert value > 0.0


def test_the_hours_traffic_is_taken_out_whole_where_the_value_holds_it() -> None:
    """At night g · mean fits in the cell's value even where the daily mean would not: a point
    with the cell's mean increment then gets the background, as averaging back requires."""
    b, mean, g = 10.0, 8.0, 0.5  # the mean is 80 % of B, the hour's traffic 40 %
    assert mean > MAX_LOCAL_SHARE * b >= g * mean
    assert street_value(b, mean, mean, g) == pytest.approx(b)


#: Inputs well outside what the shipped networks give, to hold the guarantee everywhere:
#: backgrounds from a trace to far above any limit value, g over the profile's whole range
#: and beyond, increments of either sign (ozone's are negative) far beyond a kerb's.
positive_backgrounds = st.floats(1e-6, 1e6)
profile_values = st.floats(0.0, 3.0 * max(TRAFFIC_PROFILE))
any_increments = st.floats(-1e4, 1e4)


@given(positive_backgrounds, any_increments, any_increments, profile_values)
def test_a_background_above_zero_gives_a_street_value_above_zero(
    b: float, local: float, mean: float, g: float
) -> None:
    assert street_value(b, local, mean, g) > 0.0


@given(
    st.lists(positive_backgrounds, min_size=4, max_size=4),
    st.lists(any_increments, min_size=4, max_size=4),
    st.lists(any_increments, min_size=4, max_size=4),
    profile_values,
)
def test_every_downscaled_pollutant_stays_above_zero(
    levels: list[float], local: list[float], mean: list[float], g: float
) -> None:
    base: Concentrations = dict(zip(STREET_POLLUTANTS, levels, strict=True))
    result = downscale(base, local, mean, g)
    assert all(v is not None and v > 0.0 for v in result.values())
    rows = downscale_rows(
        np.array([[base.get(p, math.nan) for p in SCORED]]),
        np.array([local]),
        np.array([mean]),
        np.array([g]),
    )
    assert (rows[0][[SCORED.index(p) for p in STREET_POLLUTANTS]] > 0.0).all()


@given(positive_backgrounds, st.floats(0.0, 1e4), any_increments, profile_values)
def test_a_traffic_pollutant_keeps_what_the_cells_traffic_cannot_take(
    b: float, local: float, mean: float, g: float
) -> None:
    """At most MAX_LOCAL_SHARE of B is ever taken out; a point's own traffic only adds."""
    assert street_value(b, local, mean, g) >= (1 - MAX_LOCAL_SHARE) * b * (1 - 1e-12)


def test_heavy_titration_lowers_ozone_ever_less_and_never_to_zero() -> None:
    """Ozone 45 where the cell's traffic takes none, at a kerb whose traffic would take 2 x 30
    at the peak by the straight line: far beyond what there is."""
    g = 2.0
    losses = np.linspace(0.0, 400.0, 4001)
    values = np.array([street_value(45.0, -loss / g, 0.0, g) for loss in losses])
    assert (values > 0.0).all()
    assert (np.diff(values) < 0.0).all()  # more traffic, less ozone
    linear = losses <= MAX_LOCAL_SHARE * 45.0
    assert values[linear] == pytest.approx(45.0 - losses[linear])  # the documented line
    assert values[~linear].min() < 0.1 * 45.0  # and it does fall: no floor


def test_the_flattening_meets_the_line_without_a_step_or_a_kink() -> None:
    rest, join, step = 45.0, MAX_LOCAL_SHARE * 45.0, 1e-6

    def value(loss: float) -> float:
        return street_value(rest, -loss, 0.0, 1.0)

    assert value(join + step) == pytest.approx(value(join) - step, abs=1e-9)
    below = (value(join) - value(join - step)) / step
    above = (value(join + step) - value(join)) / step
    assert below == pytest.approx(-1.0, rel=1e-4)
    assert above == pytest.approx(-1.0, rel=1e-4)


@given(
    st.lists(
        st.tuples(
            st.lists(st.floats(0.0, 300.0), min_size=5, max_size=5),
            st.lists(st.floats(-100.0, 100.0), min_size=4, max_size=4),
            st.lists(st.floats(-100.0, 100.0), min_size=4, max_size=4),
            profile_values,
        ),
        min_size=1,
        max_size=20,
    )
)
def test_the_array_path_gives_the_sample_paths_values(
    rows: list[tuple[list[float], list[float], list[float], float]],
) -> None:
    """A plan reads `downscale_rows`, a score `downscale`: the same rule, branch by branch."""
    backgrounds = np.array([levels for levels, _, _, _ in rows])
    arrays = downscale_rows(
        backgrounds,
        np.array([local for _, local, _, _ in rows]),
        np.array([mean for _, _, mean, _ in rows]),
        np.array([g for _, _, _, g in rows]),
    )
    for row, (levels, local, mean, g) in enumerate(rows):
        answer = downscale(dict(zip(SCORED, levels, strict=True)), local, mean, g)
        assert arrays[row].tolist() == pytest.approx([answer[p] for p in SCORED], rel=1e-12)


def test_unknown_pollutants_stay_unknown() -> None:
    result = downscale({Pollutant.NO2: None, Pollutant.PM25: 5.0}, [1.0] * 4, [0.5] * 4, 1.0)
    assert result[Pollutant.NO2] is None
    assert Pollutant.O3 not in result
    assert result[Pollutant.PM25] == pytest.approx(5.5)


class ConstantBackground:
    """One value everywhere (as a coarse grid cell gives), cells of 0.1 degree."""

    update_interval = 3600

    def __init__(self) -> None:
        self.asked: list[int] = []

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.asked.append(len(samples))
        return [background() for _ in samples]

    def cell_of(self, lat: float, lon: float) -> GridCell:
        south, west = math.floor(lat * 10) / 10, math.floor(lon * 10) / 10
        return GridCell(south, west, south + 0.1, west + 0.1)


class EastwardTraffic:
    """Increments inside lat 60..60.1, lon 24..24.1 only, growing eastward."""

    def __init__(self) -> None:
        self.cells: list[GridCell] = []

    def at(self, lats: np.ndarray, lons: np.ndarray) -> np.ndarray:
        result = np.full((lats.size, 4), np.nan)
        inside = (lats >= 60.0) & (lats < 60.1) & (lons >= 24.0) & (lons < 24.1)
        result[inside] = ((lons[inside] - 24.0) * 100.0)[:, None] * np.ones(4)
        return result

    def cell_mean(self, cell: GridCell) -> np.ndarray | None:
        self.cells.append(cell)
        return np.full(4, 5.0)


def test_street_level_air_downscales_inside_networks_and_leaves_the_rest_alone() -> None:
    base, traffic = ConstantBackground(), EastwardTraffic()
    air = StreetLevelAir(base, base, traffic)
    assert air.update_interval == 3600
    at = datetime(2026, 11, 24, 7, tzinfo=UTC)
    points = [Point(60.05, 24.01), Point(60.05, 24.09), Point(61.0, 24.05)]
    west, east, outside = asyncio.run(air.concentrations([Sample(p, at) for p in points]))
    assert outside == background()
    g = traffic_factor(24.01, at)
    assert west[Pollutant.NO2] == pytest.approx(20.0 + g * (1.0 - 5.0))
    assert east[Pollutant.NO2] > west[Pollutant.NO2]  # type: ignore[operator]
    assert east[Pollutant.O3] > west[Pollutant.O3]  # type: ignore[operator]  # the fake's sign
    assert base.asked == [3]
    assert traffic.cells == [GridCell(60.0, 24.0, 60.1, 24.1)]  # computed once, then kept


def test_street_level_air_answers_an_empty_batch() -> None:
    base = ConstantBackground()
    assert asyncio.run(StreetLevelAir(base, base, EastwardTraffic()).concentrations([])) == []


class NoTraffic:
    """Networks that cover nothing: the background everywhere."""

    def at(self, lats: np.ndarray, lons: np.ndarray) -> np.ndarray:
        return np.full((lats.size, 4), np.nan)

    def cell_mean(self, cell: GridCell) -> np.ndarray | None:
        return None


def test_replaced_increments_are_used_with_their_own_cell_means() -> None:
    base, before, after = ConstantBackground(), EastwardTraffic(), EastwardTraffic()
    air = StreetLevelAir(base, base, NoTraffic())
    sample = Sample(Point(60.05, 24.05), datetime(2026, 11, 24, 7, tzinfo=UTC))
    (plain,) = asyncio.run(air.concentrations([sample]))
    assert plain == background()

    air.replace_increments(before)  # a network imported here
    (downscaled,) = asyncio.run(air.concentrations([sample]))
    assert downscaled != background()
    air.replace_increments(after)  # and imported again
    asyncio.run(air.concentrations([sample]))

    # The cell's mean is computed again from the new increments, not kept from the old.
    assert (len(before.cells), len(after.cells)) == (1, 1)


class CellTraffic:
    """A mean per cell that tells the cells apart; none for cells south of 60.2."""

    def at(self, lats: np.ndarray, lons: np.ndarray) -> np.ndarray:
        return np.zeros((lats.size, 4))

    def cell_mean(self, cell: GridCell) -> np.ndarray | None:
        if cell.south < 60.2:
            return None
        return np.array([cell.south, cell.west, cell.north, cell.east])


# Points on a 0.05 degree lattice lie on the cells' borders half of the time.
coordinates = st.one_of(
    st.floats(0.0, 0.5, allow_nan=False), st.integers(0, 10).map(lambda k: k * 0.05)
)


@given(st.lists(st.tuples(coordinates, coordinates), max_size=80))
def test_cell_means_of_many_points_are_each_points_own(offsets: list[tuple[float, float]]) -> None:
    """The array version (one `cell_of` per cell) gives every point its own cell's mean."""
    base = ConstantBackground()
    air = StreetLevelAir(base, base, CellTraffic())
    lats = np.array([60.0 + a for a, _ in offsets])
    lons = np.array([24.0 + o for _, o in offsets])
    current = air._current
    expected = [air._cell_mean(current, a, o) for a, o in zip(lats, lons, strict=True)]
    means = air._cell_means_of(current, lats, lons)
    for row, mean in enumerate(expected):
        assert means[row].tolist() == (mean.tolist() if mean is not None else [math.nan] * 4) or (
            mean is None and np.isnan(means[row]).all()
        )


class BandTraffic:
    """Increments that vary with the point inside lat 60..60.4 (NaN elsewhere); a cell mean
    only for cells north of 60.2: a point may be outside, inside without a mean, or downscaled."""

    def at(self, lats: np.ndarray, lons: np.ndarray) -> np.ndarray:
        result = np.full((lats.size, 4), np.nan)
        inside = (lats >= 60.0) & (lats < 60.4)
        result[inside] = np.column_stack(
            [(lons[inside] - 24.0) * 90.0, -lats[inside], lats[inside] - 60.0, lons[inside]]
        )
        return result

    def cell_mean(self, cell: GridCell) -> np.ndarray | None:
        return None if cell.south < 60.2 else np.array([cell.west, 1.0, -2.0, cell.south])


@given(
    st.floats(59.9, 60.5, allow_nan=False),
    st.floats(24.0, 24.5, allow_nan=False),
    st.integers(0, 24 * 7 * 60),
)
def test_a_single_sample_is_downscaled_as_in_a_batch(lat: float, lon: float, minutes: int) -> None:
    """A score's one sample takes its own path (plain floats, no index arrays): it gives
    exactly what the batch path gives the same sample."""
    base = ConstantBackground()
    air = StreetLevelAir(base, base, BandTraffic())
    sample = Sample(
        Point(lat, lon), datetime(2026, 11, 23, tzinfo=UTC) + timedelta(minutes=minutes)
    )
    (alone,) = asyncio.run(air.concentrations([sample]))
    in_batch, _ = asyncio.run(air.concentrations([sample, sample]))
    assert alone == in_batch
