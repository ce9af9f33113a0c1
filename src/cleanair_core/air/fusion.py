"""Fusion: the modelled air anchored to station observations.

The background (the embedded model or CAMS, at street level) is corrected by what stations
measured. For pollutant p in the hour whose observations are used, each station i with an
observation o_i and the background there A(s_i) (the air the service would report at the
station's point without fusion, in the middle of the hour), with b the mean of those
backgrounds over the hour's stations:

    F(x, t) = max(0, A(x, t) + rho(t - h) · [s(x)(β - 1)(A(x) - b) + k(x)ᵀ (K + N)⁻¹ r'])
    r'_i = o_i - b - β (A(s_i) - b)

k and K are the residuals' covariances, N each station's own noise, h the end of the
observations' hour and rho(lead) = exp(-lead / persistence) the correction's persistence into
the forecast. The covariance between points at distance d is

    c(d) = W(d) · [M + R · exp(-d / L_regional) + (1 - R) · exp(-d / L_district)],

plus, for a traffic or industrial station, a site part of its own, T · exp(-d / L_site),
that reaches only its street (or site). W is Wendland's C2 taper, zero from `SUPPORT_RANGES`
regional lengths on, so a station's influence ends where the data no longer support it:
beyond it F is exactly the background. M lets the stations set the local level (ordinary
kriging's weights); β keeps only the share of the background's spatial pattern the data
support; s(x) is the largest taper over the stations. With `inverse_distance` the residuals
r' are weighted by inverse distance squared instead (times s(x)): the stations-alone
baseline. The parameters are fitted per pollutant from the observations a deployment holds
(`cleanair_core.air.fusion_fit`); `FUSION_PARAMETERS` are the fallback where there are too
few. Every value carries a standard error (`uncertainty`): the background's own error, shrunk
where stations speak. Why this method and where each number comes from: docs/science.md
("Fusion with station observations").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import attrs

from cleanair_core.air.observations import OBSERVED, Observation, Station, StationType
from cleanair_core.air.pollutants import SCORED, Pollutant
from cleanair_core.geo import distances_m

# NumPy is imported by the functions that compute: the operator CLI's commands import this
# module and start faster without NumPy (tests/cleanair_runtime/test_cli_startup.py).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    BoolArray = npt.NDArray[np.bool_]

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
    #: β: the share of the background's spatial pattern kept near the stations (1: as it is;
    #: 0: the stations' level alone, the background's pattern dropped).
    background_share: float = 1.0
    #: M: the variance of the residual's local mean (constant over the support), in the same
    #: shares: a large M lets the stations set the level near them whatever the background
    #: says (ordinary kriging's weights, summing to one), fading beyond the support.
    mean_share: float = 0.0
    #: Weigh the stations' residuals by inverse distance squared (weights summing to one,
    #: times s(x)) instead of kriging them: the stations-alone baseline, chosen by the fit
    #: where it predicts the held-out stations better. The covariance still gives the
    #: standard error's shrinkage.
    inverse_distance: bool = False
    #: q in the standard error's shrinkage v^q (`uncertainty`), fitted for 90 % coverage.
    spread: float = 0.5
    #: The background's own error as a share of its value, where no station speaks.
    background_error: float = 0.8

    @property
    def support_m(self) -> float:
        """How far a station's correction reaches at all: `SUPPORT_RANGES` regional lengths."""
        return SUPPORT_RANGES * self.regional_length_m


#: A station's correction reaches this many regional lengths and no further (the taper's
#: support): a point three fitted ranges away is not moved at all.
SUPPORT_RANGES = 3.0

#: The fallback where a deployment holds too few observations to fit its own
#: (`fusion_fit.fit_parameters`). Fitted on the first half of 2016 of the shipped Beijing
#: stations: the lengths, shares and noise by leave-one-station-out RMSE, the persistence by
#: the residual's lagged regression (`python -m bench.fusion --fit`); the background errors
#: are the embedded model's there (90th percentile of |background - observed| over the
#: background, / 1.645). The regional lengths are capped at 150 km so that the support
#: (450 km) keeps one city's stations out of the next region. The street length is chosen (the
#: data have no traffic/background pairs): a traffic station's own street term reaches about a
#: street and its kerbs (50 m).
FUSION_PARAMETERS: dict[Pollutant, FusionParameters] = {
    Pollutant.PM25: FusionParameters(
        150_000.0, 40_000.0, 0.8, 0.05, 1.0, 50.0, 30.0, background_error=0.9, background_share=0.5
    ),
    Pollutant.PM10: FusionParameters(
        150_000.0, 40_000.0, 0.8, 0.05, 1.0, 50.0, 26.0, background_error=0.9, background_share=0.5
    ),
    Pollutant.NO2: FusionParameters(
        100_000.0, 5_000.0, 0.8, 0.05, 1.0, 50.0, 25.0, background_error=0.8, background_share=0.5
    ),
    Pollutant.O3: FusionParameters(
        150_000.0, 40_000.0, 0.8, 0.10, 1.0, 50.0, 20.0, background_error=0.8, background_share=0.5
    ),
}

