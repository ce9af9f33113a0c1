"""The US EPA Air Quality Index, May 2024 (Technical Assistance Document EPA-454/B-24-002,
Table 6; 89 FR 16202), with the PM NowCast.

Each pollutant's concentration is truncated (PM2.5 to 0.1 µg/m³, PM10 to 1 µg/m³, O3 to
0.001 ppm, NO2 and SO2 to 1 ppb), then I = (I_hi - I_lo) / (C_hi - C_lo) · (C - C_lo) + I_lo,
rounded to an integer; the AQI is the highest sub-index. PM2.5 and PM10 use the NowCast of
the last 12 hours (the 24-hour mean's real-time stand-in), O3 the 8-hour mean and, where it
is more precautionary, the 1-hour value; gases are converted to ppb at 25 °C. Beyond the top
breakpoint the AQI is reported as 500 ("beyond the AQI").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cleanair_core.air.indexes import (
    AveragedConcentration,
    Averaging,
    HealthAdvice,
    HourlyHistory,
    IndexValue,
    round_half_up,
    running_mean,
)
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.units import ppb_from_ugm3

CODE = "us_epa_2024"
NAME = "US EPA Air Quality Index (2024)"

#: (C_lo, C_hi, I_lo, I_hi) rows of Table 6.
Breakpoints = tuple[tuple[float, float, int, int], ...]
PM25: Breakpoints = (
    (0.0, 9.0, 0, 50),
    (9.1, 35.4, 51, 100),
    (35.5, 55.4, 101, 150),
    (55.5, 125.4, 151, 200),
    (125.5, 225.4, 201, 300),
    (225.5, 325.4, 301, 500),
)
PM10: Breakpoints = (
    (0, 54, 0, 50),
    (55, 154, 51, 100),
    (155, 254, 101, 150),
    (255, 354, 151, 200),
    (355, 424, 201, 300),
    (425, 604, 301, 500),
)
O3_8H: Breakpoints = (  # ppm
    (0.000, 0.054, 0, 50),
    (0.055, 0.070, 51, 100),
    (0.071, 0.085, 101, 150),
    (0.086, 0.105, 151, 200),
    (0.106, 0.200, 201, 300),
)
O3_1H: Breakpoints = (  # ppm; only from 0.125, where it is more precautionary
    (0.125, 0.164, 101, 150),
    (0.165, 0.204, 151, 200),
    (0.205, 0.404, 201, 300),
    (0.405, 0.604, 301, 500),
)
NO2_1H: Breakpoints = (  # ppb
    (0, 53, 0, 50),
    (54, 100, 51, 100),
    (101, 360, 101, 150),
    (361, 649, 151, 200),
    (650, 1249, 201, 300),
    (1250, 2049, 301, 500),
)
SO2_1H: Breakpoints = (  # ppb; 1-hour values define the AQI up to 200 only
    (0, 35, 0, 50),
    (36, 75, 51, 100),
    (76, 185, 101, 150),
    (186, 304, 151, 200),
)
SO2_24H: Breakpoints = (  # ppb; above 304 ppb (AQI 200) the 24-hour mean decides
    (305, 604, 201, 300),
    (605, 1004, 301, 500),
)

#: (highest AQI of the category, name, colour, general advice, advice for sensitive groups);
#: the names and colours are the TAD's, the advice a summary of its cautionary statements.
CATEGORIES: tuple[tuple[int, str, str, str, str], ...] = (
    (50, "Good", "#00E400",
     "Air quality is satisfactory and poses little or no risk.",
     "None: enjoy your usual outdoor activities."),
    (100, "Moderate", "#FFFF00",
     "Air quality is acceptable.",
     "Unusually sensitive people should consider reducing prolonged or heavy exertion."),
    (150, "Unhealthy for Sensitive Groups", "#FF7E00",
     "The general public is less likely to be affected.",
     "People with heart or lung disease, older adults, children and teenagers should reduce "
     "prolonged or heavy exertion."),
    (200, "Unhealthy", "#FF0000",
     "Everyone should reduce prolonged or heavy exertion outdoors.",
     "Sensitive groups should avoid prolonged or heavy exertion."),
    (300, "Very Unhealthy", "#8F3F97",
     "Everyone should avoid prolonged or heavy exertion outdoors.",
     "Sensitive groups should avoid all physical activity outdoors."),
    (500, "Hazardous", "#7E0023",
     "Everyone should avoid all physical activity outdoors.",
     "Sensitive groups should remain indoors and keep activity levels low."),
)  # fmt: skip

#: The AQI reported beyond the top breakpoint.
BEYOND = 500
#: NowCast: hours used, the floor of its weight factor, and the recent hours that must exist.
NOWCAST_HOURS = 12
NOWCAST_MIN_WEIGHT = 0.5


def truncate(value: float, step: float) -> float:
    """Cut `value` down to a multiple of `step` (0.1, 1 or 0.001), as the TAD requires; the
    epsilon keeps 9.1 from becoming 9.0 through binary floating point."""
    digits = max(0, -math.floor(math.log10(step) + 1e-12))
    return round(math.floor(value / step + 1e-9) * step, digits)


def sub_index(concentration: float, table: Breakpoints) -> int | None:
    """The AQI of a truncated concentration by `table`; BEYOND above its top; None below
    its first row (the 1-hour ozone table starts at 0.125 ppm)."""
    if concentration > table[-1][1]:
        return BEYOND
    for c_lo, c_hi, i_lo, i_hi in table:
        if c_lo <= concentration <= c_hi:
            return round_half_up((i_hi - i_lo) / (c_hi - c_lo) * (concentration - c_lo) + i_lo)
    return None


def nowcast(values: Sequence[float | None]) -> float | None:
    """The PM NowCast of hourly values (oldest first): c1 the latest of the last 12 hours,
    weight factor w = max(c_min / c_max, 0.5), NowCast = Σ w^(i-1)·c_i / Σ w^(i-1) over
    the hours with values; None unless 2 of the 3 latest hours have values."""
    recent = list(values[-NOWCAST_HOURS:])[::-1]  # c1 first
    if sum(v is not None for v in recent[:3]) < 2:
        return None
    known = [(i, v) for i, v in enumerate(recent) if v is not None]
    c_max = max(v for _, v in known)
    c_min = min(v for _, v in known)
    weight = max(c_min / c_max, NOWCAST_MIN_WEIGHT) if c_max > 0 else 1.0
    total = sum(weight**i * v for i, v in known)
    return total / sum(weight**i for i, _ in known)


def _pm(
    values: Sequence[float | None], table: Breakpoints, step: float
) -> tuple[int, AveragedConcentration] | None:
    value = nowcast(values)
    averaging = Averaging.NOWCAST
    if value is None:
        if not values or values[-1] is None:
            return None
        value, averaging = values[-1], Averaging.HOUR
    index = sub_index(truncate(value, step), table)
    return (index, AveragedConcentration(value, averaging)) if index is not None else None


def _ozone(values: Sequence[float | None]) -> tuple[int, AveragedConcentration] | None:
    found = running_mean(values, 8, 6)  # 75 % of the hours, the EPA's completeness rule
    if found is None:
        return None
    mean, averaging = found
    best = sub_index(truncate(ppb_from_ugm3(Pollutant.O3, mean) / 1000.0, 0.001), O3_8H)
    used = AveragedConcentration(mean, averaging)
    last = values[-1]
    if last is not None:
        hourly = sub_index(truncate(ppb_from_ugm3(Pollutant.O3, last) / 1000.0, 0.001), O3_1H)
        if hourly is not None and (best is None or hourly > best):
            best, used = hourly, AveragedConcentration(last, Averaging.HOUR)
    return (best, used) if best is not None else None


def _gas_hourly(
    pollutant: Pollutant, values: Sequence[float | None], table: Breakpoints
) -> tuple[int, AveragedConcentration] | None:
    last = values[-1] if values else None
    if last is None:
        return None
    index = sub_index(truncate(ppb_from_ugm3(pollutant, last), 1.0), table)
    return (index, AveragedConcentration(last, Averaging.HOUR)) if index is not None else None


def _sulphur(values: Sequence[float | None]) -> tuple[int, AveragedConcentration] | None:
    hourly = _gas_hourly(Pollutant.SO2, values, SO2_1H)
    if hourly is None or hourly[0] != BEYOND:
        return hourly
    # Above 304 ppb an hour says only "200 or more": the 24-hour mean decides, where known.
    day = running_mean(values, 24, 18)
    if day is not None and day[1] is Averaging.DAY:
        ppb = truncate(ppb_from_ugm3(Pollutant.SO2, day[0]), 1.0)
        index = sub_index(ppb, SO2_24H) or sub_index(ppb, SO2_1H)
        if index is not None:
            return index, AveragedConcentration(day[0], Averaging.DAY)
    return 200, hourly[1]


def us_epa_aqi(history: HourlyHistory) -> IndexValue | None:
    """The AQI from `history` (µg/m³, oldest first), or None without any pollutant it uses."""
    subs: dict[Pollutant, tuple[int, AveragedConcentration]] = {}
    computed = {
        Pollutant.PM25: lambda v: _pm(v, PM25, 0.1),
        Pollutant.PM10: lambda v: _pm(v, PM10, 1.0),
        Pollutant.O3: _ozone,
        Pollutant.NO2: lambda v: _gas_hourly(Pollutant.NO2, v, NO2_1H),
        Pollutant.SO2: _sulphur,
    }
    for pollutant, compute in computed.items():
        values = history.get(pollutant)
        if values:
            found = compute(values)
            if found is not None:
                subs[pollutant] = found
    if not subs:
        return None
    dominant = max(subs, key=lambda p: subs[p][0])  # the first of equals, in table order
    value = subs[dominant][0]
    _, category, colour, general, sensitive = next(c for c in CATEGORIES if value <= c[0])
    return IndexValue(
        code=CODE,
        name=NAME,
        value=value,
        category=category,
        colour=colour,
        dominant_pollutant=dominant,
        concentrations={p: used for p, (_, used) in subs.items()},
        health=HealthAdvice(general, sensitive),
    )
