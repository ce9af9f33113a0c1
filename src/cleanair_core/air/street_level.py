"""Street-level air: a coarse background plus the local traffic increment, without double counting.

A background source (the embedded regional model, CAMS via Open-Meteo) gives one value per
grid cell; a CAMS Europe cell is about 11 x 6 km at 60 N, so a whole city centre gets one
number. The street-level value at a point x inside a loaded street network is

    C_p(x, t) = B_p(cell, t) + g(h) · (ΔC_p(x) - mean of ΔC_p over the cell)

with B the background source's value, ΔC_p the traffic increment of pollutant p at x at
daily-mean traffic (from the roads near x, see `TRAFFIC_EFFECTS`), g the daily traffic
profile at the local hour h (mean 1), and the mean taken over the whole of x's background cell
(as uEMEP does): the part the street networks cover weighs in with its mean increment, the
rest of the cell, whose roads are unknown, with the increment of the networks' quiet streets
(the `REMAINDER_QUANTILE` of the covered part's increments). The cell's own value already
contains its average traffic, so the mean is subtracted: averaged over the whole cell, with
its uncovered part at that quiet increment, the street-level values give back the background
(the uEMEP downscaling of MET Norway does the same: Denby et al. 2020, GMD 13:6303). A quiet
street thus keeps about the cell's value, the urban background, and the dense centre stands
above it.

The cell's value at an hour holds the cell's traffic of that hour, g(h) · mean, so that is
what is bounded: at most `MAX_LOCAL_SHARE` of the hour's value is taken to be local traffic.
Where the value is too small to contain it (a background model that misses a city, or small
cells over a dense centre at the traffic's peak) the rest is not subtracted, and the values
average above the background; what remains of B is then at least (1 - MAX_LOCAL_SHARE) · B.
A point's own traffic adds to that remainder R; where it lowers a value (ozone, titrated by
the traffic's NO), the fall is linear while it takes at most `MAX_LOCAL_SHARE` of R and
flattens beyond, as ozone does in the photostationary state (it falls as 1 / NO there), so it
never reaches zero. For any background above zero every value stays above zero without a
clip. Outside every loaded street network the background applies unchanged.

Every number and its source is in docs/science.md ("Street-level air").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypeAlias

import attrs

from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import (
    AirQualitySource,
    GriddedAir,
    Sample,
    answers_at_once,
)
from cleanair_core.offload import Offload, inline

# NumPy is imported by the functions that compute: the operator CLI's commands import this
# module and start faster without NumPy (tests/cleanair_runtime/test_cli_startup.py).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

FloatArray: TypeAlias = "npt.NDArray[np.float64]"


@attrs.frozen
class TrafficEffect:
    """How road traffic raises (or, for ozone, lowers) one pollutant near the road.

    `per_10k_vehicles`: the increment, µg/m³, on a long straight road carrying 10,000 vehicles
    a day, at daily-mean traffic; it scales linearly with the traffic of every road near a
    point and adds up over roads. `decay_m`: the e-folding distance of the fall with distance
    from the road; `reach_m`: beyond it the road adds nothing (the decay is shifted to reach 0
    there, with no step).
    """

    pollutant: Pollutant
    per_10k_vehicles: float
    decay_m: float
    reach_m: float


#: The street-level pollutants and their traffic effects (docs/science.md gives the source of
#: every number): NO2 is the traffic pollutant (ESCAPE street/background ratios 1.09-3.16,
#: Cyrys et al. 2012) and falls over a few hundred metres (Karner et al. 2010); ozone is
#: titrated by fresh NO next to traffic; particle mass (PM2.5 and PM10 alike) shows no clear
#: trend with distance from a road (Karner et al. 2010), so both share one broad, shallow
#: decay, and is "only about 10-30%" higher at the most traffic-exposed sites than at the
#: least (Janssen et al. 2008, Atmos. Environ. 42:1110), the contrast a_PM2.5 and a_PM10 are
#: calibrated to. SO2 from road traffic is negligible since sulphur-free fuels: no effect.
TRAFFIC_EFFECTS: tuple[TrafficEffect, ...] = (
    TrafficEffect(Pollutant.PM25, per_10k_vehicles=0.6, decay_m=200.0, reach_m=500.0),
    TrafficEffect(Pollutant.PM10, per_10k_vehicles=1.4, decay_m=200.0, reach_m=500.0),
    TrafficEffect(Pollutant.NO2, per_10k_vehicles=10.0, decay_m=60.0, reach_m=400.0),
    TrafficEffect(Pollutant.O3, per_10k_vehicles=-5.0, decay_m=60.0, reach_m=400.0),
)
STREET_POLLUTANTS: tuple[Pollutant, ...] = tuple(e.pollutant for e in TRAFFIC_EFFECTS)

#: Where a pedestrian is, seen from the road's centre line: one 3-3.3 m travel lane, a 1.8-2.5 m
#: parking lane and half of a 2.4 m sidewalk clear path (Global Street Design Guide, GDCI)
#: come to 6.0-7.0 m. The decay is measured from there (so a road's own value is finite),
#: which is also how Karner et al. (2010) measure distance: from the edge of the road.
KERB_OFFSET_M = 7.0

#: At most this share of a background cell's value at an hour is taken to be the cell's local
#: traffic of that hour, and a point's traffic lowers what remains of it (ozone) linearly by at
#: most this share before the fall flattens.
MAX_LOCAL_SHARE = 0.6

#: The part of a background cell no loaded network covers is taken to carry this quantile of
#: the covered part's increments: the network's quiet streets (docs/science.md).
REMAINDER_QUANTILE = 0.25

#: Motor traffic by local solar hour 0..23, relative to the daily mean (mean 1): the hourly
#: profile of road transport emissions of TNO for the MACC inventory (Denier van der Gon et al.
#: 2011; GNFR sector F), its columns 1-24 read as the hours 0-23. Night hours (22-06)
#: carry 0.14 of the day's (06-18) hourly flow; the EU noise working group's defaults used by
#: GeoClimate give 0.15-0.21 by road class.
_HOURLY_SHARES = (
    0.19, 0.09, 0.06, 0.05, 0.09, 0.22, 0.86, 1.84, 1.86, 1.41, 1.24, 1.20,
    1.32, 1.44, 1.45, 1.59, 2.03, 2.08, 1.51, 1.06, 0.74, 0.62, 0.61, 0.44,
)  # fmt: skip
TRAFFIC_PROFILE: tuple[float, ...] = tuple(
    share * 24.0 / sum(_HOURLY_SHARES) for share in _HOURLY_SHARES
)


def traffic_factor(lon: float, at: datetime) -> float:
    """g(h): traffic at local solar hour h (from `lon`) relative to the daily mean, linearly
    interpolated between hours so there is no step on the hour. `at` is timezone-aware."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("street-level air needs a timezone-aware datetime (UTC by convention)")
    hour = (at.timestamp() / 3600.0 + lon / 15.0) % 24.0
    h0 = int(hour) % 24
    fraction = hour - math.floor(hour)
    return TRAFFIC_PROFILE[h0] + fraction * (TRAFFIC_PROFILE[(h0 + 1) % 24] - TRAFFIC_PROFILE[h0])


