"""Fusion: the modelled air anchored to station observations.

The background (the embedded model or CAMS, at street level) is corrected by what stations
measured. For pollutant p in the hour whose observations are used, each station i with an
observation o_i has a residual r_i = o_i - A(s_i), A being the air the service would report
at the station's point without fusion. The residual field is interpolated by optimal
interpolation (simple kriging of the residuals, the analysis step of data assimilation):

    F(x, t) = max(0, A(x, t) + rho(t - h) · k(x)ᵀ (K + N)⁻¹ r)

with k and K the residuals' covariances (below), N each station's own noise, h the end of
the observations' hour and rho(lead) = exp(-lead / persistence) the residual's persistence
into the forecast: the correction is blended back to the raw background over the next day.

The covariance of the residuals at distance d is a regional and a district part,

    c(d) = R · exp(-d / L_regional) + (1 - R) · exp(-d / L_district),

plus, for a traffic or industrial station, a site part of its own, T · exp(-d / L_site),
that reaches only its street (or site): a traffic station speaks for its street, a
background station for its district and region. Far from every station (several regional
lengths) k(x) -> 0 and F is the background: with no observations F is exactly A. At a
station, F reproduces its observation up to its noise. Why this method and where each number
comes from: docs/science.md ("Fusion with station observations").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import attrs

from cleanair_core.air.observations import OBSERVED, Observation, Station, StationType
from cleanair_core.air.pollutants import SCORED, Pollutant
from cleanair_core.geo import distances_m

# NumPy is imported by the functions that compute: the operator CLI's commands import this
# module and start faster without NumPy (tests/cleanair_http/test_cli_startup.py).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

HOUR = timedelta(hours=1)


@attrs.frozen
class FusionParameters:
    """The residual covariance of one pollutant, in shares of the residual variance at a
    background station (so only ratios matter), and the residual's persistence."""

    regional_length_m: float
    district_length_m: float
    #: R: the regional part's share of the correlated variance.
    regional_share: float
    #: A background station's own noise (measurement and very local effects).
    noise_share: float
    #: T and L_site of a traffic station: variance of its street alone, and how far it reaches.
    traffic_share: float
    street_length_m: float
    #: rho's e-folding time into the forecast, hours.
    persistence_hours: float


#: Fitted on the first half of 2016 of the shipped Beijing stations: the lengths, shares and
#: noise by leave-one-station-out RMSE, the persistence by the residual's lagged regression
#: (`python -m bench.fusion --fit`; docs/science.md gives the fit and the held-out figures).
#: The street length is chosen (the data have no traffic/background pairs): a traffic
#: station's own street term reaches about a street and its kerbs (50 m).
FUSION_PARAMETERS: dict[Pollutant, FusionParameters] = {
    Pollutant.PM25: FusionParameters(300_000.0, 40_000.0, 0.8, 0.05, 1.0, 50.0, 30.0),
    Pollutant.PM10: FusionParameters(300_000.0, 40_000.0, 0.8, 0.05, 1.0, 50.0, 26.0),
    Pollutant.NO2: FusionParameters(100_000.0, 5_000.0, 0.8, 0.05, 1.0, 50.0, 25.0),
    Pollutant.O3: FusionParameters(300_000.0, 40_000.0, 0.8, 0.10, 1.0, 50.0, 20.0),
}

#: Observations older than this (before the hour of a sample) are not used: the correction
#: is tapered linearly to nothing over it, on top of rho, so it ends without a step.
MAX_LEAD = timedelta(hours=72)

#: An industrial station's site reaches further than a street: its plant's plume.
INDUSTRIAL_SITE_M = 300.0

#: Point-station pairs whose covariances `ResidualField.at` builds at once (8 bytes each, a
#: few arrays of them).
_AT_ONCE = 1 << 17


def observation_hour(at: datetime) -> datetime:
    """The end of the hour of observations that describes the instant `at`: observations
    average (hour_end - 1 h, hour_end], so an instant on the hour belongs to the hour ending
    then, and 08:20 to the hour ending at 09:00."""
    floor = at.replace(minute=0, second=0, microsecond=0)
    return floor if floor == at else floor + HOUR


def persistence(params: FusionParameters, lead: timedelta) -> float:
    """rho: how much of an hour's correction is kept `lead` after the end of that hour (all
    of it up to the end of the hour, nothing from `MAX_LEAD` on)."""
    hours = max(0.0, lead.total_seconds() / 3600.0)
    taper = max(0.0, 1.0 - hours / (MAX_LEAD.total_seconds() / 3600.0))
    return math.exp(-hours / params.persistence_hours) * taper


def _site(station: Station, params: FusionParameters) -> tuple[float, float]:
    """A station's own site variance and its reach (metres)."""
    if station.station_type is StationType.TRAFFIC:
        return params.traffic_share, params.street_length_m
    if station.station_type is StationType.INDUSTRIAL:
        return params.traffic_share, INDUSTRIAL_SITE_M
    return 0.0, 1.0


