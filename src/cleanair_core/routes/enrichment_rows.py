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
)
from cleanair_core.air.score import banded
from cleanair_core.geo import Point
from cleanair_core.routes.enrichment import EnrichedRoute, RouteSummary
from cleanair_core.routes.times import time_weights

if TYPE_CHECKING:
    from cleanair_core.air.rows import FloatArray

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def timestamps(times: Sequence[datetime]) -> FloatArray:
    """`at.timestamp()` of each of `times` (timezone-aware), as an array: the whole
    microseconds since the epoch over 10^6, one correctly rounded division, as `timestamp`
    computes it."""
    import numpy as np

    micros = np.array([(at - _EPOCH) // _MICROSECOND for at in times], dtype=np.int64)
    stamps: FloatArray = micros / 1e6
    return stamps


def enrich_rows(
    points: Sequence[Point],
    times: Sequence[datetime],
    rows: FloatArray,
    activity: ActivityType = ActivityType.OTHER,
    environment: EnvironmentType = EnvironmentType.OUTDOOR,
) -> EnrichedRoute:
    """`enrich` with the outdoor air at each point and time given as `rows` (a row per
    point, a column per `SCORED` pollutant, NaN unknown): the same route, bit for bit."""
    [route] = enrich_many([(points, times)], rows, activity, environment)
    return route


def enrich_many(
    routes: Sequence[tuple[Sequence[Point], Sequence[datetime]]],
    rows: FloatArray,
    activity: ActivityType = ActivityType.OTHER,
    environment: EnvironmentType = EnvironmentType.OUTDOOR,
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
        weights = np.array(time_weights(times), dtype=np.float64)
        measures: dict[str, list[float | None]] = {SCORE_MEASURE: list(score_list[first:last])}
        averages: dict[Pollutant, float] = {}
        for column, pollutant in enumerate(SCORED):
            mean = weighted_mean(mine[:, column], weights)
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
