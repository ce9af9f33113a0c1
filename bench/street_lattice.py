"""Street-level NO2 over a 10 x 10 lattice of central Helsinki in one CAMS-like cell.

The figures docs/science.md ("Street-level air") quotes: over the day, the lattice's highest
NO2 over the mean of its quiet quarter (the points whose increment is in the lowest quartile),
against the street / urban background ratios of 1.09-3.16 (Cyrys et al. 2012), and the quiet
points over the cell's value. The cell's value is the same at every hour (NO2 20 µg/m³), so
the contrast is the traffic's alone. Run: `.venv/bin/python -m bench.street_lattice`.
"""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta

import numpy as np

from bench.quality import UniformCell
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.air.street_level import STREET_POLLUTANTS, StreetLevelAir
from cleanair_core.geo import Point
from cleanair_core.routes.network import StreetNetwork
from cleanair_sources.osm_import import HELSINKI_EXTRACT, import_network
from cleanair_sources.street_increments import NetworkIncrements

NO2 = STREET_POLLUTANTS.index(Pollutant.NO2)
CELL: Concentrations = {
    Pollutant.PM25: 6.0,
    Pollutant.PM10: 11.0,
    Pollutant.NO2: 20.0,
    Pollutant.O3: 45.0,
}
DAY = datetime(2026, 11, 24, tzinfo=UTC)


def measure(network: StreetNetwork) -> None:
    south, west, north, east = network.bounds
    lats, lons = np.meshgrid(np.linspace(south, north, 10), np.linspace(west, east, 10))
    increments = NetworkIncrements([network])
    local = increments.at(lats.ravel(), lons.ravel())[:, NO2]
    quiet = local <= np.quantile(local, 0.25)
    points = [
        Point(a, o) for a, o in zip(lats.ravel().tolist(), lons.ravel().tolist(), strict=True)
    ]
    cell = UniformCell(CELL)
    air = StreetLevelAir(cell, cell, increments)
    background = CELL[Pollutant.NO2]
    assert background is not None
    cover = increments.cell_cover(cell.cell_of(points[0].lat, points[0].lon))
    assert cover is not None
    ratios, quiet_low, quiet_high, days = [], math.inf, 0.0, []
    for k in range(72):  # every 20 minutes: the traffic's peak falls between whole hours
        at = DAY + timedelta(minutes=20 * k)
        answers = asyncio.run(air.concentrations([Sample(p, at) for p in points]))
        values = np.array([a[Pollutant.NO2] for a in answers], dtype=np.float64)
        days.append(values)
        ratios.append(values.max() / values[quiet].mean())
        quiet_low = min(quiet_low, values[quiet].min() / background)
        quiet_high = max(quiet_high, values[quiet].max() / background)
    daily = np.mean(days, axis=0)
    print(
        "street-level NO2, 10 x 10 lattice of central Helsinki in one 0.1 degree cell "
        f"(NO2 {background:g} µg/m³ all day; the network covers {cover.share:.1%} of the cell):"
    )
    print(
        f"  highest / quiet quarter's mean over the day: {min(ratios):.2f}-{max(ratios):.2f} "
        f"(daily means {daily.max() / daily[quiet].mean():.2f}); aim <= 3.16 at every hour, "
        "1.09-3.16 over the day (Cyrys et al. 2012)"
    )
    print(
        f"  quiet quarter / cell value: {quiet_low:.2f}-{quiet_high:.2f}; aim 0.85-1.18 "
        "(urban background stations' spread by hour of day)"
    )


def main() -> None:
    measure(import_network(HELSINKI_EXTRACT, "helsinki"))


if __name__ == "__main__":
    main()
