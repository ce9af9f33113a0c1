"""The service's own error: leave-one-station-out over stored observations.

Each station's hours are predicted without it, from the other stations that reported in the
same hour, three ways: the raw background (what the service says with no observations), the
fused field (`cleanair_core.air.fusion`), and inverse-distance-squared interpolation of the
other stations alone (the baseline a fusion must beat). The statistics are openair's
`modStats` set (Carslaw & Ropkins 2012): n, mean bias (predicted - observed), RMSE, Pearson's
r and FAC2 (the share of predictions within a factor of two of the observation), and for the
background and the fused field the coverage of their 90 % intervals.

The fused field's parameters are fitted as the service fits them (`fusion_fit`, on the
`FIT_DAYS` ending with each day), and without the station predicted: the evaluation holds
each station out of the fit as well as out of the field. Over more than
`DAILY_FITS_UP_TO_DAYS` the fit is made per calendar month.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import attrs

from cleanair_core.air.fused_air import FIT_DAYS, fit_day, unfused_of
from cleanair_core.air.fusion import (
    ERROR_FLOOR,
    FUSION_PARAMETERS,
    HOUR,
    Z90,
    FusionParameters,
    inverse_distance_weights,
    station_distances,
    uncertainty,
)
from cleanair_core.air.fusion_fit import fit_parameters, leave_one_out
from cleanair_core.air.observations import OBSERVED, ObservationStore, Station
from cleanair_core.air.pollutants import SCORED, Pollutant
from cleanair_core.air.quality_source import AirQualitySource, GriddedAir, Sample
from cleanair_core.offload import Offload, inline

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    BoolArray = npt.NDArray[np.bool_]

#: The methods compared, in the order reported.
METHODS: tuple[str, ...] = ("background", "fused", "idw")


@attrs.frozen
class ModelStatistics:
    """How predictions compare with observations (µg/m³ for bias and RMSE)."""

    n: int
    mean_bias: float
    rmse: float
    r: float
    fac2: float
    #: The share of observations within the predictions' 90 % intervals (NaN: none given).
    coverage: float = math.nan


def model_statistics(
    predicted: FloatArray, observed: FloatArray, errors: FloatArray | None = None
) -> ModelStatistics:
    """`ModelStatistics` over the pairs where both are known; NaN statistics when none are
    (and r is NaN when either side is constant). With the predictions' standard `errors`,
    the coverage of their 90 % intervals (never below zero, as served)."""
    import numpy as np

    p = np.asarray(predicted, dtype=np.float64).reshape(-1)
    o = np.asarray(observed, dtype=np.float64).reshape(-1)
    known = ~(np.isnan(p) | np.isnan(o))
    coverage = math.nan
    if errors is not None and known.any():
        e = np.asarray(errors, dtype=np.float64).reshape(-1)[known]
        low = np.maximum(0.0, p[known] - Z90 * e)
        coverage = float(np.mean((o[known] >= low) & (o[known] <= p[known] + Z90 * e)))
    p, o = p[known], o[known]
    if p.size == 0:
        return ModelStatistics(0, math.nan, math.nan, math.nan, math.nan)
    error = p - o
    r = math.nan
    if p.size > 1 and float(np.std(p)) > 0.0 and float(np.std(o)) > 0.0:
        r = float(np.corrcoef(p, o)[0, 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = p / o
    # openair counts a pair as within a factor of two when 0.5 <= p/o <= 2 (0/0 included).
    within = ((ratio >= 0.5) & (ratio <= 2.0)) | ((p == 0.0) & (o == 0.0))
    return ModelStatistics(
        n=int(p.size),
        mean_bias=float(error.mean()),
        rmse=float(np.sqrt(np.mean(error * error))),
        r=r,
        fac2=float(within.mean()),
        coverage=coverage,
    )


def _loo_idw_weights(distance: FloatArray) -> FloatArray:
    """Each station's inverse-distance weights on the others (its own distance infinite)."""
    import numpy as np

    others = np.array(distance, dtype=np.float64)
    np.fill_diagonal(others, np.inf)
    return inverse_distance_weights(others)


