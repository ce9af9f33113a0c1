"""Fusion against real stations (`make bench`, section 15).

The shipped Beijing stations (`bench/data/beijing/`: 12 stations, hourly 2016, CC BY 4.0) are
imported with the real CLI (`cleanair stations import`) into a fresh SQLite database, then
evaluated as `cleanair stations evaluate` does: leave one station out, each of its hours
predicted from the other stations of that hour, with the embedded model as the raw background
(Beijing has no street network loaded: the background is the model's grid). The fusion
parameters were fitted on January-June (`--fit`); July-December is data the fit has not
seen. Aim (issue 22): fused RMSE at most 0.6x the raw background and at most 0.9x inverse
distance interpolation, for NO2 and PM2.5.

Run alone: `.venv/bin/python -m bench.fusion` (`--fit` fits the parameters on January-June).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from cleanair_core.air.fusion import FusionParameters
from cleanair_core.air.fusion_evaluation import (
    PollutantEvaluation,
    StationMatrices,
    evaluate_matrices,
    rmse_ratios,
    station_matrices,
)
from cleanair_core.air.pollutants import Pollutant
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer
from cleanair_storage.sqlite import SqliteStore

DATA = Path(__file__).parent / "data" / "beijing"
CLI = Path(sys.executable).parent / "cleanair"
FIT_UNTIL = datetime(2016, 7, 1, tzinfo=UTC)
AIMED = (Pollutant.NO2, Pollutant.PM25)
AIM_BACKGROUND = 0.6
AIM_IDW = 0.9


def import_stations(database: Path) -> float:
    """Import the shipped files with the real CLI; returns the seconds it took."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEANAIR_")}
    env["CLEANAIR_DATABASE"] = str(database)
    started = time.perf_counter()
    subprocess.run(
        [
            str(CLI),
            "stations",
            "import",
            str(DATA / "beijing_2016.csv.gz"),
            "--locations",
            str(DATA / "locations.csv"),
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return time.perf_counter() - started


async def load(database: Path) -> StationMatrices:
    store = SqliteStore(database)
    try:
        matrices = await station_matrices(store, EmbeddedModel(Gazetteer.load()))
    finally:
        store.close()
    if matrices is None:
        raise SystemExit("the import stored no observations")
    return matrices


def report(title: str, evaluations: list[PollutantEvaluation]) -> None:
    print(f"  {title}:")
    for evaluation in evaluations:
        rmse = {r.method: r.statistics for r in evaluation.rows if r.group == "all"}
        ratios = rmse_ratios(evaluation.rows)
        aim = ""
        if evaluation.pollutant in AIMED:
            met = ratios["fused/background"] <= AIM_BACKGROUND and ratios["fused/idw"] <= AIM_IDW
            aim = "  aim met" if met else "  aim NOT met"
        print(
            f"    {evaluation.pollutant.value:5} n={evaluation.observations:6d}  RMSE "
            f"background {rmse['background'].rmse:6.1f}  idw {rmse['idw'].rmse:5.1f}  "
            f"fused {rmse['fused'].rmse:5.1f}  (r {rmse['fused'].r:.2f}, "
            f"FAC2 {rmse['fused'].fac2:.2f})  fused/background "
            f"{ratios['fused/background']:.2f}  fused/idw {ratios['fused/idw']:.3f}{aim}"
        )


LEADS = (1, 3, 6, 12, 24, 48)


def lead_skill(matrices: StationMatrices) -> None:
    """Into the forecast: each station's hour t predicted from the other stations' hour
    t - lead (leave one out), the correction faded by rho(lead), against the raw background
    and against carrying the correction unfaded."""
    from datetime import timedelta

    from cleanair_core.air.fusion import FUSION_PARAMETERS, persistence
    from cleanair_core.air.fusion_evaluation import leave_one_station_out, model_statistics
    from cleanair_core.air.pollutants import SCORED

    print("  into the forecast (held out; RMSE raw / faded / unfaded correction):")
    for pollutant, observed in matrices.observed.items():
        params = FUSION_PARAMETERS[pollutant]
        background = matrices.background[:, :, SCORED.index(pollutant)]
        fused = leave_one_station_out(matrices.stations, observed, background, params)["fused"]
        correction = fused - background
        cells = []
        for lead in LEADS:
            rho = persistence(params, timedelta(hours=lead))
            now = background[lead:]
            raw = model_statistics(now, observed[lead:]).rmse
            faded = model_statistics(now + rho * correction[:-lead], observed[lead:]).rmse
            unfaded = model_statistics(now + correction[:-lead], observed[lead:]).rmse
            cells.append(f"{lead} h {raw:.0f}/{faded:.0f}/{unfaded:.0f}")
        print(f"    {pollutant.value:5} " + "  ".join(cells))


def fit(matrices: StationMatrices) -> None:
    """Grid-search the covariance on January-June by leave-one-station-out RMSE, and the
    persistence from the residuals' lagged regression, per pollutant."""
    first_half = matrices.between(matrices.hours[0], FIT_UNTIL)
    grid = itertools.product(
        [50e3, 100e3, 300e3], [5e3, 10e3, 20e3, 40e3], [0.3, 0.5, 0.8], [0.02, 0.05, 0.1, 0.2]
    )
    candidates = list(grid)
    for pollutant in first_half.observed:
        only = StationMatrices(
            first_half.stations,
            first_half.hours,
            {pollutant: first_half.observed[pollutant]},
            first_half.background,
        )
        best: tuple[float, FusionParameters] | None = None
        for regional, district, share, noise in candidates:
            params = FusionParameters(regional, district, share, noise, 1.0, 50.0, 1.0)
            [evaluation] = evaluate_matrices(only, {pollutant: params})
            ratio = rmse_ratios(evaluation.rows)["fused/idw"]
            if best is None or ratio < best[0]:
                best = (ratio, params)
        assert best is not None
        tau = fit_persistence(first_half, pollutant)
        print(f"  {pollutant.value}: fused/idw {best[0]:.3f} with {best[1]}; persistence {tau} h")


def fit_persistence(matrices: StationMatrices, pollutant: Pollutant) -> float:
    """The e-folding time (hours) that best fits the residual's regression on itself `lag`
    hours earlier, over lags 1-48 h (least squares)."""
    from cleanair_core.air.pollutants import SCORED

    residual = matrices.observed[pollutant] - matrices.background[:, :, SCORED.index(pollutant)]
    lags = np.arange(1, 49)
    kept = []
    for lag in lags:
        a, b = residual[:-lag], residual[lag:]
        known = ~(np.isnan(a) | np.isnan(b))
        kept.append(float(np.sum(a[known] * b[known]) / np.sum(a[known] ** 2)))
    regression = np.array(kept)
    taus = np.arange(2.0, 80.0, 1.0)
    errors = [float(np.sum((regression - np.exp(-lags / tau)) ** 2)) for tau in taus]
    return float(taus[int(np.argmin(errors))])


async def main(fitting: bool = False) -> None:
    print("fusion against real stations (Beijing 2016, leave one station out):")
    with tempfile.TemporaryDirectory() as folder:
        database = Path(folder) / "cleanair.db"
        seconds = import_stations(database)
        print(f"  cleanair stations import: 412,253 rows in {seconds:.1f} s")
        started = time.perf_counter()
        matrices = await load(database)
    if fitting:
        fit(matrices)
        return
    report(
        "the fit's half (January-June)",
        evaluate_matrices(matrices.between(matrices.hours[0], FIT_UNTIL)),
    )
    report(
        "held out (July-December)",
        evaluate_matrices(matrices.between(FIT_UNTIL, matrices.hours[-1])),
    )
    report("the whole year", evaluate_matrices(matrices))
    lead_skill(matrices.between(FIT_UNTIL, matrices.hours[-1]))
    print(f"  evaluation {time.perf_counter() - started:.1f} s")
    print(
        f"  aims: NO2 and PM2.5 fused <= {AIM_BACKGROUND}x background and <= {AIM_IDW}x "
        "inverse distance (held out)"
    )


if __name__ == "__main__":
    asyncio.run(main(fitting="--fit" in sys.argv))