def road_decay(distance_m: FloatArray, effect: TrafficEffect) -> FloatArray:
    """How much of a road's kerb effect reaches `distance_m` from its centre line, before
    normalisation: exp(-d'/L) - exp(-R/L) with d' = sqrt(d² + kerb²), 0 at d' >= R."""
    import numpy as np

    d = np.sqrt(np.square(np.asarray(distance_m, dtype=np.float64)) + KERB_OFFSET_M**2)
    floor = math.exp(-effect.reach_m / effect.decay_m)
    value: FloatArray = np.where(
        d < effect.reach_m, np.exp(-d / effect.decay_m) - floor, 0.0
    ).astype(np.float64)
    return value


def straight_road_integral(effect: TrafficEffect, step_m: float = 0.25) -> float:
    """∫ road_decay along a long straight road, seen from its centre line (metres): the
    normalisation that makes such a road of 10,000 vehicles a day give `per_10k_vehicles`."""
    import numpy as np

    s = np.arange(-effect.reach_m, effect.reach_m + step_m, step_m)
    return float(np.trapezoid(road_decay(s, effect), s))


@attrs.frozen
class GridCell:
    """The area one value of a background source stands for (degrees)."""

    south: float
    west: float
    north: float
    east: float


class BackgroundGrid(Protocol):
    """Which grid cell of a background source a point takes its value from."""

    def cell_of(self, lat: float, lon: float) -> GridCell: ...


