"""The tile layers: the Clean Air Score, each official index of the registry in its own
category colours, and the NO2, PM2.5, PM10 and O3 concentrations. A layer turns an array of
air (a row per point, a column per `SCORED` pollutant, NaN unknown) into one value per point
that its palette colours, in NumPy: never one Python call per pixel.

An index here is the hour's: each pollutant's category is that of the hour's concentration
(as the index computes it from one hour of history: its 24-hour and 8-hour means and the
NowCast need the hours before, which a tile of one hour does not draw). The index's own
tables are used, and a test holds each category to the index's own function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from cleanair_core.air.indexes import eu_eaqi, uk_daqi, us_epa
from cleanair_core.air.indexes.registry import INDEX_CODES
from cleanair_core.air.pollutants import SCORED, Pollutant
from cleanair_core.air.score import BANDS, EEA_2024_BOUNDS, POINTS_PER_BAND
from cleanair_core.air.tiles.palettes import Palette, colour_blind, rgb, split_bands
from cleanair_core.air.units import MOLAR_MASS, MOLAR_VOLUME_25C

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

#: The palettes a request may name.
PALETTES = ("default", "colorblind")
CONCENTRATION_UNIT = "µg/m³"


@attrs.frozen
class Layer:
    """One layer: its name in the URL, what it shows, its unit, how it is computed from air
    and its two palettes."""

    name: str
    title: str
    unit: str
    values: Callable[[FloatArray], FloatArray]
    palette: Palette
    colorblind: Palette
    #: Whether a higher value is cleaner air (the score), not dirtier (the rest).
    cleaner_above: bool = False

    def palette_named(self, name: str) -> Palette:
        """The `default` or `colorblind` palette (ValueError for another name)."""
        if name == "default":
            return self.palette
        if name == "colorblind":
            return self.colorblind
        raise ValueError("no such palette")


def _column(air: FloatArray, pollutant: Pollutant) -> FloatArray:
    return air[:, SCORED.index(pollutant)]


def _worst(categories: list[FloatArray]) -> FloatArray:
    """The highest category of any pollutant, NaN where none is known."""
    import numpy as np

    stacked = np.stack(categories)
    known = ~np.isnan(stacked)
    worst = np.where(known, stacked, -np.inf).max(axis=0)
    return np.where(known.any(axis=0), worst, np.nan)


# -- the Clean Air Score --------------------------------------------------------------------


def score_values(air: FloatArray) -> FloatArray:
    """The Clean Air Score of every row (`cleanair_core.air.score.clean_air_score`, in
    NumPy): 100 minus the worst EEA sub-index, rounded down, 0-100; NaN where no pollutant
    is known."""
    import numpy as np

    subs: list[FloatArray] = []
    for pollutant, bounds in EEA_2024_BOUNDS.items():
        xs = np.array((0.0, *bounds))
        ys = POINTS_PER_BAND * np.arange(len(xs), dtype=np.float64)
        column = np.maximum(_column(air, pollutant), 0.0)
        sub = np.interp(column, xs, ys, right=100.0)
        subs.append(np.where(np.isnan(column), np.nan, sub))
    worst = _worst(subs)
    return np.clip(np.floor(100.0 - worst + 1e-9), 0.0, 100.0)


def _score_palette() -> Palette:
    ordered = tuple(reversed(BANDS))  # Very Poor (lowest scores) first
    return Palette(
        tuple(float(band.lowest_score) for band in ordered[1:]),
        tuple(rgb(band.colour) for band in ordered),
        upper_inclusive=False,
        labels=tuple(f"{band.label} ({band.lowest_score}+)" for band in ordered),
    )


# -- the official indexes ---------------------------------------------------------------------


def _category_palette(colours: tuple[str, ...], labels: tuple[str, ...]) -> Palette:
    """Categories numbered 0..n-1 as values, each in its official colour."""
    return Palette(
        tuple(k + 0.5 for k in range(len(colours) - 1)),
        tuple(rgb(c) for c in colours),
        labels=labels,
    )


def eaqi_values(air: FloatArray) -> FloatArray:
    """The EAQI's band (0 Good .. 5 Extremely poor) of each row's hour."""
    import numpy as np

    bands = []
    for pollutant, limits in eu_eaqi.LIMITS.items():
        column = _column(air, pollutant)
        found = np.searchsorted(np.asarray(limits, dtype=np.float64), column, side="left")
        bands.append(np.where(np.isnan(column), np.nan, found.astype(np.float64)))
    return _worst(bands)


def daqi_values(air: FloatArray) -> FloatArray:
    """The DAQI's index minus one (0 for index 1 .. 9 for index 10) of each row's hour: the
    concentration rounded half up to an integer µg/m³, then placed on the index's limits."""
    import numpy as np

    found_all = []
    for pollutant, limits in uk_daqi.LIMITS.items():
        column = _column(air, pollutant)
        rounded = np.floor(column + 0.5)
        found = np.searchsorted(np.asarray(limits, dtype=np.float64), rounded, side="left")
        found_all.append(np.where(np.isnan(column), np.nan, found.astype(np.float64)))
    return _worst(found_all)


def _epa_table_categories(
    truncated: FloatArray, table: us_epa.Breakpoints, step: float, first: int
) -> FloatArray:
    """The AQI category (0 Good .. 5 Hazardous) of truncated concentrations by one table of
    the TAD, each of whose rows is one category (`first` the first row's): beyond its top,
    the AQI is 500 (Hazardous); below its first row, NaN."""
    import numpy as np

    lows = np.array([round(row[0] / step) for row in table], dtype=np.float64)
    top = round(table[-1][1] / step)
    rows = np.searchsorted(lows, truncated, side="right") - 1
    found = np.where(rows < 0, np.nan, rows + first).astype(np.float64)
    return np.where(np.isnan(truncated), np.nan, np.where(truncated > top, 5.0, found))