#: The background's error, as a share of its value, for a pollutant fusion has no
#: parameters for (SO2: no station reports it here).
DEFAULT_BACKGROUND_ERROR = 0.8


def background_error(params: FusionParameters | None, value: float) -> float:
    """The standard error of an unfused value (µg/m³): the background's own error."""
    share = DEFAULT_BACKGROUND_ERROR if params is None else params.background_error
    return share * max(value, ERROR_FLOOR)


#: Below this (µg/m³) a value's standard error does not shrink with it: a clean hour's
#: error is not zero.
ERROR_FLOOR = 2.0

#: z of a two-sided 90 % interval under a normal error.
Z90 = 1.6448536269514722

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
    if not (at.minute or at.second or at.microsecond):
        return at  # on the hour (a score's sample): what `replace` would build anew
    return at.replace(minute=0, second=0, microsecond=0) + HOUR


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


def taper(distance: FloatArray, support_m: float) -> FloatArray:
    """Wendland's C2 function: 1 at 0, smooth, exactly 0 from `support_m` on, and positive
    definite in three dimensions (so on the sphere's surface too), so that multiplying a
    covariance by it keeps a covariance."""
    import numpy as np

    x = np.clip(np.asarray(distance, dtype=np.float64) / support_m, 0.0, 1.0)
    value: FloatArray = (1.0 - x) ** 4 * (4.0 * x + 1.0)
    return value


def _correlated(distance: FloatArray, params: FusionParameters) -> FloatArray:
    """The correlated part: regional plus district, tapered."""
    import numpy as np

    r = params.regional_share
    value: FloatArray = (
        params.mean_share
        + r * np.exp(-distance / params.regional_length_m)
        + (1.0 - r) * np.exp(-distance / params.district_length_m)
    ) * taper(distance, params.support_m)
    return value


#: Stations nearer than this are one place to inverse-distance weighting (no division by 0).
IDW_MIN_DISTANCE_M = 1.0


def inverse_distance_weights(distance: FloatArray) -> FloatArray:
    """Inverse-distance-squared weights of each point (a row) on the stations (columns),
    summing to one per row."""
    import numpy as np

    d = np.maximum(np.asarray(distance, dtype=np.float64), IDW_MIN_DISTANCE_M)
    inverse_square = 1.0 / (d * d)
    weights: FloatArray = inverse_square / inverse_square.sum(axis=1, keepdims=True)
    return weights


def support(distance: FloatArray, params: FusionParameters) -> FloatArray:
    """s: for each point (a row of distances to the stations), the largest taper W over the
    stations: 1 at a station, 0 beyond every station's support."""
    value: FloatArray = taper(distance, params.support_m).max(axis=1)
    return value


