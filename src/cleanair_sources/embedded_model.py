"""The embedded air-quality model: plausible, explainable concentrations, offline.

This is a MODEL, not measurements. It gives every place on Earth, at every hour, values of the
five scored pollutants that have the right order of magnitude and the right patterns (polluted
regions worse than remote ones, cities worse than the countryside, rush hours, afternoon ozone,
quieter Sundays, good and bad days), so that the service works with no network and no key.
For real data use the Open-Meteo source (CAMS forecasts). Every formula and number is
explained in docs/air-quality-model.md.

For pollutant p at point x and time t (µg/m³):

    C_p = [ B_p(x) · Db_p(h)                                   regional background
          + (m_p · B_p(x) + a_p) · I(x) · Dt_p(h) · W_p(d) ]   urban increment
          · S_p(t, lat) · M_p(x, t)                            season, weather

with B the regional background field, I the gazetteer's urban intensity (0..1), h the local
solar hour, d the local day of the week, Db/Dt the background and
traffic-related daily cycles, W the weekly cycle, S the seasonal cycle and M the day-to-day
"weather" factor. Ozone instead falls with I (titration by fresh NO):

    O3 = B_O3(x) · Db_O3(h) · (1 - tau·I · Dt_NO2(h) · W_NO2(d)) · S_O3 · M_O3

and PM10 is never below PM2.5 (PM10 contains PM2.5). The static fields are evaluated at the
centres of 0.01 degree cells (`cell_of`), the model's grid: street-level detail inside a cell
comes from the downscaling over it (`cleanair_core.air.street_level`), as over any source.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import math
import struct
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import NamedTuple

import numpy as np

from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.air.street_level import FloatArray, GridCell
from cleanair_core.geo import Point
from cleanair_sources.gazetteer import Gazetteer

# =================================================================================================
# Parameters. Every 5-vector is ordered PM2.5, PM10, NO2, O3, SO2 (pollutants.SCORED), µg/m³.
# Annual means are rounded orders of magnitude from the sources named; where a number is a
# chosen calibration, it says so. They are meant to be plausible, not to match a station.
# =================================================================================================


class Region(NamedTuple):
    """An anisotropic Gaussian bump of the annual-mean regional background."""

    name: str
    lat: float
    lon: float
    sigma_lat: float  # degrees
    sigma_lon: float  # degrees of arc along the parallel at `lat` (1° ≈ 111 km)
    increment: tuple[float, float, float, float, float]  # at the centre, µg/m³


#: Remote background everywhere (clean marine / polar air): PM2.5 ~2 and PM10 ~6 (sea salt and
#: dust; WHO 2021 AQG background review), NO2 ~0.5 (≈0.3 ppb, remote boundary layer), O3 ~40
#: (≈20 ppb, tropical marine boundary layer; Monks et al. 2015), SO2 ~0.3.
FLOOR = (2.0, 6.0, 0.5, 40.0, 0.3)

#: Latitude bands (centre, sigma in degrees, increment): the northern mid-latitude band where
#: most people, industry and ozone precursors are (hemispheric O3 background ≈35 ppb ≈70 µg/m³
#: at 40°N; TOAR 2018), and a weaker southern one.
LATITUDE_BANDS: tuple[tuple[float, float, tuple[float, float, float, float, float]], ...] = (
    (40.0, 15.0, (2.5, 4.0, 1.5, 30.0, 0.7)),
    (-38.0, 15.0, (0.5, 1.0, 0.2, 10.0, 0.1)),
)

#: Polluted regions. Increments are chosen so that regional (rural) annual means land near
#: satellite-derived surface PM2.5 (van Donkelaar et al. 2021, ACAG V5), OMI/TROPOMI NO2 and
#: SO2 hotspots (Krotkov et al. 2016; Li et al. 2017 for India), and the WHO 2022 ambient air
#: quality database for cities inside them. Sigmas are chosen to cover each region.
REGIONS: tuple[Region, ...] = (
    # South Asia: the Indo-Gangetic Plain is the most PM-polluted region on Earth (60-100 rural).
    Region("Indo-Gangetic Plain", 27.0, 81.0, 3.0, 7.0, (65.0, 110.0, 12.0, 5.0, 6.0)),
    Region("Punjab and Lahore", 31.0, 73.5, 2.5, 3.5, (35.0, 60.0, 6.0, 0.0, 3.0)),
    Region("Bengal delta", 23.8, 89.5, 2.5, 3.0, (25.0, 35.0, 4.0, 0.0, 2.0)),
    # Coal belt of Odisha/Jharkhand/Chhattisgarh: India's SO2 hotspot (Li et al. 2017).
    Region("Central India coal belt", 22.0, 83.0, 5.0, 7.0, (15.0, 30.0, 4.0, 5.0, 8.0)),
    # East Asia: North China Plain (Hebei/Shandong/Henan, 40-60 PM2.5 around 2020).
    Region("North China Plain", 37.0, 115.5, 3.5, 3.5, (25.0, 45.0, 10.0, 10.0, 8.0)),
    Region("Yangtze and Sichuan", 30.5, 112.0, 5.0, 8.0, (20.0, 30.0, 8.0, 8.0, 5.0)),
    Region("Korea and Kanto", 36.5, 131.0, 2.5, 7.0, (5.0, 8.0, 6.0, 5.0, 1.0)),
    # Dust: Sahara-Sahel belt and Bodele (PM10 annual 100-200 in the Sahel), Arabia, Tarim.
    Region("Sahara-Sahel dust belt", 17.0, 5.0, 6.0, 22.0, (25.0, 90.0, 1.0, 10.0, 0.5)),
    Region("Bodele depression", 16.5, 18.0, 3.0, 5.0, (15.0, 60.0, 0.0, 0.0, 0.0)),
    Region("Middle East", 27.0, 46.0, 7.0, 10.0, (30.0, 80.0, 6.0, 15.0, 8.0)),
    Region("Nile delta", 30.0, 31.0, 1.5, 1.5, (25.0, 50.0, 5.0, 0.0, 3.0)),
    Region("Iranian plateau", 34.0, 52.0, 4.0, 6.0, (10.0, 25.0, 8.0, 5.0, 6.0)),
    Region("Tarim basin (Taklamakan)", 39.0, 83.0, 2.5, 7.0, (25.0, 120.0, 0.0, 0.0, 0.0)),
    # Europe (EEA Air quality in Europe 2022: rural PM2.5 ~8-12, Po Valley and Poland ~20-25).
    Region("Western Europe (Benelux, Ruhr)", 51.0, 5.0, 3.5, 6.0, (5.0, 5.0, 9.0, 0.0, 1.0)),
    Region("Central Europe and Balkans", 48.0, 20.0, 4.0, 8.0, (9.0, 12.0, 4.0, 0.0, 3.0)),
    Region("Po Valley", 45.2, 10.5, 1.0, 2.5, (12.0, 15.0, 10.0, 0.0, 0.5)),
    Region("Mediterranean ozone", 38.0, 15.0, 6.0, 15.0, (0.0, 0.0, 0.0, 20.0, 0.0)),
    # Americas.
    Region("Eastern North America", 39.0, -84.0, 6.0, 10.0, (2.5, 4.0, 4.0, 0.0, 1.5)),
    Region("California valleys", 35.5, -119.0, 2.5, 2.5, (6.0, 12.0, 4.0, 15.0, 0.0)),
    Region("Valley of Mexico", 19.4, -99.1, 1.5, 1.5, (10.0, 20.0, 8.0, 15.0, 2.0)),
    Region("Amazon burning arc", -10.0, -60.0, 5.0, 8.0, (6.0, 8.0, 0.5, 5.0, 0.0)),
    Region("Central Chile", -33.5, -70.6, 1.0, 1.0, (12.0, 20.0, 4.0, 0.0, 1.0)),
    Region("Southeast Brazil", -23.0, -46.5, 2.0, 3.0, (5.0, 10.0, 5.0, 10.0, 1.0)),
    # Africa: the Highveld power stations are a global NO2/SO2 hotspot (Lourens et al. 2012).
    Region("Highveld", -26.3, 29.0, 2.0, 2.5, (12.0, 20.0, 12.0, 0.0, 18.0)),
    Region("Gulf of Guinea", 7.5, 4.0, 3.5, 8.0, (15.0, 25.0, 2.0, 0.0, 0.5)),
    Region("Central African burning", -7.0, 22.0, 7.0, 10.0, (12.0, 18.0, 1.0, 10.0, 0.0)),
    # Rest of Asia.
    Region("Mainland Southeast Asia", 17.0, 101.0, 5.0, 6.0, (12.0, 18.0, 3.0, 5.0, 1.0)),
    Region("Java", -7.0, 110.0, 2.0, 5.0, (10.0, 15.0, 4.0, 0.0, 2.0)),
    Region("Tibetan plateau ozone", 32.0, 88.0, 4.0, 8.0, (0.0, 0.0, 0.0, 20.0, 0.0)),
    # Norilsk smelters: the largest point source of SO2 on Earth (Krotkov et al. 2016).
    Region("Norilsk", 69.35, 88.2, 1.0, 2.0, (2.0, 4.0, 1.0, 0.0, 30.0)),
)

#: Urban increment at intensity 1 (a megacity centre): relative m_p (times the regional
#: background) and absolute a_p. Chosen calibration after the "Lenschow" urban increment
#: (Lenschow et al. 2001: urban PM is regional plus 20-40 %) and EEA urban-background NO2
#: (25-40 in big European cities against 5-15 rural).
URBAN_RELATIVE = (0.25, 0.25, 0.30, 0.0, 0.10)
URBAN_ABSOLUTE = (2.0, 4.0, 20.0, 0.0, 1.0)
#: Ozone titration: urban O3 is 10-30 % below rural (NO + O3 -> NO2). tau at intensity 1,
#: scaled by the NO2 traffic cycle. Chosen calibration; tau < 1 keeps O3 > 0.
O3_TITRATION_URBAN = 0.25

#: Daily cycles in local solar time (hour 0..23), normalised to mean 1 when the model is built.
#: Shapes follow typical urban monitoring-station climatologies (e.g. EEA AirBase hourly
#: profiles): NO2 rush hours at ~08 and ~18-19 with a night minimum; PM smaller morning and
#: evening peaks (traffic, heating, shallow night-time boundary layer); O3 photochemical peak at
#: ~15 and minimum before sunrise; SO2 a midday peak when elevated plumes mix down.
DIURNAL_NO2 = (0.85, 0.75, 0.68, 0.62, 0.62, 0.70, 0.95, 1.30, 1.45, 1.35, 1.15, 1.00,
               0.92, 0.88, 0.88, 0.92, 1.02, 1.20, 1.35, 1.35, 1.25, 1.12, 1.02, 0.92)  # fmt: skip
DIURNAL_PM = (1.05, 1.00, 0.96, 0.93, 0.92, 0.95, 1.02, 1.10, 1.15, 1.10, 1.00, 0.92,
              0.86, 0.82, 0.80, 0.82, 0.88, 0.98, 1.08, 1.15, 1.18, 1.17, 1.13, 1.09)  # fmt: skip
DIURNAL_O3 = (0.80, 0.75, 0.70, 0.66, 0.63, 0.61, 0.62, 0.68, 0.78, 0.90, 1.04, 1.17,
              1.28, 1.37, 1.43, 1.45, 1.42, 1.34, 1.22, 1.10, 1.00, 0.93, 0.87, 0.83)  # fmt: skip
DIURNAL_SO2 = (0.85, 0.83, 0.82, 0.82, 0.83, 0.86, 0.92, 1.00, 1.10, 1.18, 1.23, 1.25,
               1.24, 1.20, 1.14, 1.07, 1.02, 0.98, 0.95, 0.93, 0.91, 0.89, 0.88, 0.86)  # fmt: skip
#: Which cycle each pollutant follows, and how much of it the regional background shows
#: (k: Db = 1 + k·(D - 1)); the urban increment follows it fully. Chosen: rural NO2
#: and PM cycles are weaker than urban ones; ozone's cycle is regional.
DIURNAL_OF = (DIURNAL_PM, DIURNAL_PM, DIURNAL_NO2, DIURNAL_O3, DIURNAL_SO2)
BACKGROUND_DIURNAL_SHARE = (0.4, 0.4, 0.4, 1.0, 1.0)

#: Weekly cycle of the urban increment, Monday..Sunday, normalised to mean 1 when the
#: model is built: NO2 columns over Western cities are 25-50 % lower on Sundays (Beirle et al.
#: 2003, ACP 3:2225); PM has a weak weekly cycle. SO2 (power, industry) has none.
WEEKLY_NO2 = (1.06, 1.08, 1.08, 1.08, 1.10, 0.90, 0.70)
WEEKLY_PM = (1.02, 1.03, 1.03, 1.03, 1.04, 0.97, 0.88)
WEEKLY_FLAT = (1.0,) * 7
WEEKLY_OF = (WEEKLY_PM, WEEKLY_PM, WEEKLY_NO2, WEEKLY_FLAT, WEEKLY_FLAT)

#: Seasonal cycle S = 1 + A·H(lat)·cos(2π(day - peak)/365.2422), H = clamp(lat / 25°, -1, 1)
#: (opposite in the southern hemisphere, fading in the tropics). Winter maxima of NO2, SO2 and
#: PM (heating, shallow boundary layer; NO2 winter/summer ≈ 1.7 at EEA stations), spring-summer
#: maximum of O3 (day ~160). Amplitudes are a chosen calibration.
SEASON_AMPLITUDE = (0.25, 0.10, 0.25, 0.20, 0.25)
SEASON_PEAK_DAY = (15.0, 15.0, 15.0, 160.0, 15.0)
SEASON_TROPICS_DEG = 25.0

#: Day-to-day "weather": two variables z1, z2 with mean 0 and variance 1 per node of a 5° grid
#: (~550 km, the scale of synoptic weather systems) and UTC day (valid at 12:00 UTC), from
#: BLAKE2b of the node and day, interpolated smoothly in space and time with variance-preserving
#: weights and clipped to ±3. z1 (stagnation) drives PM, NO2 and SO2, z2 (sunshine) drives O3:
#: M = exp(s·z - s²/2). s gives daily geometric standard deviations of ~1.5 for PM and ~1.4 for
#: NO2, as in European urban daily series. Chosen calibration.
WEATHER_SIGMA = (0.45, 0.40, 0.35, 0.20, 0.40)
WEATHER_GRID_DEG = 5.0
WEATHER_Z_LIMIT = 3.0

# =================================================================================================

_DEG = math.pi / 180.0
_TROPICAL_YEAR = 365.2422
_WEATHER_NODES_LON = round(360.0 / WEATHER_GRID_DEG)
#: Samples computed between two hand-backs to the event loop (a few milliseconds of work).
YIELD_EVERY = 256
_CELL_QUANTUM = 100  # static fields are evaluated at 0.01° cell centres and cached
_CELL_CACHE_SIZE = 1 << 17
_WEATHER_CACHE_SIZE = 1 << 16
_DAYS_PER_DIGEST = 4
# The sum of two uniform 32-bit words has mean 2^32 - 1 and variance 2·(2^64 - 1)/12.
_TRIANGULAR_OFFSET = 4294967295.0
_TRIANGULAR_SCALE = 1.0 / math.sqrt(2.0 * (18446744073709551616.0 - 1.0) / 12.0)
_NODE_KEY = struct.Struct("<iiq")
_NODE_WORDS = struct.Struct("<16I")


def _normalised(values: Sequence[float]) -> tuple[float, ...]:
    """Scaled to mean 1, with the first value repeated at the end (for wrap-around lookups)."""
    mean = sum(values) / len(values)
    scaled = tuple(v / mean for v in values)
    return (*scaled, scaled[0])


def _smoothstep(f: float) -> float:
    return f * f * (3.0 - 2.0 * f)


class EmbeddedModel:
    """The default `AirQualitySource`: a deterministic, offline model (not measurements).

    Its values stand for 0.01 degree cells (`cell_of`); loaded street networks add the
    street level on top (`cleanair_core.air.street_level.StreetLevelAir`).
    """

    #: Hourly values.
    update_interval: int = 3600

    def __init__(self, gazetteer: Gazetteer) -> None:
        self._gazetteer = gazetteer
        self._diurnal = tuple(_normalised(profile) for profile in DIURNAL_OF)
        self._weekly = tuple(_normalised(profile) for profile in WEEKLY_OF)
        # Regions with precomputed 1/(2s²) terms and how far (in degrees²) they are worth adding.
        self._regions = tuple(
            (
                r.lat,
                r.lon,
                0.5 / r.sigma_lat**2,
                0.5 * (math.cos(r.lat * _DEG) / r.sigma_lon) ** 2,
                # beyond 4 sigma a region adds < 0.04 % of its peak: skip it
                (4.0 * r.sigma_lat) ** 2,
                (4.0 * r.sigma_lon / max(math.cos(r.lat * _DEG), 1e-6)) ** 2,
                r.increment,
            )
            for r in REGIONS
        )
        phases = [2.0 * math.pi * day / _TROPICAL_YEAR for day in SEASON_PEAK_DAY]
        self._season_cos = tuple(
            a * math.cos(p) for a, p in zip(SEASON_AMPLITUDE, phases, strict=True)
        )
        self._season_sin = tuple(
            a * math.sin(p) for a, p in zip(SEASON_AMPLITUDE, phases, strict=True)
        )
        self._cell = functools.lru_cache(maxsize=_CELL_CACHE_SIZE)(self._compute_cell)
        self._weather_block = functools.lru_cache(maxsize=_WEATHER_CACHE_SIZE)(
            self._compute_weather_block
        )

    # --- static fields ---------------------------------------------------------------------------

    def background(self, point: Point) -> tuple[float, ...]:
        """The regional annual-mean background B_p at a point (PM2.5, PM10, NO2, O3, SO2)."""
        return self._background_at(point.lat, point.lon)

    def _background_at(self, lat: float, lon: float) -> tuple[float, ...]:
        pm25, pm10, no2, o3, so2 = FLOOR
        for centre, sigma, (a, b, c, d, e) in LATITUDE_BANDS:
            weight = math.exp(-0.5 * ((lat - centre) / sigma) ** 2)
            pm25 += a * weight
            pm10 += b * weight
            no2 += c * weight
            o3 += d * weight
            so2 += e * weight
        for rlat, rlon, klat, klon, lat_reach2, lon_reach2, (a, b, c, d, e) in self._regions:
            dlat = lat - rlat
            dlat2 = dlat * dlat
            if dlat2 > lat_reach2:
                continue
            dlon = lon - rlon
            if dlon > 180.0:
                dlon -= 360.0
            elif dlon < -180.0:
                dlon += 360.0
            dlon2 = dlon * dlon
            if dlon2 > lon_reach2:
                continue
            weight = math.exp(-dlat2 * klat - dlon2 * klon)
            pm25 += a * weight
            pm10 += b * weight
            no2 += c * weight
            o3 += d * weight
            so2 += e * weight
        return pm25, pm10, no2, o3, so2

    def _compute_cell(self, qlat: int, qlon: int) -> tuple[float, ...]:
        """What does not change with time in a 0.01° cell, at its centre.

        (B for the five pollutants; the urban increments (m·B + a)·I of PM2.5, PM10, NO2 and
        SO2; the urban titration tau·I; the hemisphere weight H(lat) of the seasonal cycle.)
        """
        lat = min(max(qlat / _CELL_QUANTUM, -90.0), 90.0)
        lon = min(max(qlon / _CELL_QUANTUM, -180.0), 180.0)
        pm25, pm10, no2, o3, so2 = self._background_at(lat, lon)
        intensity = self._gazetteer.urban_intensity(Point(lat, lon))
        m_pm25, m_pm10, m_no2, _, m_so2 = URBAN_RELATIVE
        a_pm25, a_pm10, a_no2, _, a_so2 = URBAN_ABSOLUTE
        return (
            pm25,
            pm10,
            no2,
            o3,
            so2,
            (m_pm25 * pm25 + a_pm25) * intensity,
            (m_pm10 * pm10 + a_pm10) * intensity,
            (m_no2 * no2 + a_no2) * intensity,
            (m_so2 * so2 + a_so2) * intensity,
            O3_TITRATION_URBAN * intensity,
            min(max(lat / SEASON_TROPICS_DEG, -1.0), 1.0),
        )

    # --- weather ---------------------------------------------------------------------------------

    def _weather_words(self, i: int, j: int, chunk: int) -> tuple[int, ...]:
        """16 pseudo-random 32-bit words for grid node (i, j) over the four days from
        4·chunk: BLAKE2b of (i, j, chunk), one 64-byte digest for the four days."""
        key = _NODE_KEY.pack(i, j, chunk)
        digest = hashlib.blake2b(key, digest_size=64, person=b"cleanair-weather").digest()
        return _NODE_WORDS.unpack(digest)

    def _compute_weather_block(self, i0: int, j0: int, d0: int) -> tuple[float, ...]:
        """(z1, z2) of the 8 nodes around a grid cell and day, i-major, then j, then day.

        On each day a node's z1 and z2 are sums of two of the day's uniform words, centred and
        scaled to variance 1 (a triangular distribution on ±√6); the variance-preserving
        interpolation between nodes brings them closer still to normal.
        """
        j1 = (j0 + 1) % _WEATHER_NODES_LON  # wraps at the dateline: -180 and 180 share nodes
        chunk0, slot0 = divmod(d0, _DAYS_PER_DIGEST)
        chunk1, slot1 = divmod(d0 + 1, _DAYS_PER_DIGEST)
        slot0 *= 4
        slot1 *= 4
        scale = _TRIANGULAR_SCALE
        offset = _TRIANGULAR_OFFSET
        block: list[float] = []
        for i in (i0, i0 + 1):
            for j in (j0, j1):
                first = self._weather_words(i, j, chunk0)
                second = first if chunk1 == chunk0 else self._weather_words(i, j, chunk1)
                block += (
                    (first[slot0] + first[slot0 + 1] - offset) * scale,
                    (first[slot0 + 2] + first[slot0 + 3] - offset) * scale,
                    (second[slot1] + second[slot1 + 1] - offset) * scale,
                    (second[slot1 + 2] + second[slot1 + 3] - offset) * scale,
                )
        return tuple(block)

    def weather(self, point: Point, at: datetime) -> tuple[float, float]:
        """The weather variables (z1 stagnation, z2 sunshine): mean 0, sd 1, clipped to ±3."""
        return self._weather_at(point.lat, point.lon, _hours_since_epoch(at))

    def _weather_at(self, lat: float, lon: float, hours: float) -> tuple[float, float]:
        gi = (lat + 90.0) / WEATHER_GRID_DEG
        gj = (lon + 180.0) / WEATHER_GRID_DEG
        gt = hours / 24.0 - 0.5  # node days are anchored at 12:00 UTC
        i0, j0, d0 = math.floor(gi), math.floor(gj), math.floor(gt)
        wi, wj, wt = _smoothstep(gi - i0), _smoothstep(gj - j0), _smoothstep(gt - d0)
        z = self._weather_block(i0, j0 % _WEATHER_NODES_LON, d0)
        vi, vj, vt = 1.0 - wi, 1.0 - wj, 1.0 - wt
        z1 = vi * (vj * (vt * z[0] + wt * z[2]) + wj * (vt * z[4] + wt * z[6])) + wi * (
            vj * (vt * z[8] + wt * z[10]) + wj * (vt * z[12] + wt * z[14])
        )
        z2 = vi * (vj * (vt * z[1] + wt * z[3]) + wj * (vt * z[5] + wt * z[7])) + wi * (
            vj * (vt * z[9] + wt * z[11]) + wj * (vt * z[13] + wt * z[15])
        )
        # Dividing by the root of the sum of squared weights keeps the variance 1 between nodes
        # (a plain weighted mean of independent values would be calmer half-way between them).
        scale = 1.0 / math.sqrt((vi * vi + wi * wi) * (vj * vj + wj * wj) * (vt * vt + wt * wt))
        limit = WEATHER_Z_LIMIT
        return (
            min(max(z1 * scale, -limit), limit),
            min(max(z2 * scale, -limit), limit),
        )

    # --- the model -------------------------------------------------------------------------------

    def cell_of(self, lat: float, lon: float) -> GridCell:
        """The 0.01 degree cell whose centre the model's static fields are evaluated at."""
        row, column = round(lat * _CELL_QUANTUM), round(lon * _CELL_QUANTUM)
        half = 0.5 / _CELL_QUANTUM
        return GridCell(
            row / _CELL_QUANTUM - half,
            column / _CELL_QUANTUM - half,
            row / _CELL_QUANTUM + half,
            column / _CELL_QUANTUM + half,
        )

    def concentrations_at(self, point: Point, at: datetime) -> Concentrations:
        """PM2.5, PM10, NO2, O3 and SO2 in µg/m³ at `point` and `at` (timezone-aware)."""
        lat, lon = point.lat, point.lon
        hours = _hours_since_epoch(at)
        (b_pm25, b_pm10, b_no2, b_o3, b_so2, u_pm25, u_pm10, u_no2, u_so2, titration, hemi) = (
            self._cell(round(lat * _CELL_QUANTUM), round(lon * _CELL_QUANTUM))
        )

        # Local solar time: the hour of day, interpolated between the hourly table entries.
        local = hours + lon / 15.0
        hour = local % 24.0
        fh = hour - int(hour)
        h0 = int(hour) % 24  # a tiny negative `local` can round `hour` up to 24.0
        t_pm, _, t_no2, t_o3, t_so2 = self._diurnal
        d_pm = t_pm[h0] + fh * (t_pm[h0 + 1] - t_pm[h0])
        d_no2 = t_no2[h0] + fh * (t_no2[h0 + 1] - t_no2[h0])
        d_o3 = t_o3[h0] + fh * (t_o3[h0 + 1] - t_o3[h0])
        d_so2 = t_so2[h0] + fh * (t_so2[h0 + 1] - t_so2[h0])

        # The local weekday, blended from local noon to local noon: no step at midnight.
        gd = local / 24.0 - 0.5
        day = math.floor(gd)
        fd = _smoothstep(gd - day)
        wd = (day + 3) % 7  # 1970-01-01 was a Thursday; 0 = Monday
        w_pm_table, _, w_no2_table, _, _ = self._weekly
        w_pm = w_pm_table[wd] + fd * (w_pm_table[wd + 1] - w_pm_table[wd])
        w_no2 = w_no2_table[wd] + fd * (w_no2_table[wd + 1] - w_no2_table[wd])

        # Season: the phase of the year (the tropical year drifts < 1 day from the calendar).
        theta = 2.0 * math.pi * (hours / 24.0) / _TROPICAL_YEAR
        cos_t, sin_t = hemi * math.cos(theta), hemi * math.sin(theta)
        sc, ss = self._season_cos, self._season_sin

        # Weather: z1 (stagnation) for PM, NO2, SO2; z2 (sunshine) for O3.
        z1, z2 = self._weather_at(lat, lon, hours)
        s_pm25, s_pm10, s_no2, s_o3, s_so2 = WEATHER_SIGMA
        k_pm, _, k_no2, k_o3, k_so2 = BACKGROUND_DIURNAL_SHARE

        pm25 = (
            (b_pm25 * (1.0 + k_pm * (d_pm - 1.0)) + u_pm25 * d_pm * w_pm)
            * (1.0 + cos_t * sc[0] + sin_t * ss[0])
            * math.exp(s_pm25 * z1 - 0.5 * s_pm25 * s_pm25)
        )
        pm10 = (
            (b_pm10 * (1.0 + k_pm * (d_pm - 1.0)) + u_pm10 * d_pm * w_pm)
            * (1.0 + cos_t * sc[1] + sin_t * ss[1])
            * math.exp(s_pm10 * z1 - 0.5 * s_pm10 * s_pm10)
        )
        no2 = (
            (b_no2 * (1.0 + k_no2 * (d_no2 - 1.0)) + u_no2 * d_no2 * w_no2)
            * (1.0 + cos_t * sc[2] + sin_t * ss[2])
            * math.exp(s_no2 * z1 - 0.5 * s_no2 * s_no2)
        )
        o3 = (
            b_o3
            * (1.0 + k_o3 * (d_o3 - 1.0))
            * max(0.0, 1.0 - titration * d_no2 * w_no2)
            * (1.0 + cos_t * sc[3] + sin_t * ss[3])
            * math.exp(s_o3 * z2 - 0.5 * s_o3 * s_o3)
        )
        so2 = (
            (b_so2 * (1.0 + k_so2 * (d_so2 - 1.0)) + u_so2 * d_so2)
            * (1.0 + cos_t * sc[4] + sin_t * ss[4])
            * math.exp(s_so2 * z1 - 0.5 * s_so2 * s_so2)
        )
        return {
            Pollutant.PM25: pm25,
            Pollutant.PM10: max(pm10, pm25),  # PM10 contains PM2.5
            Pollutant.NO2: no2,
            Pollutant.O3: o3,
            Pollutant.SO2: so2,
        }

    def air_at_hour(self, lats: FloatArray, lons: FloatArray, hour: datetime) -> FloatArray:
        """`concentrations_at` for many points at one time, as one array: a row per point,
        a column per `SCORED` pollutant. The same arithmetic in NumPy (its own exp, so not to
        the last bit); the static fields and weather blocks are looked up once per distinct
        cell, which a city has few of."""
        lat = np.asarray(lats, dtype=np.float64).reshape(-1)
        lon = np.asarray(lons, dtype=np.float64).reshape(-1)
        hours = _hours_since_epoch(hour)
        if lat.size == 0:
            return np.empty((0, 5))
        static = self._static_rows(lat, lon)
        theta = 2.0 * math.pi * (hours / 24.0) / _TROPICAL_YEAR
        hemi = static[:, 10]
        return self._mixed(
            static,
            lon,
            hours,
            (hemi * math.cos(theta), hemi * math.sin(theta)),
            self._weather_arrays(lat, lon, hours),
            np.exp,
            np.maximum,
        )

    def _weather_arrays(
        self, lat: FloatArray, lon: FloatArray, hours: float
    ) -> tuple[FloatArray, FloatArray]:
        """`_weather_at` for many points at one time."""
        gi = (lat + 90.0) / WEATHER_GRID_DEG
        gj = (lon + 180.0) / WEATHER_GRID_DEG
        gt = hours / 24.0 - 0.5
        i0, j0, d0 = np.floor(gi), np.floor(gj), math.floor(gt)
        wi, wj, wt = gi - i0, gj - j0, gt - d0
        wi, wj, wt = wi * wi * (3 - 2 * wi), wj * wj * (3 - 2 * wj), _smoothstep(wt)
        nodes = i0.astype(np.int64) * _WEATHER_NODES_LON + (j0 % _WEATHER_NODES_LON).astype(
            np.int64
        )
        keys, which = np.unique(nodes, return_inverse=True)
        rows, columns = np.divmod(keys, _WEATHER_NODES_LON)
        blocks = np.array(
            [
                self._weather_block(i, j, d0)
                for i, j in zip(rows.tolist(), columns.tolist(), strict=True)
            ]
        )
        z = blocks[which.reshape(-1)]
        vi, vj, vt = 1.0 - wi, 1.0 - wj, 1.0 - wt
        z1 = vi * (vj * (vt * z[:, 0] + wt * z[:, 2]) + wj * (vt * z[:, 4] + wt * z[:, 6])) + wi * (
            vj * (vt * z[:, 8] + wt * z[:, 10]) + wj * (vt * z[:, 12] + wt * z[:, 14])
        )
        z2 = vi * (vj * (vt * z[:, 1] + wt * z[:, 3]) + wj * (vt * z[:, 5] + wt * z[:, 7])) + wi * (
            vj * (vt * z[:, 9] + wt * z[:, 11]) + wj * (vt * z[:, 13] + wt * z[:, 15])
        )
        scale = 1.0 / np.sqrt((vi * vi + wi * wi) * (vj * vj + wj * wj) * (vt * vt + wt * wt))
        limit = WEATHER_Z_LIMIT
        return np.clip(z1 * scale, -limit, limit), np.clip(z2 * scale, -limit, limit)

    def air_at_times(
        self, lats: FloatArray, lons: FloatArray, timestamps: FloatArray
    ) -> FloatArray:
        """`concentrations_at` for many points, each at its own time (`timestamps`, POSIX
        seconds as `datetime.timestamp` gives them), as one array: a row per point, a column
        per `SCORED` pollutant, equal to `concentrations_at`'s values bit for bit.

        The same operations in the same order, in NumPy; the transcendental functions are the
        `math` module's, mapped over the arrays (NumPy's own exp may differ in the last bit
        on some CPUs), and `max(0.0, x)` keeps Python's meaning. A route's enrichment asks
        this for all its waypoints at once (`StreetLevelAir.sample_rows`)."""
        lat = np.asarray(lats, dtype=np.float64).reshape(-1)
        lon = np.asarray(lons, dtype=np.float64).reshape(-1)
        hours = np.asarray(timestamps, dtype=np.float64).reshape(-1) / 3600.0
        if lat.size == 0:
            return np.empty((0, 5))
        static = self._static_rows(lat, lon)
        theta = 2.0 * math.pi * (hours / 24.0) / _TROPICAL_YEAR
        hemi = static[:, 10]
        return self._mixed(
            static,
            lon,
            hours,
            (hemi * _mapped(math.cos, theta), hemi * _mapped(math.sin, theta)),
            self._weather_at_times(lat, lon, hours),
            functools.partial(_mapped, math.exp),
            _python_max,
        )

    def _mixed(
        self,
        static: FloatArray,
        lon: FloatArray,
        hours: FloatArray | float,
        season: tuple[FloatArray, FloatArray],
        weather: tuple[FloatArray, FloatArray],
        exp: Callable[[FloatArray], FloatArray],
        maximum: Callable[[FloatArray | float, FloatArray], FloatArray],
    ) -> FloatArray:
        """`concentrations_at`'s mix, over arrays: each point's static fields (`_static_rows`)
        with its diurnal and weekly profiles at `hours`, its `season` terms (cos, sin) and
        its `weather` draws (z1, z2); `exp` and `maximum` are the caller's (NumPy's, or
        Python's meaning to the last bit)."""
        b_pm25, b_pm10, b_no2, b_o3, b_so2 = (static[:, k] for k in range(5))
        u_pm25, u_pm10, u_no2, u_so2, titration = (static[:, k] for k in range(5, 10))

        local = hours + lon / 15.0
        hour = local % 24.0
        whole = np.floor(hour)  # `hour` is not negative: int() is floor
        fh = hour - whole
        h0 = whole.astype(np.int64) % 24
        t_pm, _, t_no2, t_o3, t_so2 = (np.asarray(t) for t in self._diurnal)
        d_pm = t_pm[h0] + fh * (t_pm[h0 + 1] - t_pm[h0])
        d_no2 = t_no2[h0] + fh * (t_no2[h0 + 1] - t_no2[h0])
        d_o3 = t_o3[h0] + fh * (t_o3[h0 + 1] - t_o3[h0])
        d_so2 = t_so2[h0] + fh * (t_so2[h0 + 1] - t_so2[h0])

        gd = local / 24.0 - 0.5
        day = np.floor(gd)
        f = gd - day
        fd = f * f * (3.0 - 2.0 * f)
        wd = (day.astype(np.int64) + 3) % 7
        w_pm_table, _, w_no2_table, _, _ = (np.asarray(t) for t in self._weekly)
        w_pm = w_pm_table[wd] + fd * (w_pm_table[wd + 1] - w_pm_table[wd])
        w_no2 = w_no2_table[wd] + fd * (w_no2_table[wd + 1] - w_no2_table[wd])

        cos_t, sin_t = season
        sc, ss = self._season_cos, self._season_sin
        z1, z2 = weather
        s_pm25, s_pm10, s_no2, s_o3, s_so2 = WEATHER_SIGMA
        k_pm, _, k_no2, k_o3, k_so2 = BACKGROUND_DIURNAL_SHARE

        pm25 = (
            (b_pm25 * (1.0 + k_pm * (d_pm - 1.0)) + u_pm25 * d_pm * w_pm)
            * (1.0 + cos_t * sc[0] + sin_t * ss[0])
            * exp(s_pm25 * z1 - 0.5 * s_pm25 * s_pm25)
        )
        pm10 = (
            (b_pm10 * (1.0 + k_pm * (d_pm - 1.0)) + u_pm10 * d_pm * w_pm)
            * (1.0 + cos_t * sc[1] + sin_t * ss[1])
            * exp(s_pm10 * z1 - 0.5 * s_pm10 * s_pm10)
        )
        no2 = (
            (b_no2 * (1.0 + k_no2 * (d_no2 - 1.0)) + u_no2 * d_no2 * w_no2)
            * (1.0 + cos_t * sc[2] + sin_t * ss[2])
            * exp(s_no2 * z1 - 0.5 * s_no2 * s_no2)
        )
        o3 = (
            b_o3
            * (1.0 + k_o3 * (d_o3 - 1.0))
            * maximum(0.0, 1.0 - titration * d_no2 * w_no2)
            * (1.0 + cos_t * sc[3] + sin_t * ss[3])
            * exp(s_o3 * z2 - 0.5 * s_o3 * s_o3)
        )
        so2 = (
            (b_so2 * (1.0 + k_so2 * (d_so2 - 1.0)) + u_so2 * d_so2)
            * (1.0 + cos_t * sc[4] + sin_t * ss[4])
            * exp(s_so2 * z1 - 0.5 * s_so2 * s_so2)
        )
        # PM10 contains PM2.5.
        air: FloatArray = np.stack([pm25, maximum(pm10, pm25), no2, o3, so2], axis=1)
        return air

    def _static_rows(self, lat: FloatArray, lon: FloatArray) -> FloatArray:
        """`_cell`'s fields of each point's cell, a row per point; one lookup per cell."""
        # Beyond the poles and the date line a cell's fields are its edge's (`_compute_cell`
        # clamps): clipped there, one integer stands for each cell.
        edge = 180 * _CELL_QUANTUM + 1
        rows = np.clip(np.rint(lat * _CELL_QUANTUM), -edge, edge).astype(np.int64)
        columns = np.clip(np.rint(lon * _CELL_QUANTUM), -edge, edge).astype(np.int64)
        span = edge + 1
        keys, which = np.unique((rows + span) * (2 * span) + (columns + span), return_inverse=True)
        key_rows, key_columns = np.divmod(keys, 2 * span)
        fields = np.array(
            [
                self._cell(r - span, c - span)
                for r, c in zip(key_rows.tolist(), key_columns.tolist(), strict=True)
            ]
        )
        static: FloatArray = fields[which.reshape(-1)]
        return static

    def _weather_at_times(
        self, lat: FloatArray, lon: FloatArray, hours: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        """`_weather_at` for many points, each at its own time: one block per node and day."""
        gi = (lat + 90.0) / WEATHER_GRID_DEG
        gj = (lon + 180.0) / WEATHER_GRID_DEG
        gt = hours / 24.0 - 0.5
        i0, j0, d0 = np.floor(gi), np.floor(gj), np.floor(gt)
        wi, wj, wt = gi - i0, gj - j0, gt - d0
        wi, wj, wt = (
            wi * wi * (3.0 - 2.0 * wi),
            wj * wj * (3.0 - 2.0 * wj),
            wt * wt * (3.0 - 2.0 * wt),
        )
        days = d0.astype(np.int64)
        first = int(days.min())
        nodes = i0.astype(np.int64) * _WEATHER_NODES_LON + (j0 % _WEATHER_NODES_LON).astype(
            np.int64
        )
        keys, which = np.unique(
            nodes * (int(days.max()) - first + 1) + (days - first), return_inverse=True
        )
        node_keys, day_keys = np.divmod(keys, int(days.max()) - first + 1)
        rows, columns = np.divmod(node_keys, _WEATHER_NODES_LON)
        blocks = np.array(
            [
                self._weather_block(i, j, d + first)
                for i, j, d in zip(rows.tolist(), columns.tolist(), day_keys.tolist(), strict=True)
            ]
        )
        z = blocks[which.reshape(-1)]
        vi, vj, vt = 1.0 - wi, 1.0 - wj, 1.0 - wt
        z1 = vi * (vj * (vt * z[:, 0] + wt * z[:, 2]) + wj * (vt * z[:, 4] + wt * z[:, 6])) + wi * (
            vj * (vt * z[:, 8] + wt * z[:, 10]) + wj * (vt * z[:, 12] + wt * z[:, 14])
        )
        z2 = vi * (vj * (vt * z[:, 1] + wt * z[:, 3]) + wj * (vt * z[:, 5] + wt * z[:, 7])) + wi * (
            vj * (vt * z[:, 9] + wt * z[:, 11]) + wj * (vt * z[:, 13] + wt * z[:, 15])
        )
        scale = 1.0 / np.sqrt((vi * vi + wi * wi) * (vj * vj + wj * wj) * (vt * vt + wt * wt))
        limit = WEATHER_Z_LIMIT
        return np.clip(z1 * scale, -limit, limit), np.clip(z2 * scale, -limit, limit)

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        """One `concentrations_at` per sample, in order.

        A route plan asks for tens of thousands of samples at once; the batch is computed in
        slices that hand the event loop back in between, so other requests keep being served.
        """
        if len(samples) == 1:  # a score: no slices
            return [self.concentrations_at(samples[0].point, samples[0].at)]
        answers: list[Concentrations] = []
        for start in range(0, len(samples), YIELD_EVERY):
            if start:
                await asyncio.sleep(0)
            chunk = samples[start : start + YIELD_EVERY]
            answers.extend(self.concentrations_at(sample.point, sample.at) for sample in chunk)
        return answers


def _mapped(function: Callable[[float], float], values: FloatArray) -> FloatArray:
    """`function` of each of `values`, as an array (a C loop over a list, no bytecode)."""
    return np.fromiter(map(function, values.tolist()), dtype=np.float64, count=values.size)


def _python_max(first: FloatArray | float, second: FloatArray) -> FloatArray:
    """Python's `max(first, second)` of each pair, as an array: `first` unless `second` is
    greater (so a NaN in `second` loses, as in `max`)."""
    chosen: FloatArray = np.where(second > first, second, first)
    return chosen


def _hours_since_epoch(at: datetime) -> float:
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("the model needs a timezone-aware datetime (UTC by convention)")
    return at.timestamp() / 3600.0
