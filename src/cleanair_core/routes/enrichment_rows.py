"""`enrich` on arrays: a route's measures and summary from its waypoints' air as rows.

A plan enriches a few routes of tens to hundreds of waypoints each; done waypoint by
waypoint (a dictionary each, a score each) that was about 30 µs a waypoint, more than the
plan's path searches took together. From a source that answers many points at their own
times as one array (`AirAtTimes`), the same numbers come out of whole columns: `enrich_rows`
gives what `enrich` gives from the same air, bit for bit (see `cleanair_core.air.rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from cleanair_core.air.activities import ActivityType, ventilation_ratio
from cleanair_core.air.exposure import EnvironmentType
from cleanair_core.air.forecast import SCORE_MEASURE
from cleanair_core.air.pollutants import SCORED, Pollutant
from cleanair_core.air.rows import (
    breathed_rows,
    dose_of_rows,
    optional_ints,
    personal_score_rows,
    rounded,
    weighted_mean,
    weighted_means,
)
from cleanair_core.air.score import banded
from cleanair_core.geo import Point
from cleanair_core.routes.enrichment import EnrichedRoute, RouteSummary
from cleanair_core.routes.times import time_weights

if TYPE_CHECKING:
    from cleanair_core.air.rows import FloatArray, IntArray

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def microseconds(times: Sequence[datetime]) -> IntArray:
    """The whole microseconds since the epoch of each of `times` (timezone-aware)."""
    import numpy as np

    return np.array([(at - _EPOCH) // _MICROSECOND for at in times], dtype=np.int64)


def timestamps(times: Sequence[datetime]) -> FloatArray:
    """`at.timestamp()` of each of `times` (timezone-aware), as an array: the whole
    microseconds since the epoch over 10^6, one correctly rounded division, as `timestamp`
    computes it."""
    stamps: FloatArray = microseconds(times) / 1e6
    return stamps


def weights_of(micros: IntArray) -> FloatArray:
    """`time_weights` of the times `micros` stands for (non-decreasing): each leg's seconds
    (`total_seconds`: whole microseconds over 10^6) halved to either end. Each inner weight
    is the sum of its two halves, which is the same float in either order."""
    import numpy as np

    halves = np.diff(micros) / 1e6 / 2
    weights = np.zeros(micros.size)
    weights[:-1] += halves
    weights[1:] += halves
    return weights


def enrich_rows(
    points: Sequence[Point],
    times: Sequence[datetime],
    rows: FloatArray,
    activity: ActivityType = ActivityType.OTHER,
    environment: EnvironmentType = EnvironmentType.OUTDOOR,
) -> EnrichedRoute:
    """`enrich` with the outdoor air at each point and time given as `rows` (a row per
    point, a column per `SCORED` pollutant, NaN unknown): the same route, bit for bit."""
    [route] = enrich_many([(points, times)], rows, activity, environment, microseconds(times))
    return route


def enrich_many(
    routes: Sequence[tuple[Sequence[Point], Sequence[datetime]]],
    rows: FloatArray,
    activity: ActivityType = ActivityType.OTHER,
    environment: EnvironmentType = EnvironmentType.OUTDOOR,
    micros: IntArray | None = None,
) -> list[EnrichedRoute]:
    """`enrich_rows` of each of `routes`, whose waypoints' rows follow one another in
    `rows`: what is per waypoint (scores, breathed and rounded values) computed once for
    all, what is per route (means, the dose) route by route."""
    import numpy as np

    if sum(len(points) for points, _ in routes) != rows.shape[0]:
        raise ValueError("one time and one air per point, and at least one point")
    breathed = breathed_rows(rows, environment)
    all_scores, all_scored = personal_score_rows(rows, activity, environment)
    score_values = np.where(all_scored, all_scores, np.nan)
    score_list = optional_ints(all_scores, all_scored)
    values = [rounded(breathed[:, column], 2) for column in range(len(SCORED))]
    ventilation = ventilation_ratio(activity)
    enriched: list[EnrichedRoute] = []
    first = 0
    for points, times in routes:
        if not len(points) == len(times) or not points:
            raise ValueError("one time and one air per point, and at least one point")
        last = first + len(points)
        mine = breathed[first:last]
        weights = (
            np.array(time_weights(times), dtype=np.float64)
            if micros is None
            else weights_of(micros[first:last])
        )
        measures: dict[str, list[float | None]] = {SCORE_MEASURE: list(score_list[first:last])}
        averages: dict[Pollutant, float] = {}
        means = weighted_means(mine, weights)
        for column, pollutant in enumerate(SCORED):
            mean = means[column]
            if mean is None:
                continue
            measures[pollutant.value] = values[column][first:last]
            averages[pollutant] = round(mean, 2)
        if not all_scored[first:last].any():
            del measures[SCORE_MEASURE]
        route_score = weighted_mean(score_values[first:last], weights)
        summary = RouteSummary(
            clean_air_score=None if route_score is None else banded(round(route_score, 1)),
            inhaled_dose=dose_of_rows(mine, weights, ventilation),
            average_pollutants=averages,
        )
        enriched.append(EnrichedRoute(list(points), list(times), measures, summary))
        first = last
    return enriched