def station_distances(
    lats: FloatArray, lons: FloatArray, station_lats: FloatArray, station_lons: FloatArray
) -> FloatArray:
    """Metres from each point (a row) to each station (a column), great-circle."""
    import numpy as np

    return distances_m(
        np.asarray(lats, dtype=np.float64)[:, None],
        np.asarray(lons, dtype=np.float64)[:, None],
        np.asarray(station_lats, dtype=np.float64)[None, :],
        np.asarray(station_lons, dtype=np.float64)[None, :],
    )


def _correlated(distance: FloatArray, params: FusionParameters) -> FloatArray:
    import numpy as np

    r = params.regional_share
    value: FloatArray = r * np.exp(-distance / params.regional_length_m) + (1.0 - r) * np.exp(
        -distance / params.district_length_m
    )
    return value


@attrs.frozen(eq=False)
class ResidualField:
    """One pollutant's interpolated residuals for one hour: `at(lats, lons)` is k(x)ᵀ(K+N)⁻¹r."""

    params: FusionParameters
    lats: FloatArray
    lons: FloatArray
    site_share: FloatArray
    site_length_m: FloatArray
    alpha: FloatArray
    #: The end of the hour the residuals are of.
    hour_end: datetime
    stations: tuple[str, ...]

    def at(self, lats: FloatArray, lons: FloatArray) -> FloatArray:
        """The interpolated residual at each point (µg/m³), before persistence. The points-
        by-stations matrices are built a slice of points at a time (`_AT_ONCE` cells), so a
        whole network against thousands of stations stays in bounded memory."""
        import numpy as np

        lat = np.asarray(lats, dtype=np.float64).reshape(-1)
        lon = np.asarray(lons, dtype=np.float64).reshape(-1)
        value: FloatArray = np.empty(lat.size, dtype=np.float64)
        step = max(1, _AT_ONCE // max(1, self.alpha.size))
        for first in range(0, lat.size, step):
            part = slice(first, first + step)
            d = station_distances(lat[part], lon[part], self.lats, self.lons)
            k = _correlated(d, self.params) + self.site_share[None, :] * np.exp(
                -d / self.site_length_m[None, :]
            )
            value[part] = k @ self.alpha
        return value


def residual_field(
    stations: Sequence[Station],
    residuals: Sequence[float],
    params: FusionParameters,
    hour_end: datetime,
) -> ResidualField:
    """The residual field of `residuals` observed at `stations` (one each, in order)."""
    import numpy as np

    lats = np.array([s.point.lat for s in stations], dtype=np.float64)
    lons = np.array([s.point.lon for s in stations], dtype=np.float64)
    sites = [_site(s, params) for s in stations]
    share = np.array([site[0] for site in sites], dtype=np.float64)
    length = np.array([site[1] for site in sites], dtype=np.float64)
    d = station_distances(lats, lons, lats, lons)
    kernel = _correlated(d, params) + np.diag(share + params.noise_share)
    # The site parts of two different stations are independent: only the diagonal has them.
    alpha: FloatArray = np.linalg.solve(kernel, np.asarray(residuals, dtype=np.float64)).astype(
        np.float64
    )
    return ResidualField(
        params, lats, lons, share, length, alpha, hour_end, tuple(s.id for s in stations)
    )


@attrs.frozen
class HourObservations:
    """One pollutant's latest hour of observations at or before a wanted hour."""

    pollutant: Pollutant
    hour_end: datetime
    observations: tuple[Observation, ...]


def latest_hours(
    observations: Sequence[Observation], wanted: datetime
) -> dict[Pollutant, HourObservations]:
    """For each pollutant, its observations of the latest hour ending at or before `wanted`
    (within `MAX_LEAD`): the hour a correction at `wanted` is made from."""
    best: dict[Pollutant, datetime] = {}
    for observation in observations:
        end = observation.hour_end
        if end > wanted or wanted - end > MAX_LEAD:
            continue
        if end > best.get(observation.pollutant, end - HOUR):
            best[observation.pollutant] = end
    chosen: dict[Pollutant, list[Observation]] = {p: [] for p in best}
    for observation in observations:
        if best.get(observation.pollutant) == observation.hour_end:
            chosen[observation.pollutant].append(observation)
    return {p: HourObservations(p, best[p], tuple(found)) for p, found in chosen.items() if found}


def apply_residuals(air: FloatArray, corrections: dict[Pollutant, FloatArray]) -> FloatArray:
    """Add each pollutant's correction (one per row) to `air` (a row per point, a column per
    `SCORED` pollutant), never below zero, keeping PM10 >= PM2.5; unknown stays unknown."""
    import numpy as np

    fused = np.array(air, dtype=np.float64)
    for pollutant, correction in corrections.items():
        column = SCORED.index(pollutant)
        fused[:, column] = np.maximum(0.0, fused[:, column] + correction)
    pm25, pm10 = SCORED.index(Pollutant.PM25), SCORED.index(Pollutant.PM10)
    fused[:, pm10] = np.where(
        np.isnan(fused[:, pm10]), np.nan, np.fmax(fused[:, pm10], fused[:, pm25])
    )
    return fused


__all__ = [
    "FUSION_PARAMETERS",
    "HOUR",
    "MAX_LEAD",
    "OBSERVED",
    "FusionParameters",
    "HourObservations",
    "ResidualField",
    "apply_residuals",
    "latest_hours",
    "observation_hour",
    "persistence",
    "residual_field",
    "station_distances",
]