def leave_one_station_out(
    stations: Sequence[Station],
    observed: FloatArray,
    background: FloatArray,
    params: FusionParameters,
) -> dict[str, FloatArray]:
    """Each method's prediction of every observation from the other stations of its hour,
    and (keys `fused_error`, `background_error`) the standard errors the service would give
    the fused and the raw values.

    `observed` and `background` have a row per hour and a column per station (NaN where a
    station has no observation or the background no value). A station alone in its hour
    gets the background from `fused` and NaN from `idw`.
    """
    import numpy as np

    observed = np.asarray(observed, dtype=np.float64)
    background = np.asarray(background, dtype=np.float64)
    lats = np.array([s.point.lat for s in stations], dtype=np.float64)
    lons = np.array([s.point.lon for s in stations], dtype=np.float64)
    distance = station_distances(lats, lons, lats, lons)
    usable: BoolArray = ~(np.isnan(observed) | np.isnan(background))
    fused, left = leave_one_out(stations, observed, background, params)
    idw = np.full_like(observed, np.nan)
    values = np.where(usable, observed, 0.0)
    # Hours with the same stations reporting share their weights: a handful of patterns.
    patterns, which = np.unique(usable, axis=0, return_inverse=True)
    for index, pattern in enumerate(patterns):
        columns = np.flatnonzero(pattern)
        if columns.size < 2:
            continue
        rows = np.flatnonzero(which.reshape(-1) == index)
        block = np.ix_(rows, columns)
        idw[block] = values[block] @ _loo_idw_weights(distance[np.ix_(columns, columns)]).T
    raw = np.where(usable, background, np.nan)
    return {
        "background": raw,
        "fused": fused,
        "idw": np.where(usable, idw, np.nan),
        "fused_error": uncertainty(params, fused, left, np.ones_like(fused)),
        "background_error": params.background_error * np.maximum(raw, ERROR_FLOOR),
    }


@attrs.frozen
class EvaluationRow:
    """One method's statistics for one group of stations ("all", or a station type)."""

    group: str
    method: str
    statistics: ModelStatistics


def station_group(station: Station) -> str:
    """The group a station is reported in besides "all": its type, or "unclassified"."""
    return station.station_type.value if station.station_type is not None else "unclassified"


def evaluation_rows(
    stations: Sequence[Station], observed: FloatArray, predictions: dict[str, FloatArray]
) -> list[EvaluationRow]:
    """Statistics for every method over all stations, then over each group that has any."""
    import numpy as np

    groups: dict[str, list[int]] = {"all": list(range(len(stations)))}
    for column, station in enumerate(stations):
        groups.setdefault(station_group(station), []).append(column)
    if len(groups) == 2:  # one group only: it says what "all" says
        groups = {"all": groups["all"]}
    rows: list[EvaluationRow] = []
    for group, columns in groups.items():
        index = np.asarray(columns, dtype=np.int64)
        for method in METHODS:
            errors = predictions.get(f"{method}_error")
            statistics = model_statistics(
                predictions[method][:, index],
                observed[:, index],
                None if errors is None else errors[:, index],
            )
            rows.append(EvaluationRow(group, method, statistics))
    return rows


def rmse_ratios(rows: Iterable[EvaluationRow]) -> dict[str, float]:
    """Over "all": the fused RMSE relative to the background's and to inverse distance's."""
    rmse = {row.method: row.statistics.rmse for row in rows if row.group == "all"}
    return {
        "fused/background": rmse["fused"] / rmse["background"],
        "fused/idw": rmse["fused"] / rmse["idw"],
    }


@attrs.frozen
class PollutantEvaluation:
    """The leave-one-station-out statistics of one pollutant over a span of hours."""

    pollutant: Pollutant
    stations: int
    hours: int
    observations: int
    rows: tuple[EvaluationRow, ...]