def _truncated(values: FloatArray, step: float) -> FloatArray:
    """Concentrations cut down to whole `step`s, counted in steps (as `us_epa.truncate`)."""
    import numpy as np

    return np.floor(values / step + 1e-9)


def _ppb(pollutant: Pollutant, ugm3: FloatArray) -> FloatArray:
    return ugm3 * (MOLAR_VOLUME_25C / MOLAR_MASS[pollutant])


def epa_values(air: FloatArray) -> FloatArray:
    """The US AQI's category (0 Good .. 5 Hazardous) of each row's hour: PM by the hour's
    value (the NowCast of one hour), O3 by the 8-hour table and, where more precautionary,
    the 1-hour one, NO2 and SO2 by their 1-hour tables (an hour above SO2's says 200)."""
    import numpy as np

    pm25 = _column(air, Pollutant.PM25)
    pm10 = _column(air, Pollutant.PM10)
    o3_ppm = _ppb(Pollutant.O3, _column(air, Pollutant.O3)) / 1000.0
    no2 = _ppb(Pollutant.NO2, _column(air, Pollutant.NO2))
    so2 = _ppb(Pollutant.SO2, _column(air, Pollutant.SO2))
    o3_steps = _truncated(o3_ppm, 0.001)
    ozone = np.fmax(
        _epa_table_categories(o3_steps, us_epa.O3_8H, 0.001, 0),
        _epa_table_categories(o3_steps, us_epa.O3_1H, 0.001, 2),
    )
    so2_steps = _truncated(so2, 1.0)
    sulphur = np.where(
        so2_steps > us_epa.SO2_1H[-1][1],
        3.0,  # AQI 200: an hour above the 1-hour table says "200 or more"
        _epa_table_categories(so2_steps, us_epa.SO2_1H, 1.0, 0),
    )
    found = [
        _epa_table_categories(_truncated(pm25, 0.1), us_epa.PM25, 0.1, 0),
        _epa_table_categories(_truncated(pm10, 1.0), us_epa.PM10, 1.0, 0),
        ozone,
        _epa_table_categories(_truncated(no2, 1.0), us_epa.NO2_1H, 1.0, 0),
        np.where(np.isnan(so2), np.nan, sulphur),
    ]
    return _worst(found)


def _index_layers() -> dict[str, Layer]:
    eaqi = _category_palette(
        tuple(band[1] for band in eu_eaqi.BANDS), tuple(band[0] for band in eu_eaqi.BANDS)
    )
    daqi_labels = tuple(
        f"{index} {next(b[1] for b in uk_daqi.BANDS if index <= b[0])}" for index in range(1, 11)
    )
    daqi = _category_palette(uk_daqi.COLOURS, daqi_labels)
    epa = _category_palette(
        tuple(c[2] for c in us_epa.CATEGORIES), tuple(c[1] for c in us_epa.CATEGORIES)
    )
    unit = "index category"
    return {
        eu_eaqi.CODE: Layer(
            eu_eaqi.CODE, eu_eaqi.NAME, unit, eaqi_values, eaqi, colour_blind(eaqi)
        ),
        uk_daqi.CODE: Layer(
            uk_daqi.CODE, uk_daqi.NAME, unit, daqi_values, daqi, colour_blind(daqi)
        ),
        us_epa.CODE: Layer(us_epa.CODE, us_epa.NAME, unit, epa_values, epa, colour_blind(epa)),
    }


# -- concentrations ---------------------------------------------------------------------------


def _concentration_layer(pollutant: Pollutant, title: str) -> Layer:
    """A pollutant's hourly concentration on the EEA's 2024 bands for it (µg/m³), each band
    split at its middle (`split_bands`), in the EEA's band colours."""
    colours = tuple(rgb(band[1]) for band in eu_eaqi.BANDS)
    labels = tuple(band[0] for band in eu_eaqi.BANDS)
    palette = split_bands(eu_eaqi.LIMITS[pollutant], colours, labels)

    def values(air: FloatArray) -> FloatArray:
        return _column(air, pollutant).copy()

    return Layer(pollutant.value, title, CONCENTRATION_UNIT, values, palette, colour_blind(palette))


def _layers() -> dict[str, Layer]:
    score = _score_palette()
    layers = {
        "clean_air_score": Layer(
            "clean_air_score",
            "Clean Air Score",
            "score 0-100",
            score_values,
            score,
            colour_blind(score, cleanest_first=False),
            cleaner_above=True,
        ),
    }
    layers |= _index_layers()
    for pollutant, title in (
        (Pollutant.NO2, "Nitrogen dioxide (NO2)"),
        (Pollutant.PM25, "Fine particles (PM2.5)"),
        (Pollutant.PM10, "Particles (PM10)"),
        (Pollutant.O3, "Ozone (O3)"),
    ):
        layers[pollutant.value] = _concentration_layer(pollutant, title)
    missing = set(INDEX_CODES) - set(layers)
    if missing:  # an index added to the registry needs its tile layer here
        raise AssertionError(f"no tile layer for the indexes {sorted(missing)}")
    return layers


#: Every layer by its name in the URL.
LAYERS: dict[str, Layer] = _layers()
