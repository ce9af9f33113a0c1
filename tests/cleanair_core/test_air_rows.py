"""The array path of a route's enrichment gives the waypoint path's route, bit for bit.

`enrich_rows` (whole columns of waypoints) against `enrich` (a dictionary and a score per
waypoint) on random air, times, activities and environments: every measure, rounded value
and summary equal (`==` on floats, not approximately), the keys in the same order.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cleanair_core.air.activities import ActivityType
from cleanair_core.air.exposure import EnvironmentType, personal_score
from cleanair_core.air.pollutants import SCORED, Concentrations
from cleanair_core.air.rows import as_rows, personal_score_rows, rounded, sub_indices
from cleanair_core.air.score import EEA_2024_BOUNDS, sub_index
from cleanair_core.geo import Point
from cleanair_core.routes.enrichment import enrich
from cleanair_core.routes.enrichment_rows import enrich_rows, timestamps

START = datetime(2026, 11, 24, 12, 20, 0, 123_457, tzinfo=UTC)

# Concentrations across every EEA band and beyond, the bounds themselves, zero and below.
bounds = sorted({b for pollutant in SCORED for b in EEA_2024_BOUNDS[pollutant]})
concentrations = st.one_of(
    st.floats(-5.0, 400.0, allow_nan=False),
    st.sampled_from([0.0, -0.0, *bounds]),
    st.floats(0.0, 1e6, allow_nan=False, allow_infinity=False),
)
values = st.one_of(st.none(), concentrations)
airs = st.lists(st.lists(values, min_size=5, max_size=5), min_size=1, max_size=40)
# Seconds between waypoints, microsecond steps, zeros too (a route that lasts no time).
steps = st.lists(st.one_of(st.just(0.0), st.floats(0.0, 120.0)), min_size=39, max_size=39)


def concentrations_of(row: list[float | None]) -> Concentrations:
    return dict(zip(SCORED, row, strict=True))


@settings(max_examples=400, deadline=None)
@given(
    airs,
    steps,
    st.sampled_from(list(ActivityType)),
    st.sampled_from(list(EnvironmentType)),
)
@example([[None] * 5], [0.0] * 39, ActivityType.OTHER, EnvironmentType.OUTDOOR)
@example(
    [[5.0, 15.0, 10.0, 60.0, 20.0]] * 3,
    [0.0] * 39,
    ActivityType.RUNNING_OUTDOOR,
    EnvironmentType.INDOOR,
)
def test_enrich_rows_gives_enrichs_route_bit_for_bit(
    rows: list[list[float | None]],
    gaps: list[float],
    activity: ActivityType,
    environment: EnvironmentType,
) -> None:
    points = [Point(60.17 + 1e-4 * i, 24.94) for i in range(len(rows))]
    times = [START]
    for gap in gaps[: len(rows) - 1]:
        times.append(times[-1] + timedelta(seconds=gap))
    dicts = [concentrations_of(row) for row in rows]
    expected = enrich(points, times, dicts, activity, environment)
    got = enrich_rows(points, times, as_rows(dicts), activity, environment)
    assert got == expected
    assert list(got.measures) == list(expected.measures)
    assert list(got.summary.average_pollutants) == list(expected.summary.average_pollutants)
    # Scores are integers where the waypoint path has them (JSON writes 57, not 57.0).
    for a, b in zip(
        got.measures.get("clean_air_score", []),
        expected.measures.get("clean_air_score", []),
        strict=True,
    ):
        assert type(a) is type(b)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(values, min_size=5, max_size=5), min_size=1, max_size=30),
    st.sampled_from(list(ActivityType)),
    st.sampled_from(list(EnvironmentType)),
)
def test_scores_of_rows_are_each_waypoints_personal_score(
    rows: list[list[float | None]], activity: ActivityType, environment: EnvironmentType
) -> None:
    dicts = [concentrations_of(row) for row in rows]
    scores, scored = personal_score_rows(as_rows(dicts), activity, environment)
    expected = [personal_score(air, activity, environment) for air in dicts]
    assert [
        s if k else None for s, k in zip(scores.tolist(), scored.tolist(), strict=True)
    ] == expected


@given(st.sampled_from(range(len(SCORED))), st.lists(concentrations, min_size=1, max_size=50))
def test_sub_indices_are_sub_index_of_each_value(column: int, found: list[float]) -> None:
    got = sub_indices(column, np.array(found)).tolist()
    assert got == [sub_index(SCORED[column], value) for value in found]


@given(st.lists(st.floats(-1e7, 1e7, allow_nan=False), min_size=1, max_size=20))
def test_timestamps_are_each_times_timestamp(seconds: list[float]) -> None:
    times = [START + timedelta(seconds=s) for s in seconds]
    assert timestamps(times).tolist() == [at.timestamp() for at in times]


def test_a_waypoint_without_air_has_no_score_and_no_value() -> None:
    dicts = [concentrations_of([8.0, 20.0, None, 50.0, 2.0]), concentrations_of([None] * 5)]
    times = [START, START + timedelta(seconds=30)]
    points = [Point(60.17, 24.94), Point(60.171, 24.94)]
    route = enrich_rows(points, times, as_rows(dicts))
    assert route.measures["clean_air_score"][1] is None
    assert route.measures["pm25"] == [8.0, None]
    assert "no2" not in route.measures
    assert not math.isnan(route.summary.clean_air_score.score)  # type: ignore[union-attr]
    assert route.summary.inhaled_dose is None  # no pollutant known along the whole route


# Values whose hundredths are exact or near halves in binary and decimal, and beyond.
roundable = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1e4, 1e4),
    st.integers(-(10**7), 10**7).map(lambda n: n / 1000),  # 2.675, 0.125, 1.005 ...
    st.integers(-(10**7), 10**7).map(lambda n: (n + 0.5) / 100),
    st.integers(0, 2**60).map(float),
)


@settings(max_examples=500)
@given(st.lists(roundable, min_size=1, max_size=40), st.sampled_from([1, 2]))
@example([2.675, 0.125, 1.005, 0.285, -0.125, -2.675, 1e300, 5e-324, -0.0], 2)
def test_rounded_values_are_pythons_round_of_each(found: list[float], digits: int) -> None:
    got = rounded(np.array(found, dtype=np.float64), digits)
    expected = [None if math.isnan(v) else round(v, digits) for v in found]
    assert got == expected
    assert [math.copysign(1.0, v) for v in got if v is not None] == [
        math.copysign(1.0, v) for v in expected if v is not None
    ]