@attrs.frozen(eq=False)
class StationMatrices:
    """Stored observations laid out for evaluation: a row per hour, a column per station."""

    stations: tuple[Station, ...]
    hours: tuple[datetime, ...]
    observed: dict[Pollutant, FloatArray]
    #: The unfused air at each station in the middle of each hour: hours x stations x SCORED.
    background: FloatArray

    def between(self, start: datetime, end: datetime) -> StationMatrices:
        """The same for the hours ending in [start, end]."""
        import numpy as np

        rows = np.array([start <= hour <= end for hour in self.hours], dtype=bool)
        return StationMatrices(
            self.stations,
            tuple(hour for hour, kept in zip(self.hours, rows, strict=True) if kept),
            {p: values[rows] for p, values in self.observed.items()},
            self.background[rows],
        )


async def station_matrices(
    store: ObservationStore,
    source: AirQualitySource,
    *,
    pollutants: Sequence[Pollutant] = OBSERVED,
    since: datetime | None = None,
    until: datetime | None = None,
    offload: Offload = inline,
) -> StationMatrices | None:
    """The observations whose hour ends in [since, until] (all by default) and `source`'s
    unfused air at their stations; None when there are none. Store reads and the source's
    arrays run on `offload`."""
    import numpy as np

    start = since or datetime.min.replace(tzinfo=UTC)
    end = until or datetime.max.replace(tzinfo=UTC)
    observations = await offload(lambda: store.observations_between(start, end, pollutants))
    known = {station.id: station for station in await offload(store.list_stations)}
    observations = [o for o in observations if o.station_id in known]
    if not observations:
        return None
    station_ids = sorted({o.station_id for o in observations})
    stations = tuple(known[station_id] for station_id in station_ids)
    column = {station_id: index for index, station_id in enumerate(station_ids)}
    hours = tuple(sorted({o.hour_end for o in observations}))
    row = {hour: index for index, hour in enumerate(hours)}
    wanted = [p for p in pollutants if any(o.pollutant == p for o in observations)]
    observed = {p: np.full((len(hours), len(stations)), np.nan) for p in wanted}
    for o in observations:
        observed[o.pollutant][row[o.hour_end], column[o.station_id]] = o.value
    background = await _background_at_stations(unfused_of(source), stations, hours, offload)
    return StationMatrices(stations, hours, observed, background)


#: Up to this many days the fused field's parameters are fitted per day, as served; beyond,
#: per calendar month (a year of daily fits would take an hour).
DAILY_FITS_UP_TO_DAYS = 31


def fitted_predictions(
    matrices: StationMatrices,
    pollutant: Pollutant,
    fallback: FusionParameters,
    progress: Callable[[str], None] | None = None,
) -> dict[str, FloatArray]:
    """`leave_one_station_out` for one pollutant with parameters fitted as the service fits
    them, held out by station throughout: for each day (or month, over long spans) and each
    station, the parameters are fitted on the `FIT_DAYS` ending with that day (or on the
    week before the month and the month) without that station, and its hours predicted
    with them; the fallback where the data are too few. CPU work: off the loop."""
    import numpy as np

    values = matrices.observed[pollutant]
    at_stations = matrices.background[:, :, SCORED.index(pollutant)]
    hours = np.array(matrices.hours, dtype=object)
    daily = (matrices.hours[-1] - matrices.hours[0]).days < DAILY_FITS_UP_TO_DAYS
    segments = [fit_day(h) if daily else fit_day(h).replace(day=1) for h in matrices.hours]
    predictions: dict[str, FloatArray] = {}
    ordered = sorted(set(segments))
    for number, segment in enumerate(ordered, start=1):
        if progress is not None:
            span = "day" if daily else "month"
            progress(f"{pollutant.value}: fitting {span} {number} of {len(ordered)}")
        rows = np.array([s == segment for s in segments], dtype=bool)
        last = max(h for h, kept in zip(matrices.hours, rows, strict=True) if kept)
        window = (hours > segment - timedelta(days=FIT_DAYS - 1)) & (hours <= last)
        part = leave_one_station_out(matrices.stations, values[rows], at_stations[rows], fallback)
        for k in range(len(matrices.stations)):
            if np.isnan(values[rows, k]).all():
                continue
            without = values[window].copy()
            without[:, k] = np.nan
            fit = fit_parameters(matrices.stations, without, at_stations[window], fallback)
            if fit.fitted:
                mine = leave_one_station_out(
                    matrices.stations, values[rows], at_stations[rows], fit.parameters
                )
                for method in ("fused", "fused_error"):
                    part[method][:, k] = mine[method][:, k]
        for method, predicted in part.items():
            predictions.setdefault(method, np.full_like(values, np.nan))[rows] = predicted
    return predictions