class TrafficIncrements(Protocol):
    """The traffic increment of each of `STREET_POLLUTANTS` (µg/m³, daily-mean traffic) from
    the loaded street networks: an adapter computes it from their roads."""

    def at(self, lats: FloatArray, lons: FloatArray) -> FloatArray:
        """One row per point, one column per `STREET_POLLUTANTS`; NaN rows for points outside
        every network (there the background alone applies)."""
        ...

    def cell_mean(self, cell: GridCell) -> FloatArray | None:
        """The mean increment over the whole of `cell`, its part outside every network taken at
        the networks' quiet increment (`REMAINDER_QUANTILE`); None: no network reaches it."""
        ...


#: Below this share of the background, a falling value (ozone titrated by a road's NO) no
#: longer falls linearly but as θ² / (2θ - D), D the linear value and θ this share of B: it
#: meets the line with the same value and slope, falls towards zero as 1 / D without
#: reaching it, and depends on the linear value alone, so more traffic never raises it (B
#: does not move with traffic).
_TAIL_SHARE = 1.0 - MAX_LOCAL_SHARE


def street_value(background: float, local: float, cell_mean: float, traffic: float) -> float:
    """One pollutant's street-level value: B + g · (ΔC(x) - mean ΔC over the cell), the
    subtracted cell traffic g · mean at most `MAX_LOCAL_SHARE` of B, a fall below what remains
    flattening (see the module documentation). Above zero whenever `background` is."""
    # The cell's value at this hour holds its traffic of this hour: take that out, but never
    # more than MAX_LOCAL_SHARE of the value (for ozone the mean is negative: the cell lost it
    # to traffic, and it is given back).
    held = traffic * cell_mean
    if held > 0.0:
        held = min(held, MAX_LOCAL_SHARE * background)
    linear = background - held + traffic * local
    floor = _TAIL_SHARE * background
    if linear >= floor:
        return linear
    # Titration cannot take more ozone than there is: below the floor the fall flattens
    # towards zero, as the photostationary state's ozone does (as 1 / NO).
    return floor * floor / (2.0 * floor - linear)


def downscale(
    background: Concentrations,
    local: Sequence[float],
    cell_mean: Sequence[float],
    traffic: float,
) -> Concentrations:
    """`street_value` for each street pollutant (see the module documentation); pollutants
    the background does not know stay unknown."""
    result = dict(background)
    for index, pollutant in enumerate(STREET_POLLUTANTS):
        value = background.get(pollutant)
        if value is None:
            continue
        result[pollutant] = street_value(value, local[index], cell_mean[index], traffic)
    if (pm25 := result.get(Pollutant.PM25)) is not None and (
        pm10 := result.get(Pollutant.PM10)
    ) is not None:
        result[Pollutant.PM10] = max(pm10, pm25)  # PM10 contains PM2.5
    return result