@attrs.frozen(eq=False)
class ResidualField:
    """One pollutant's interpolated residuals for one hour: `at(lats, lons, backgrounds)` is
    the correction s(x)(β - 1)(A(x) - b) + k(x)ᵀ(K+N)⁻¹r', `weights` the row k(x)ᵀ(K+N)⁻¹
    (each station's share in it) and `unexplained` the share of the residual's variance the
    stations leave."""

    params: FusionParameters
    lats: FloatArray
    lons: FloatArray
    site_share: FloatArray
    site_length_m: FloatArray
    alpha: FloatArray
    #: The end of the hour the residuals are of.
    hour_end: datetime
    stations: tuple[str, ...]
    #: b: the mean of the background over the stations.
    background_mean: float = 0.0

    def _covariances(self, lat: FloatArray, lon: FloatArray) -> tuple[FloatArray, FloatArray]:
        """k(x) for each point (a row) against each station (a column), and the distances."""
        import numpy as np

        d = station_distances(lat, lon, self.lats, self.lons)
        k = _correlated(d, self.params) + self.site_share[None, :] * np.exp(
            -d / self.site_length_m[None, :]
        )
        return k, d

    @property
    def middle(self) -> datetime:
        """The instant the residuals were taken at: the middle of their hour."""
        return self.hour_end - HOUR / 2

    def reaches(self, lats: FloatArray, lons: FloatArray) -> BoolArray:
        """Whether any station's support reaches each point (s(x) > 0)."""
        import numpy as np

        lat = np.asarray(lats, dtype=np.float64).reshape(-1)
        lon = np.asarray(lons, dtype=np.float64).reshape(-1)
        reached: BoolArray = np.empty(lat.size, dtype=bool)
        step = max(1, _AT_ONCE // max(1, self.lats.size))
        for first in range(0, lat.size, step):
            part = slice(first, first + step)
            d = station_distances(lat[part], lon[part], self.lats, self.lons)
            reached[part] = (d < self.params.support_m).any(axis=1)
        return reached

    def at(
        self, lats: FloatArray, lons: FloatArray, backgrounds: FloatArray | None = None
    ) -> FloatArray:
        """The correction at each point (µg/m³), before persistence; `backgrounds` are the
        unfused values there at `middle` (the pattern the stations judged; needed where the
        fit keeps less than all of it; an unknown one counts as the mean). The points-by-
        stations matrices are built a slice of points at a time (`_AT_ONCE` cells), so a
        whole network against thousands of stations stays in bounded memory."""
        import numpy as np

        lat = np.asarray(lats, dtype=np.float64).reshape(-1)
        lon = np.asarray(lons, dtype=np.float64).reshape(-1)
        beta = self.params.background_share
        pattern = np.zeros(lat.size, dtype=np.float64)
        if backgrounds is not None and beta != 1.0:
            background = np.asarray(backgrounds, dtype=np.float64).reshape(-1)
            pattern = np.nan_to_num(background - self.background_mean) * (beta - 1.0)
        value: FloatArray = np.empty(lat.size, dtype=np.float64)
        step = max(1, _AT_ONCE // max(1, self.alpha.size))
        for first in range(0, lat.size, step):
            part = slice(first, first + step)
            if self.params.inverse_distance:
                d = station_distances(lat[part], lon[part], self.lats, self.lons)
                value[part] = support(d, self.params) * (
                    inverse_distance_weights(d) @ self.alpha + pattern[part]
                )
                continue
            k, d = self._covariances(lat[part], lon[part])
            value[part] = k @ self.alpha
            if beta != 1.0:
                value[part] += support(d, self.params) * pattern[part]
        return value

    def _kernel(self) -> FloatArray:
        import numpy as np

        d = station_distances(self.lats, self.lons, self.lats, self.lons)
        kernel: FloatArray = _correlated(d, self.params) + np.diag(
            self.site_share + self.params.noise_share
        )
        return kernel

    def weights(self, lats: FloatArray, lons: FloatArray) -> FloatArray:
        """k(x)ᵀ(K+N)⁻¹ for each point (a row): station j's residual enters the correction at
        a point with weight [row, j]. One solve over the stations: for a few points (the
        provenance of an answer), not a network."""
        import numpy as np

        k, d = self._covariances(
            np.asarray(lats, dtype=np.float64).reshape(-1),
            np.asarray(lons, dtype=np.float64).reshape(-1),
        )
        if self.params.inverse_distance:
            idw: FloatArray = support(d, self.params)[:, None] * inverse_distance_weights(d)
            return idw
        weights: FloatArray = np.asarray(np.linalg.solve(self._kernel(), k.T).T, dtype=np.float64)
        return weights

    def unexplained(self, lats: FloatArray, lons: FloatArray) -> FloatArray:
        """v(x) in (0, 1]: the residual's variance left at each point once the stations are
        known, as a share of its variance before (a station's noise counted, as a station
        there would measure it); exactly 1 beyond every station's support."""
        import numpy as np

        k, d = self._covariances(
            np.asarray(lats, dtype=np.float64).reshape(-1),
            np.asarray(lons, dtype=np.float64).reshape(-1),
        )
        explained = np.einsum("ij,ji->i", k, np.linalg.solve(self._kernel(), k.T))
        # A point in a traffic station's street shares that street's own variance.
        street = (self.site_share[None, :] * np.exp(-d / self.site_length_m[None, :])).max(axis=1)
        prior = 1.0 + self.params.mean_share + self.params.noise_share + street
        value: FloatArray = np.clip(1.0 - explained / prior, 1e-9, 1.0)
        return value


def residual_field(
    stations: Sequence[Station],
    residuals: Sequence[float],
    params: FusionParameters,
    hour_end: datetime,
    backgrounds: Sequence[float] | None = None,
) -> ResidualField:
    """The residual field of `residuals` (observation - background) observed at `stations`
    (one each, in order), whose unfused values were `backgrounds` (needed where `params`
    keep less than all of the background's pattern)."""
    import numpy as np

    lats = np.array([s.point.lat for s in stations], dtype=np.float64)
    lons = np.array([s.point.lon for s in stations], dtype=np.float64)
    sites = [_site(s, params) for s in stations]
    share = np.array([site[0] for site in sites], dtype=np.float64)
    length = np.array([site[1] for site in sites], dtype=np.float64)
    values = np.asarray(residuals, dtype=np.float64)
    mean = 0.0
    if backgrounds is not None and params.background_share != 1.0:
        background = np.asarray(backgrounds, dtype=np.float64)
        mean = float(background.mean())
        # r' = o - b - β (A - b) = r + (1 - β)(A - b)
        values = values + (1.0 - params.background_share) * (background - mean)
    field = ResidualField(
        params,
        lats,
        lons,
        share,
        length,
        np.zeros(len(stations), dtype=np.float64),
        hour_end,
        tuple(s.id for s in stations),
        mean,
    )
    if params.inverse_distance:  # the residuals themselves are weighted
        return attrs.evolve(field, alpha=values)
    # The site parts of two different stations are independent: only the diagonal has them.
    alpha: FloatArray = np.linalg.solve(field._kernel(), values).astype(np.float64)
    return attrs.evolve(field, alpha=alpha)


def uncertainty(
    params: FusionParameters, value: FloatArray, unexplained: FloatArray, fade: FloatArray
) -> FloatArray:
    """The standard error (µg/m³) of fused values: the background's own error
    (`background_error` of the value, never below `ERROR_FLOOR`'s) times v^q, v being the
    share of the residual's variance the stations leave (1 where none speaks, so there it is
    exactly the background's), with the correction's persistence `fade` (rho) giving back
    the unexplained share into the forecast: v(lead) = 1 - rho² (1 - v)."""
    import numpy as np

    rho = np.asarray(fade, dtype=np.float64)
    left = 1.0 - rho * rho * (1.0 - np.asarray(unexplained, dtype=np.float64))
    level = np.maximum(np.asarray(value, dtype=np.float64), ERROR_FLOOR)
    error: FloatArray = params.background_error * level * np.power(left, params.spread)
    return error


def interval90(value: float, standard_error: float) -> tuple[float, float]:
    """The 90 % interval of a value with this standard error, never below zero."""
    return max(0.0, value - Z90 * standard_error), value + Z90 * standard_error


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


def latest_hours_each(
    observations: Sequence[Observation], wanted: Iterable[datetime]
) -> dict[datetime, dict[Pollutant, HourObservations]]:
    """`latest_hours` of each wanted hour, the observations grouped once (a history asks
    for hundreds of hours: scanning them all for each would be quadratic)."""
    from bisect import bisect_right

    grouped: dict[Pollutant, dict[datetime, list[Observation]]] = {}
    for observation in observations:
        by_end = grouped.setdefault(observation.pollutant, {})
        by_end.setdefault(observation.hour_end, []).append(observation)
    ends = {pollutant: sorted(by_end) for pollutant, by_end in grouped.items()}
    found: dict[datetime, dict[Pollutant, HourObservations]] = {}
    for hour in wanted:
        chosen: dict[Pollutant, HourObservations] = {}
        for pollutant, sorted_ends in ends.items():
            at = bisect_right(sorted_ends, hour)
            if at and hour - sorted_ends[at - 1] <= MAX_LEAD:
                end = sorted_ends[at - 1]
                chosen[pollutant] = HourObservations(pollutant, end, tuple(grouped[pollutant][end]))
        found[hour] = chosen
    return found


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
    "DEFAULT_BACKGROUND_ERROR",
    "ERROR_FLOOR",
    "FUSION_PARAMETERS",
    "HOUR",
    "IDW_MIN_DISTANCE_M",
    "MAX_LEAD",
    "OBSERVED",
    "SUPPORT_RANGES",
    "Z90",
    "FusionParameters",
    "HourObservations",
    "ResidualField",
    "apply_residuals",
    "background_error",
    "interval90",
    "inverse_distance_weights",
    "latest_hours",
    "latest_hours_each",
    "observation_hour",
    "persistence",
    "residual_field",
    "station_distances",
    "support",
    "taper",
    "uncertainty",
]