def evaluate_matrices(
    matrices: StationMatrices,
    parameters: dict[Pollutant, FusionParameters] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[PollutantEvaluation]:
    """Leave-one-station-out for every pollutant of `matrices` (CPU work: off the loop), with
    the parameters fitted as served (`fitted_predictions`), or `parameters` as they are."""
    import numpy as np

    evaluations = []
    for pollutant, values in matrices.observed.items():
        stations = matrices.stations
        if parameters is None:
            predictions = fitted_predictions(
                matrices, pollutant, FUSION_PARAMETERS[pollutant], progress
            )
        else:
            at_stations = matrices.background[:, :, SCORED.index(pollutant)]
            predictions = leave_one_station_out(
                stations, values, at_stations, parameters[pollutant]
            )
        reporting = ~np.isnan(values)
        evaluations.append(
            PollutantEvaluation(
                pollutant,
                stations=int(reporting.any(axis=0).sum()),
                hours=int(reporting.any(axis=1).sum()),
                observations=int(reporting.sum()),
                rows=tuple(evaluation_rows(stations, values, predictions)),
            )
        )
    return evaluations


async def evaluate_stations(
    store: ObservationStore,
    source: AirQualitySource,
    *,
    pollutants: Sequence[Pollutant] = OBSERVED,
    since: datetime | None = None,
    until: datetime | None = None,
    offload: Offload = inline,
    progress: Callable[[str], None] | None = None,
) -> list[PollutantEvaluation]:
    """Leave-one-station-out over the stored observations whose hour ends in [since, until]
    (all of them by default), with `source`'s unfused air as the background: one
    `PollutantEvaluation` per pollutant that has observations."""
    matrices = await station_matrices(
        store, source, pollutants=pollutants, since=since, until=until, offload=offload
    )
    if matrices is None:
        return []
    found = matrices
    return await offload(lambda: evaluate_matrices(found, progress=progress))


async def _background_at_stations(
    source: AirQualitySource,
    stations: Sequence[Station],
    hours: Sequence[datetime],
    offload: Offload,
) -> FloatArray:
    """The source's air at every station in the middle of every hour: a block per hour, a
    row per station, a column per `SCORED` pollutant (NaN unknown). A source that computes
    its values answers an hour as an array; another is asked in batches of samples."""
    import numpy as np

    lats = np.array([s.point.lat for s in stations], dtype=np.float64)
    lons = np.array([s.point.lon for s in stations], dtype=np.float64)
    if isinstance(source, GriddedAir):
        gridded = source

        def all_hours() -> FloatArray:
            return np.stack([gridded.air_at_hour(lats, lons, h - HOUR / 2) for h in hours])

        return await offload(all_hours)
    result = np.full((len(hours), len(stations), len(SCORED)), np.nan)
    samples = [Sample(s.point, h - HOUR / 2) for h in hours for s in stations]
    for first in range(0, len(samples), _SAMPLES_PER_CALL):
        airs = await source.concentrations(samples[first : first + _SAMPLES_PER_CALL])
        for offset, air in enumerate(airs):
            index = first + offset
            for k, pollutant in enumerate(SCORED):
                value = air.get(pollutant)
                if value is not None:
                    result[index // len(stations), index % len(stations), k] = value
    return result


#: Samples asked of a remote source at once when evaluating.
_SAMPLES_PER_CALL = 2_000