def traffic_factors(lons: FloatArray, at: datetime) -> FloatArray:
    """`traffic_factor` for many longitudes at one time."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("street-level air needs a timezone-aware datetime (UTC by convention)")
    return traffic_factors_at(lons, at.timestamp())


def traffic_factors_at(lons: FloatArray, timestamps: FloatArray | float) -> FloatArray:
    """`traffic_factor` for many longitudes, each at its time (POSIX seconds, as
    `datetime.timestamp` gives them): the same values, bit for bit."""
    import numpy as np

    hour = (
        np.asarray(timestamps, dtype=np.float64) / 3600.0
        + np.asarray(lons, dtype=np.float64) / 15.0
    ) % 24.0
    h0 = np.floor(hour).astype(np.int64) % 24
    profile = np.asarray(TRAFFIC_PROFILE)
    factors: FloatArray = profile[h0] + (hour - np.floor(hour)) * (
        profile[(h0 + 1) % 24] - profile[h0]
    )
    return factors


#: Where each street pollutant sits among the `SCORED` columns of an array of air.
_SCORED_COLUMN = tuple(SCORED.index(pollutant) for pollutant in STREET_POLLUTANTS)


def downscale_rows(
    background: FloatArray, local: FloatArray, cell_mean: FloatArray, traffic: FloatArray
) -> FloatArray:
    """`downscale` for many points: `background` has a row per point and a column per
    `SCORED` pollutant (NaN unknown), `local` and `cell_mean` a column per street pollutant,
    `traffic` one factor per point."""
    import numpy as np

    result = np.array(background, dtype=np.float64)
    for index, column in enumerate(_SCORED_COLUMN):
        value = result[:, column]
        held = traffic * cell_mean[:, index]
        held = np.where(held > 0.0, np.minimum(held, MAX_LOCAL_SHARE * value), held)
        linear = value - held + traffic * local[:, index]
        floor = _TAIL_SHARE * value
        tail = linear < floor  # False where the background is unknown (NaN)
        # The divisor is above θ where the tail applies; 1 elsewhere keeps off warnings.
        divisor = np.where(tail, 2.0 * floor - linear, 1.0)
        result[:, column] = np.where(tail, floor * floor / divisor, linear)
    pm25, pm10 = SCORED.index(Pollutant.PM25), SCORED.index(Pollutant.PM10)
    result[:, pm10] = np.fmax(result[:, pm10], result[:, pm25])  # PM10 contains PM2.5
    result[:, pm10] = np.where(np.isnan(background[:, pm10]), np.nan, result[:, pm10])
    return result


#: Up to this many samples (a score, a route's waypoints) are downscaled right where they are
#: asked for (microseconds each); more (a plan's nodes) go to the offload.
DOWNSCALED_HERE = 128


class StreetLevelAir:
    """An `AirQualitySource`: any background source, downscaled to street level.

    `grid` says which cell of `background` a point's value stands for; `increments` gives the
    traffic increments of the loaded networks. The update interval is the background's.
    `offload` runs the downscaling of large batches (CPU work: keep it off the event loop).
    """

    def __init__(
        self,
        background: AirQualitySource,
        grid: BackgroundGrid,
        increments: TrafficIncrements,
        offload: Offload = inline,
    ) -> None:
        self.background = background
        self.update_interval = background.update_interval
        self._grid = grid
        self._offload = offload
        # The increments and the cell means computed from them, swapped together as one
        # value (`replace_increments`): a computation reads both from one snapshot, so it
        # never mixes networks, nor stores a mean of the old ones among the new ones'.
        self._current: tuple[TrafficIncrements, dict[GridCell, FloatArray | None]] = (
            increments,
            {},
        )

    def replace_increments(self, increments: TrafficIncrements) -> None:
        """Downscale with `increments` from now on: the street networks were reloaded."""
        self._current = (increments, {})

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        """The background's answer for each sample, downscaled where a network covers it."""
        answers = await self.background.concentrations(samples)
        if len(samples) <= DOWNSCALED_HERE:
            return self._downscaled(samples, answers)
        return await self._offload(lambda: self._downscaled(samples, answers))

    def answers_at_once(self, samples: Sequence[Sample]) -> bool:
        """See `CachingAir`: the downscaling is computed here; the background may wait."""
        return answers_at_once(self.background, samples)

    def _downscaled(
        self, samples: Sequence[Sample], answers: list[Concentrations]
    ) -> list[Concentrations]:
        import numpy as np

        current = self._current
        if len(samples) == 1:
            # A score asks for one point: no generator, no index array (this path is most of a
            # served score's air; it gives what the batch path below gives, see the tests).
            answers[0] = self._downscaled_one(current, samples[0], answers[0])
            return answers
        lats = np.fromiter((s.point.lat for s in samples), dtype=np.float64, count=len(samples))
        lons = np.fromiter((s.point.lon for s in samples), dtype=np.float64, count=len(samples))
        local = current[0].at(lats, lons)
        for index in np.flatnonzero(~np.isnan(local[:, 0])).tolist():
            sample = samples[index]
            mean = self._cell_mean(current, sample.point.lat, sample.point.lon)
            if mean is None:
                continue
            answers[index] = downscale(
                answers[index],
                local[index].tolist(),
                mean.tolist(),
                traffic_factor(sample.point.lon, sample.at),
            )
        return answers

    def _downscaled_one(
        self, current: _Current, sample: Sample, answer: Concentrations
    ) -> Concentrations:
        """`_downscaled` of one sample: the background's `answer` where no network covers it."""
        import numpy as np

        lat, lon = sample.point.lat, sample.point.lon
        # Increments that answer one point in plain floats (`NetworkIncrements.at_one`) give
        # the row `at` gives, without setting up arrays: a third of a score's street level.
        at_one = getattr(current[0], "at_one", None)
        if at_one is not None:
            local: list[float] | None = at_one(lat, lon)
        else:
            local = current[0].at(np.array([lat]), np.array([lon]))[0].tolist()
        if local is None or math.isnan(local[0]):
            return answer
        mean = self._cell_mean(current, lat, lon)
        if mean is None:
            return answer
        return downscale(answer, local, mean.tolist(), traffic_factor(lon, sample.at))

    def _cell_means_of(self, current: _Current, lats: FloatArray, lons: FloatArray) -> FloatArray:
        """Each point's cell mean (a row per point; NaN where the networks miss its cell).

        One `cell_of` per cell, not per point (a plan asks for tens of thousands of points
        in a few hundred cells): the cell of the first point not yet placed, then every
        point well inside that cell's box, which is that cell's too (a grid's cells do
        not overlap); a point on a border, or within rounding of one, is placed by its own
        `cell_of`."""
        import numpy as np

        means = np.full((lats.size, len(STREET_POLLUTANTS)), np.nan)
        order = np.argsort(lats, kind="stable")
        lat, lon = lats[order], lons[order]
        placed = np.zeros(lats.size, dtype=np.bool_)
        first = 0
        while first < lats.size:
            cell = self._grid.cell_of(float(lat[first]), float(lon[first]))
            lo = int(np.searchsorted(lat, cell.south + _BORDER_DEG, side="right"))
            hi = int(np.searchsorted(lat, cell.north - _BORDER_DEG, side="left"))
            band = np.arange(lo, hi)
            inside = (lon[band] > cell.west + _BORDER_DEG) & (lon[band] < cell.east - _BORDER_DEG)
            band = band[~placed[band] & inside]
            members = np.append(band, first)
            placed[members] = True
            mean = self._mean_of(current, cell)
            if mean is not None:
                means[order[members]] = mean
            rest = np.flatnonzero(~placed[first:])
            first = first + int(rest[0]) if rest.size else lats.size
        return means

    def _cell_mean(self, current: _Current, lat: float, lon: float) -> FloatArray | None:
        return self._mean_of(current, self._grid.cell_of(lat, lon))

    def _mean_of(self, current: _Current, cell: GridCell) -> FloatArray | None:
        increments, cell_means = current
        try:
            return cell_means[cell]
        except KeyError:
            mean = increments.cell_mean(cell)
            if len(cell_means) >= _CELL_MEANS_KEPT:
                cell_means.clear()  # bounded: a few cells cover any city
            cell_means[cell] = mean
            return mean


