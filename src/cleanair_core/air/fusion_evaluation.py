"""The service's own error: leave-one-station-out over stored observations.

Each station's hours are predicted without it, from the other stations that reported in the
same hour, three ways: the raw background (what the service says with no observations), the
fused field (`cleanair_core.air.fusion`), and inverse-distance-squared interpolation of the
other stations alone (the baseline a fusion must beat). The statistics are openair's
`modStats` set (Carslaw & Ropkins 2012): n, mean bias (predicted - observed), RMSE, Pearson's
r and FAC2 (the share of predictions within a factor of two of the observation).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import attrs

from cleanair_core.air.fusion import FusionParameters, _correlated, _site, station_distances
from cleanair_core.air.observations import Station

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    BoolArray = npt.NDArray[np.bool_]

#: The methods compared, in the order reported.
METHODS: tuple[str, ...] = ("background", "fused", "idw")

#: Stations nearer than this are one place to inverse-distance weighting (no division by 0).
_IDW_MIN_DISTANCE_M = 1.0


@attrs.frozen
class ModelStatistics:
    """How predictions compare with observations (µg/m³ for bias and RMSE)."""

    n: int
    mean_bias: float
    rmse: float
    r: float
    fac2: float


def model_statistics(predicted: FloatArray, observed: FloatArray) -> ModelStatistics:
    """`ModelStatistics` over the pairs where both are known; NaN statistics when none are
    (and r is NaN when either side is constant)."""
    import numpy as np

    p = np.asarray(predicted, dtype=np.float64).reshape(-1)
    o = np.asarray(observed, dtype=np.float64).reshape(-1)
    known = ~(np.isnan(p) | np.isnan(o))
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
    )


def _loo_fusion_weights(
    d: FloatArray, share: FloatArray, length: FloatArray, params: FusionParameters
) -> FloatArray:
    """W with W[k, j] the weight of station j's residual in station k's prediction when k is
    left out (W[k, k] = 0): the fused field's weights, every k from one inverse.

    With A = (K + N)⁻¹ over all n stations and C[k, l] the covariance between station k's
    point and station l, leaving k out gives W[k, j] = (CA)[k, j] - (CA)[k, k] A[k, j] / A[k, k]
    (the inverse of a matrix with one row and column removed, from the whole inverse).
    """
    import numpy as np

    correlated = _correlated(d, params)
    kernel = correlated + np.diag(share + params.noise_share)
    inverse = np.linalg.inv(kernel)
    covariance = correlated + share[None, :] * np.exp(-d / length[None, :])
    ca = covariance @ inverse
    weights: FloatArray = ca - (np.diag(ca) / np.diag(inverse))[:, None] * inverse
    np.fill_diagonal(weights, 0.0)
    return weights


def _loo_idw_weights(distance: FloatArray) -> FloatArray:
    import numpy as np

    d = np.maximum(distance, _IDW_MIN_DISTANCE_M)
    inverse_square: FloatArray = 1.0 / (d * d)
    np.fill_diagonal(inverse_square, 0.0)
    weights: FloatArray = inverse_square / inverse_square.sum(axis=1, keepdims=True)
    return weights


def leave_one_station_out(
    stations: Sequence[Station],
    observed: FloatArray,
    background: FloatArray,
    params: FusionParameters,
) -> dict[str, FloatArray]:
    """Each method's prediction of every observation from the other stations of its hour.

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
    sites = [_site(s, params) for s in stations]
    share = np.array([site[0] for site in sites], dtype=np.float64)
    length = np.array([site[1] for site in sites], dtype=np.float64)

    usable: BoolArray = ~(np.isnan(observed) | np.isnan(background))
    fused = np.full_like(observed, np.nan)
    idw = np.full_like(observed, np.nan)
    residual = np.where(usable, observed - background, 0.0)
    values = np.where(usable, observed, 0.0)
    # Hours with the same stations reporting share their weights: a handful of patterns.
    patterns, which = np.unique(usable, axis=0, return_inverse=True)
    for index, pattern in enumerate(patterns):
        rows = np.flatnonzero(which.reshape(-1) == index)
        columns = np.flatnonzero(pattern)
        if columns.size == 0:
            continue
        d = distance[np.ix_(columns, columns)]
        w = _loo_fusion_weights(d, share[columns], length[columns], params)
        block = np.ix_(rows, columns)
        fused[block] = background[block] + residual[block] @ w.T
        if columns.size > 1:
            idw[block] = values[block] @ _loo_idw_weights(d).T
    predictions = {"background": np.where(usable, background, np.nan), "fused": fused, "idw": idw}
    return {method: np.where(usable, predictions[method], np.nan) for method in METHODS}


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
            statistics = model_statistics(predictions[method][:, index], observed[:, index])
            rows.append(EvaluationRow(group, method, statistics))
    return rows


def rmse_ratios(rows: Iterable[EvaluationRow]) -> dict[str, float]:
    """Over "all": the fused RMSE relative to the background's and to inverse distance's."""
    rmse = {row.method: row.statistics.rmse for row in rows if row.group == "all"}
    return {
        "fused/background": rmse["fused"] / rmse["background"],
        "fused/idw": rmse["fused"] / rmse["idw"],
    }
