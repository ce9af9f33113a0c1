"""The per-point air arithmetic of `exposure`, `score` and `dose` on arrays of points.

A route's waypoints (or any many points) come as rows: a row per point, a column per
`SCORED` pollutant, NaN where unknown. Each function here gives what its scalar twin gives
point by point, bit for bit: the same operations in the same order, Python's `max(0.0, x)`
kept as such, and sums over points taken in order by Python's `sum` (NumPy's pairwise sums
would differ in the last bit). tests/cleanair_core/test_air_rows.py compares them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from cleanair_core.air.activities import ActivityType
from cleanair_core.air.dose import GUIDELINE_LEVELS
from cleanair_core.air.exposure import INDOOR_RATIOS, EnvironmentType, breathing_factor
from cleanair_core.air.pollutants import SCORED, Concentrations
from cleanair_core.air.score import EEA_2024_BOUNDS, POINTS_PER_BAND

# NumPy is imported by the functions that compute: the operator CLI's commands import this
# module's neighbours and start faster without NumPy (tests/cleanair_runtime/test_cli_startup.py).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

FloatArray: TypeAlias = "npt.NDArray[np.float64]"
IntArray: TypeAlias = "npt.NDArray[np.int64]"

_SECONDS_PER_HOUR = 3600.0


def breathed_rows(rows: FloatArray, environment: EnvironmentType) -> FloatArray:
    """`breathed_air` of each row: indoor ratios applied when indoors (a copy otherwise)."""
    import numpy as np

    if environment is not EnvironmentType.INDOOR:
        return np.array(rows, dtype=np.float64)
    ratios = np.array([INDOOR_RATIOS.get(pollutant, 1.0) for pollutant in SCORED])
    breathed: FloatArray = rows * ratios
    return breathed


def sub_indices(column: int, values: FloatArray) -> FloatArray:
    """`sub_index` of the `SCORED[column]` pollutant at each of `values` (not NaN)."""
    import numpy as np

    bounds = np.array(EEA_2024_BOUNDS[SCORED[column]])
    lowers = np.concatenate(([0.0], bounds[:-1]))
    # The first band whose upper bound is at least the value: `concentration <= upper`.
    band = np.searchsorted(bounds, values, side="left")
    inside = np.minimum(band, bounds.size - 1)
    above = values - lowers[inside]
    fraction = np.where(above > 0.0, above, 0.0) / (bounds[inside] - lowers[inside])
    result: FloatArray = np.where(band < bounds.size, POINTS_PER_BAND * (band + fraction), 100.0)
    return result


def clean_air_scores(rows: FloatArray) -> tuple[IntArray, npt.NDArray[np.bool_]]:
    """`clean_air_score` of each row, and whether it has one (some pollutant known)."""
    import numpy as np

    worst = np.full(rows.shape[0], -np.inf)
    known = ~np.isnan(rows)
    for column in range(rows.shape[1]):
        here = known[:, column]
        if here.any():
            index = sub_indices(column, rows[here, column])
            worst[here] = np.maximum(worst[here], index)
    scored: npt.NDArray[np.bool_] = np.asarray(known.any(axis=1))
    scores = np.clip(np.floor(100.0 - worst[scored] + 1e-9), 0, 100).astype(np.int64)
    result = np.zeros(rows.shape[0], dtype=np.int64)
    result[scored] = scores
    return result, scored


def personal_score_rows(
    rows: FloatArray, activity: ActivityType, environment: EnvironmentType
) -> tuple[IntArray, npt.NDArray[np.bool_]]:
    """`personal_score` of each row as `clean_air_scores` gives them."""
    return clean_air_scores(breathed_rows(rows, environment) * breathing_factor(activity))


def optional_ints(values: IntArray, known: npt.NDArray[np.bool_]) -> list[int | None]:
    """`values` as Python ints, None where not `known`."""
    import numpy as np

    listed: list[int | None] = list(values.tolist())
    if not known.all():
        for index in np.flatnonzero(~known).tolist():
            listed[index] = None
    return listed


def weighted_mean(values: FloatArray, weights: FloatArray) -> float | None:
    """`time_weighted_mean` of `values` (NaN unknown) with `weights`."""
    import numpy as np

    known = ~np.isnan(values)
    if not known.any():
        return None
    value, weight = values[known], weights[known]
    total = sum(weight.tolist())
    if total <= 0:
        return float(sum(value.tolist()) / value.size)
    mean = sum((value * weight).tolist()) / total
    # Float rounding must not put the mean outside the values it averages.
    return float(min(max(mean, float(value.min())), float(value.max())))


def weighted_means(rows: FloatArray, weights: FloatArray) -> list[float | None]:
    """`weighted_mean` of each column of `rows`: the columns known at every row at once
    (sums in order down the column, as Python's `sum` adds), the others one by one."""
    import numpy as np

    full: npt.NDArray[np.bool_] = np.asarray(~np.isnan(rows).any(axis=0))
    means: list[float | None] = [
        None if full[column] else weighted_mean(rows[:, column], weights)
        for column in range(rows.shape[1])
    ]
    if not full.any():
        return means
    known = rows[:, full]
    # `sum` starts from 0 and adds in order: an accumulation from a row of zeros.
    total = sum(weights.tolist())
    if total <= 0:
        found = _in_order(known) / known.shape[0]
    else:
        found = _in_order(known * weights[:, np.newaxis]) / total
        # Float rounding must not put the mean outside the values it averages.
        least, most = known.min(axis=0), known.max(axis=0)
        found = np.where(least > found, least, found)
        found = np.where(most < found, most, found)
    for column, mean in zip(np.flatnonzero(full).tolist(), found.tolist(), strict=True):
        means[column] = mean
    return means


def _in_order(values: FloatArray) -> FloatArray:
    """Each column's sum, added in order from 0.0 (as Python's `sum` of floats)."""
    import numpy as np

    padded = np.vstack([np.zeros((1, values.shape[1])), values])
    sums: FloatArray = np.add.accumulate(padded, axis=0)[-1]
    return sums


def dose_of_rows(
    breathed: FloatArray, weights: FloatArray, ventilation_ratio: float
) -> float | None:
    """`inhaled_dose` of the breathed rows with `weights` (seconds each)."""
    import numpy as np

    if breathed.shape[0] == 0:
        return None
    columns = [c for c in range(len(SCORED)) if not np.isnan(breathed[:, c]).any()]
    if not columns:
        return None
    total = np.zeros(breathed.shape[0])
    for column in columns:
        value = breathed[:, column]
        total = total + np.where(value > 0.0, value, 0.0) / GUIDELINE_LEVELS[SCORED[column]]
    loads = total / len(columns)
    exposure_s = sum((loads * weights).tolist())
    return float(exposure_s / _SECONDS_PER_HOUR * ventilation_ratio)


def rounded(values: FloatArray, digits: int) -> list[float | None]:
    """Each value `round`ed to `digits` as Python rounds it (None where NaN).

    Python rounds the exact binary value half to even at the decimal digit and gives the
    float nearest that decimal; `rint(x · 10^d) / 10^d` gives the same wherever the product
    (rounded itself) is more than an ulp from a half: then the exact product lies on the
    same side of it, `rint` picks the same integer, and the division is correctly rounded.
    The rest (within an ulp of a half, too large to hold fractions, NaN) are rounded one by
    one by `round` itself."""
    import numpy as np

    scale = 10.0**digits
    # Overflow and NaN are among the doubtful, rounded one by one: no warnings.
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = values * scale
        result = np.rint(scaled) / scale
        magnitude = np.abs(scaled)
        from_half = np.abs(magnitude - np.floor(magnitude) - 0.5)
        doubtful = ~((from_half > 2.0 * np.spacing(magnitude)) & (magnitude < 2.0**52))
    listed: list[float | None] = list(result.tolist())
    if doubtful.any():
        for index in np.flatnonzero(doubtful).tolist():
            value = float(values[index])
            listed[index] = None if math.isnan(value) else round(value, digits)
    return listed


def as_rows(airs: Sequence[Concentrations]) -> FloatArray:
    """Concentrations as rows (NaN where unknown): the tests' bridge between the two forms."""
    import numpy as np

    return np.array(
        [[float("nan") if (v := air.get(p)) is None else v for p in SCORED] for air in airs],
        dtype=np.float64,
    ).reshape(len(airs), len(SCORED))
