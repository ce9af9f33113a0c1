"""Fusion's parameters fitted from the observations a deployment holds.

The covariance of the residuals (`cleanair_core.air.fusion`) is chosen per pollutant by
leave-one-station-out: each station's hours are predicted from the other stations of the same
hour, and the candidate with the least RMSE wins. The candidates are scaled to the network
(its median nearest-neighbour distance and its median spacing), not to one city's constants.
Then the background's own error is measured at the stations, and the standard error's
shrinkage q chosen so that 90 % intervals cover 90 % of the held-out hours. Where the data
are too few (`MIN_STATIONS`, `MIN_HOURS`) the fallback is kept (`FUSION_PARAMETERS`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import attrs

from cleanair_core.air.fusion import (
    ERROR_FLOOR,
    IDW_MIN_DISTANCE_M,
    Z90,
    FusionParameters,
    _correlated,
    _site,
    station_distances,
    taper,
)
from cleanair_core.air.observations import Observation, Station
from cleanair_core.air.pollutants import Pollutant

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    BoolArray = npt.NDArray[np.bool_]

#: Below these a deployment's own fit is not trusted: the fallback is used.
MIN_STATIONS = 4
MIN_HOURS = 24
#: At most this many stations and hours enter a fit (the most reporting stations, hours
#: spread evenly): the fit's cost is bounded whatever the deployment holds.
MAX_STATIONS = 40
MAX_HOURS = 72

#: Regional lengths never exceed this: the support (three of them) stays within a region.
MAX_REGIONAL_M = 150_000.0

_DISTRICT_SCALES = (1.0, 3.0)
_REGIONAL_SCALES = (3.0,)
_REGIONAL_SHARES = (0.8, 0.95)
_NOISE_SHARES = (0.05, 0.2)
_SHARES_KEPT = (0.0, 0.5, 1.0)
_MEAN_SHARES = (0.0, 10.0)
#: A candidate replaces the fallback only when it predicts the held-out stations this much
#: better: a week of a handful of stations is little to choose on.
_MARGIN = 0.9
_SPREADS = tuple(q / 20.0 for q in range(0, 61))


@attrs.frozen(eq=False)
class FitLayout:
    """The observations a fit is made on: the most reporting stations (at most
    `MAX_STATIONS`) and hours spread evenly over those where three or more report (at most
    `MAX_HOURS`), a row per hour and a column per station."""

    stations: tuple[Station, ...]
    hours: tuple[datetime, ...]
    observed: FloatArray


def fit_layout(
    observations: Iterable[Observation], stations: Mapping[str, Station], pollutant: Pollutant
) -> FitLayout | None:
    """The layout of `pollutant`'s `observations` (of known `stations`) for a fit; None when
    there are too few for one (`MIN_STATIONS`, `MIN_HOURS`)."""
    import numpy as np

    values: dict[tuple[datetime, str], float] = {
        (o.hour_end, o.station_id): o.value
        for o in observations
        if o.pollutant is pollutant and o.station_id in stations
    }
    counts: dict[str, int] = {}
    for _, station_id in values:
        counts[station_id] = counts.get(station_id, 0) + 1
    kept = sorted(counts, key=lambda station_id: (-counts[station_id], station_id))[:MAX_STATIONS]
    if len(kept) < MIN_STATIONS:
        return None
    kept.sort()
    column = {station_id: index for index, station_id in enumerate(kept)}
    reporting: dict[datetime, int] = {}
    for hour, station_id in values:
        if station_id in column:
            reporting[hour] = reporting.get(hour, 0) + 1
    hours = sorted(hour for hour, count in reporting.items() if count >= 3)
    if len(hours) < MIN_HOURS:
        return None
    if len(hours) > MAX_HOURS:
        picks = np.linspace(0, len(hours) - 1, MAX_HOURS).round().astype(np.int64)
        hours = [hours[int(i)] for i in picks]
    row = {hour: index for index, hour in enumerate(hours)}
    observed = np.full((len(hours), len(kept)), np.nan)
    for (hour, station_id), value in values.items():
        if hour in row and station_id in column:
            observed[row[hour], column[station_id]] = value
    return FitLayout(tuple(stations[s] for s in kept), tuple(hours), observed)


@attrs.frozen
class FusionFit:
    """The parameters chosen for one pollutant and what they were chosen on."""

    parameters: FusionParameters
    #: Whether the deployment's own data chose them (False: the fallback, too few data).
    fitted: bool
    stations: int
    hours: int
    #: The leave-one-station-out RMSE (µg/m³) and 90 % interval coverage of the choice.
    rmse: float
    coverage: float


def _held_out_weights(
    distance: FloatArray,
    share: FloatArray,
    length: FloatArray,
    usable: BoolArray,
    params: FusionParameters,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """For each hour (usable: which stations report) and each station k held out: the
    weights W[t, k, j] of the others, the variance they explain at k, and s(k), the largest
    taper to them."""
    import numpy as np

    count = share.size
    diagonal = share + params.noise_share
    correlated = _correlated(distance, params)
    # Between a point and station j: the correlated part and j's own site part.
    between = correlated + share[None, :] * np.exp(-distance / length[None, :])
    np.fill_diagonal(between, 0.0)
    cut = usable[:, :, None] & usable[:, None, :]
    kernels = np.where(cut, correlated + np.diag(diagonal), 0.0)
    # A station missing in an hour is cut loose: its row and column are the identity's.
    kernels[np.eye(count, dtype=bool)[None, :, :] & ~usable[:, :, None]] = 1.0
    covariances = np.where(cut, between, 0.0)
    inverse = np.linalg.inv(kernels)
    a_diag = np.einsum("tii->ti", inverse)
    ca = covariances @ inverse
    ca_diag = np.einsum("tii->ti", ca)
    weights: FloatArray = ca - (ca_diag / a_diag)[:, :, None] * inverse
    weights[:, np.arange(count), np.arange(count)] = 0.0
    explained: FloatArray = np.einsum("tij,tij->ti", ca, covariances) - ca_diag * ca_diag / a_diag
    taper_to_others = np.where(usable[:, None, :], taper(distance, params.support_m), 0.0)
    taper_to_others[:, np.arange(count), np.arange(count)] = 0.0
    reach: FloatArray = taper_to_others.max(axis=2)
    if params.inverse_distance:
        d = np.maximum(distance, IDW_MIN_DISTANCE_M)
        inverse_square = np.where(usable[:, None, :], 1.0 / (d * d), 0.0)
        inverse_square[:, np.arange(count), np.arange(count)] = 0.0
        with np.errstate(invalid="ignore", divide="ignore"):
            normalised = inverse_square / inverse_square.sum(axis=2, keepdims=True)
        weights = np.nan_to_num(normalised) * reach[:, :, None]
    return weights, explained, reach


def leave_one_out(
    stations: Sequence[Station],
    observed: FloatArray,
    background: FloatArray,
    params: FusionParameters,
) -> tuple[FloatArray, FloatArray]:
    """Each observation predicted from the other stations of its hour (a row per hour, a
    column per station, NaN unknown) and the share v of the residual's variance left there,
    as the service would serve them (never below zero). A station alone in its hour gets the
    background and v = 1.

    With A = (K + N)⁻¹ over the hour's stations and c̃ the covariances between station k's
    point and the others (k's own entry 0; a traffic station's street term reaches a
    neighbour within its street), the prediction from the others is
    (c̃ᵀA)r - (c̃ᵀA)_k (Ar)_k / A_kk and the variance it explains c̃ᵀAc̃ - (c̃ᵀA)_k² / A_kk (the
    inverse of a matrix with one row and column removed, from the whole inverse): one inverse
    per hour, batched.
    """
    import numpy as np

    observed = np.asarray(observed, dtype=np.float64)
    background = np.asarray(background, dtype=np.float64)
    lats = np.array([s.point.lat for s in stations], dtype=np.float64)
    lons = np.array([s.point.lon for s in stations], dtype=np.float64)
    distance = station_distances(lats, lons, lats, lons)
    sites = [_site(s, params) for s in stations]
    share = np.array([site[0] for site in sites], dtype=np.float64)
    length = np.array([site[1] for site in sites], dtype=np.float64)
    usable = ~(np.isnan(observed) | np.isnan(background))
    weights, explained, reach = _held_out_weights(distance, share, length, usable, params)

    # The background's pattern kept at β about b, the mean over the others of the hour.
    beta = params.background_share
    a = np.where(usable, background, 0.0)
    reporting = usable.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        others_mean = np.nan_to_num((a.sum(axis=1, keepdims=True) - a) / (reporting - 1))
    z = np.where(usable, observed - beta * background, 0.0)
    weight_sum = weights.sum(axis=2)
    predicted = (
        background
        + reach * (beta - 1.0) * (background - others_mean)
        + np.einsum("tkj,tj->tk", weights, z)
        - (1.0 - beta) * others_mean * weight_sum
    )
    alone = reporting < 2
    predicted = np.where(alone, background, predicted)
    # As served at a point: the noise, and the street variance of the others' streets it
    # lies in (`ResidualField.unexplained`; the held-out station's own type is unknown there).
    streets = np.where(
        usable[:, None, :], share[None, None, :] * np.exp(-distance / length[None, :])[None], 0.0
    )
    streets[:, np.arange(share.size), np.arange(share.size)] = 0.0
    prior = 1.0 + params.mean_share + params.noise_share + streets.max(axis=2)
    left = np.where(alone, 1.0, np.clip(1.0 - explained / prior, 1e-9, 1.0))
    fused = np.maximum(0.0, predicted)
    return np.where(usable, fused, np.nan), np.where(usable, left, np.nan)


def fit_parameters(
    stations: Sequence[Station],
    observed: FloatArray,
    background: FloatArray,
    fallback: FusionParameters,
) -> FusionFit:
    """The parameters for one pollutant from its observations at `stations` (a row per hour,
    a column per station, NaN unknown) and the unfused `background` there. `fallback`
    gives what is not fitted (the site terms, the persistence) and everything when the data
    are too few."""
    import numpy as np

    observed = np.asarray(observed, dtype=np.float64)
    background = np.asarray(background, dtype=np.float64)
    usable = ~(np.isnan(observed) | np.isnan(background))
    columns = np.flatnonzero(usable.any(axis=0))
    if columns.size > MAX_STATIONS:
        columns = np.sort(np.argsort(-usable.sum(axis=0), kind="stable")[:MAX_STATIONS])
    chosen = [stations[int(c)] for c in columns]
    observed, background, usable = observed[:, columns], background[:, columns], usable[:, columns]
    rows = np.flatnonzero(usable.sum(axis=1) >= 3)
    if rows.size > MAX_HOURS:
        rows = rows[np.linspace(0, rows.size - 1, MAX_HOURS).round().astype(np.int64)]
    if len(chosen) < MIN_STATIONS or rows.size < MIN_HOURS:
        return FusionFit(fallback, False, len(chosen), int(rows.size), math.nan, math.nan)
    observed, background = observed[rows], background[rows]
    known = ~(np.isnan(observed) | np.isnan(background))

    best: tuple[float, FusionParameters, FloatArray, FloatArray] | None = None
    for params in _candidates(chosen, fallback):
        fused, left = leave_one_out(chosen, observed, background, params)
        rmse = float(np.sqrt(np.mean((fused[known] - observed[known]) ** 2)))
        # The fallback comes first: another must beat it by the margin.
        if best is None or rmse < best[0] * (_MARGIN if best[1] is fallback else 1.0):
            best = (rmse, params, fused, left)
    assert best is not None
    rmse, params, fused, left = best
    error = _background_error(observed[known], background[known], fallback.background_error)
    spread, coverage = _spread(observed[known], fused[known], left[known], error)
    chosen_params = attrs.evolve(params, background_error=error, spread=spread)
    return FusionFit(chosen_params, True, len(chosen), int(rows.size), rmse, coverage)


def _candidates(stations: Sequence[Station], fallback: FusionParameters) -> list[FusionParameters]:
    """The fallback and a grid scaled to the network: district lengths from its median
    nearest-neighbour distance, regional lengths from its median spacing."""
    import numpy as np

    lats = np.array([s.point.lat for s in stations], dtype=np.float64)
    lons = np.array([s.point.lon for s in stations], dtype=np.float64)
    d = station_distances(lats, lons, lats, lons)
    upper = d[np.triu_indices(len(stations), k=1)]
    np.fill_diagonal(d, np.inf)
    nearest = max(1_000.0, float(np.median(d.min(axis=1))))
    spacing = max(5_000.0, float(np.median(upper)))
    grid = itertools.product(
        _DISTRICT_SCALES,
        _REGIONAL_SCALES,
        _REGIONAL_SHARES,
        _NOISE_SHARES,
        _SHARES_KEPT,
        _MEAN_SHARES,
    )
    candidates = [fallback]
    for kept in _SHARES_KEPT:
        regional_m = min(MAX_REGIONAL_M, _REGIONAL_SCALES[0] * spacing)
        candidates.append(
            attrs.evolve(
                fallback,
                regional_length_m=regional_m,
                district_length_m=min(nearest, 0.5 * regional_m),
                background_share=kept,
                inverse_distance=True,
            )
        )
    for district, regional, share, noise, kept, mean in grid:
        regional_m = min(MAX_REGIONAL_M, regional * spacing)
        district_m = min(district * nearest, 0.5 * regional_m)
        candidates.append(
            attrs.evolve(
                fallback,
                regional_length_m=regional_m,
                district_length_m=district_m,
                regional_share=share,
                noise_share=noise,
                background_share=kept,
                mean_share=mean,
            )
        )
    return candidates


def _background_error(observed: FloatArray, background: FloatArray, fallback: float) -> float:
    """The background's error as a share of its value: the 90th percentile of |error| over
    the background (floored at `ERROR_FLOOR`), so that value ± Z90 · share · value covers 90 %
    of the observations where no station speaks."""
    import numpy as np

    if observed.size == 0:
        return fallback
    ratio = np.abs(background - observed) / np.maximum(background, ERROR_FLOOR)
    return float(np.quantile(ratio, 0.9) / Z90)


def _spread(
    observed: FloatArray, fused: FloatArray, left: FloatArray, error: float
) -> tuple[float, float]:
    """q such that fused ± Z90 · error · max(fused, floor) · v^q covers 90 % of the held-out
    observations: the largest q (the narrowest intervals) that still covers 90 %, or 0 (the
    background's own error) when even that does not; and the coverage it gives."""
    import numpy as np

    level = np.maximum(fused, ERROR_FLOOR)
    miss = np.abs(fused - observed)
    best = (_SPREADS[0], 0.0)
    for q in _SPREADS:
        half = Z90 * error * level * np.power(left, q)
        coverage = float(np.mean(miss <= half))
        if coverage >= 0.9:
            best = (q, coverage)
        elif q == _SPREADS[0]:
            return q, coverage
    return best


__all__ = [
    "MAX_HOURS",
    "MAX_STATIONS",
    "MIN_HOURS",
    "MIN_STATIONS",
    "FitLayout",
    "FusionFit",
    "fit_layout",
    "fit_parameters",
    "leave_one_out",
]
