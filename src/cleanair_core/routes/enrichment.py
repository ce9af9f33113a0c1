"""Use case: the air along a route, waypoint by waypoint at its own time, and its summary.

This is also how the route planner describes every route it returns: give it points and the
UTC time at each (see `route_times`), get measures and a summary back. `enrich` is the pure part
(air in, route out) for callers that already hold the concentrations; `enrich_route` asks the
air-quality source first, for all waypoints in one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import attrs

from cleanair_core.air.activities import ActivityType, ventilation_ratio
from cleanair_core.air.dose import inhaled_dose
from cleanair_core.air.exposure import EnvironmentType, breathed_air, personal_score
from cleanair_core.air.forecast import SCORE_MEASURE
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import AirQualitySource, Sample
from cleanair_core.air.score import BandedScore, banded
from cleanair_core.errors import SourceUnavailable
from cleanair_core.geo import Point
from cleanair_core.routes.times import time_weighted_mean, time_weights

#: Waypoints per enrichment (contract section 8).
MAX_WAYPOINTS = 100


@attrs.frozen
class Waypoint:
    """A point of a route as a caller gives it: with its recorded time, or without one."""

    point: Point
    time: datetime | None = None


@attrs.frozen
class RouteSummary:
    """The route as a whole: the time-weighted score (banded), the relative inhaled dose
    (see `dose`) and the time-weighted mean concentrations, ug/m3."""

    clean_air_score: BandedScore | None
    inhaled_dose: float | None
    average_pollutants: dict[Pollutant, float]


@attrs.frozen
class EnrichedRoute:
    """`measures` maps a measure key to one value per point (None where not computable)."""

    points: list[Point]
    times: list[datetime]
    measures: dict[str, list[float | None]]
    summary: RouteSummary

    @property
    def duration_s(self) -> float:
        """Seconds from the first waypoint's time to the last's."""
        return (self.times[-1] - self.times[0]).total_seconds()

    @property
    def has_data(self) -> bool:
        """Whether any measure has a value at any waypoint."""
        return any(v is not None for values in self.measures.values() for v in values)


def enrich(
    points: Sequence[Point],
    times: Sequence[datetime],
    airs: Sequence[Concentrations],
    activity: ActivityType = ActivityType.OTHER,
    environment: EnvironmentType = EnvironmentType.OUTDOOR,
) -> EnrichedRoute:
    """The route's measures and summary from the outdoor air at each point and time.

    Per waypoint: the activity- and environment-adjusted score and the environment-adjusted
    concentrations (pollutants appear only when some waypoint has a value). Summary: the
    time-weighted mean score, banded; the time-weighted mean of each pollutant; the dose.
    """
    if not len(points) == len(times) == len(airs) or not points:
        raise ValueError("one time and one air per point, and at least one point")
    breathed = [breathed_air(air, environment) for air in airs]
    weights = time_weights(times)
    scores: list[float | None] = [personal_score(air, activity, environment) for air in airs]
    measures: dict[str, list[float | None]] = {SCORE_MEASURE: scores}
    averages: dict[Pollutant, float] = {}
    for pollutant in SCORED:
        values = [air.get(pollutant) for air in breathed]
        mean = time_weighted_mean(values, weights)
        if mean is None:
            continue
        measures[pollutant.value] = [None if v is None else round(v, 2) for v in values]
        averages[pollutant] = round(mean, 2)
    if all(score is None for score in scores):
        del measures[SCORE_MEASURE]
    route_score = time_weighted_mean(scores, weights)
    summary = RouteSummary(
        clean_air_score=None if route_score is None else banded(round(route_score, 1)),
        inhaled_dose=inhaled_dose(breathed, weights, ventilation_ratio(activity)),
        average_pollutants=averages,
    )
    return EnrichedRoute(list(points), list(times), measures, summary)


async def enrich_route(
    source: AirQualitySource,
    points: Sequence[Point],
    times: Sequence[datetime],
    activity: ActivityType = ActivityType.OTHER,
    environment: EnvironmentType = EnvironmentType.OUTDOOR,
) -> EnrichedRoute:
    """`enrich` with the air from `source`, asked for every waypoint at its time in one batch.

    Raises SourceUnavailable when the source fails or has no value for any waypoint.
    A source that answers arrays (`AirAtTimes`) is asked so (see `enrich_routes`).
    """
    asked = [(points, times)]
    if from_rows := await _enriched_from_rows(source, asked, activity, environment):
        return from_rows[0]
    airs = await source.concentrations(
        [Sample(point, at) for point, at in zip(points, times, strict=True)]
    )
    if len(airs) != len(points):
        raise SourceUnavailable()
    route = enrich(points, times, airs, activity, environment)
    if not route.has_data:
        raise SourceUnavailable("No air-quality data is available along this route")
    return route


async def enrich_routes(
    source: AirQualitySource,
    routes: Sequence[tuple[Sequence[Point], Sequence[datetime]]],
    activity: ActivityType = ActivityType.OTHER,
    environment: EnvironmentType = EnvironmentType.OUTDOOR,
) -> list[EnrichedRoute]:
    """`enrich_route` for each of `routes` (points and the time at each), with the source
    asked once for all of them, and once for a waypoint at the same place and time in
    several routes (a plan's routes share their start, at the same times): the same answers
    as a call per route from a source whose answer for a sample is its own.

    Raises SourceUnavailable as `enrich_route` does, for the first route it applies to.

    A source that answers many points at their own times as one array (`AirAtTimes`) is
    asked so, and the routes are enriched from whole columns (`enrich_rows`): the same
    routes, bit for bit, without a dictionary and a score per waypoint."""
    if routes and (from_rows := await _enriched_from_rows(source, routes, activity, environment)):
        return from_rows
    index: dict[tuple[Point, datetime], int] = {}
    samples: list[Sample] = []
    for points, times in routes:
        for point, at in zip(points, times, strict=True):
            if (point, at) not in index:
                index[point, at] = len(samples)
                samples.append(Sample(point, at))
    airs = await source.concentrations(samples) if samples else []
    if len(airs) != len(samples):
        raise SourceUnavailable()
    enriched: list[EnrichedRoute] = []
    for points, times in routes:
        mine = [airs[index[point, at]] for point, at in zip(points, times, strict=True)]
        route = enrich(points, times, mine, activity, environment)
        if not route.has_data:
            raise SourceUnavailable("No air-quality data is available along this route")
        enriched.append(route)
    return enriched


async def _enriched_from_rows(
    source: AirQualitySource,
    routes: Sequence[tuple[Sequence[Point], Sequence[datetime]]],
    activity: ActivityType,
    environment: EnvironmentType,
) -> list[EnrichedRoute] | None:
    """`enrich_routes` from `source`'s `air_at_times`; None when it has none (or declines).
    Its CPU work is a few hundred microseconds for a plan's routes: done where it is asked."""
    air_at_times = getattr(source, "air_at_times", None)
    if air_at_times is None:
        return None
    import numpy as np

    from cleanair_core.routes.enrichment_rows import enrich_many, microseconds

    if any(not points or len(points) != len(times) for points, times in routes):
        return None  # the waypoint path says what is wrong
    points = [point for route_points, _ in routes for point in route_points]
    times = [at for _, route_times in routes for at in route_times]
    micros = microseconds(times)
    ready = getattr(source, "ready_at_times", None)
    if ready is not None:  # a source reads what its arrays need first, off the loop
        await ready(micros / 1e6)
    rows = air_at_times(
        np.array([p.lat for p in points], dtype=np.float64),
        np.array([p.lon for p in points], dtype=np.float64),
        micros / 1e6,  # `timestamps(times)`
    )
    if rows is None:
        return None
    enriched = enrich_many(routes, rows, activity, environment, micros)
    for route in enriched:
        if not route.has_data:
            raise SourceUnavailable("No air-quality data is available along this route")
    return enriched