_CELL_MEANS_KEPT = 4096
#: Points this near a cell's border (degrees; 0.1 mm) are placed by `cell_of` itself: a
#: grid's own borders are computed in floating point, and neighbours may overlap by rounding.
_BORDER_DEG = 1e-9
_Current = tuple[TrafficIncrements, dict[GridCell, "FloatArray | None"]]


class GriddedStreetLevelAir(StreetLevelAir):
    """`StreetLevelAir` over a background that computes its values (`GriddedAir`): it can
    answer many points at one time as one array, in NumPy, off the event loop."""

    def __init__(
        self,
        background: GriddedAir,
        grid: BackgroundGrid,
        increments: TrafficIncrements,
        offload: Offload = inline,
    ) -> None:
        super().__init__(background, grid, increments, offload)
        self._gridded = background

    def air_at_hour(self, lats: FloatArray, lons: FloatArray, hour: datetime) -> FloatArray:
        """See `GriddedAir.air_at_hour`: the background's array, downscaled where a network
        covers a point (the same values `concentrations` gives)."""
        import numpy as np

        if hour.tzinfo is None or hour.utcoffset() is None:
            raise ValueError("street-level air needs a timezone-aware datetime (UTC by convention)")
        lat = np.asarray(lats, dtype=np.float64).reshape(-1)
        lon = np.asarray(lons, dtype=np.float64).reshape(-1)
        return self._street_rows(
            self._gridded.air_at_hour(lat, lon, hour), lat, lon, np.array(hour.timestamp())
        )

    def air_at_times(
        self, lats: FloatArray, lons: FloatArray, timestamps: FloatArray
    ) -> FloatArray | None:
        """See `AirAtTimes`: the background's values of each point at its own time,
        downscaled where a network covers it, equal to `concentrations`' bit for bit; None
        when the background cannot answer so."""
        import numpy as np

        background = getattr(self._gridded, "air_at_times", None)
        if background is None:
            return None
        lat = np.asarray(lats, dtype=np.float64).reshape(-1)
        lon = np.asarray(lons, dtype=np.float64).reshape(-1)
        times = np.asarray(timestamps, dtype=np.float64).reshape(-1)
        air: FloatArray | None = background(lat, lon, times)
        if air is None:
            return None
        return self._street_rows(air, lat, lon, times)

    def _street_rows(
        self, air: FloatArray, lat: FloatArray, lon: FloatArray, timestamps: FloatArray
    ) -> FloatArray:
        """`air` (the background's rows of the points) downscaled where a network covers a
        point; `timestamps` one time for all, or one per point."""
        import numpy as np

        current = self._current
        local = current[0].at(lat, lon)
        inside = np.flatnonzero(~np.isnan(local[:, 0]))
        if inside.size == 0:
            return air
        means = self._cell_means_of(current, lat[inside], lon[inside])
        covered = inside[~np.isnan(means[:, 0])]
        means = means[~np.isnan(means[:, 0])]
        times = timestamps if timestamps.ndim == 0 else timestamps[covered]
        air[covered] = downscale_rows(
            air[covered], local[covered], means, traffic_factors_at(lon[covered], times)
        )
        return air


def street_level_air(
    background: AirQualitySource,
    grid: BackgroundGrid,
    increments: TrafficIncrements,
    offload: Offload = inline,
) -> StreetLevelAir:
    """`background` downscaled to street level: gridded (array answers, off the event loop)
    when the background computes its values, else sample by sample; large batches of
    samples are downscaled on `offload`."""
    if isinstance(background, GriddedAir):
        return GriddedStreetLevelAir(background, grid, increments, offload)
    return StreetLevelAir(background, grid, increments, offload)
