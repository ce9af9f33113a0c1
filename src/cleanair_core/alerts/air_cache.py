"""The cells' air of the current hour, kept across a worker's claims (issue 32).

A round is many claims (`use_cases.alert_rounds.CLAIM_BATCH` subscriptions each), and the
subscriptions of one cell come in several of them: asked per claim, a cell's air was asked
again and again within the hour (15 of a 46 s round in `make bench`). The hours asked
depend only on the hour (`evaluation.air_hours`), so within an hour a cell's air is asked
once and kept; the next hour starts afresh. What a station reports meanwhile for the hour
that ended is not seen by the later claims of that hour: the round decides on the air as
its first claim found it, as one round should.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from cleanair_core.air.quality_source import AirQualitySource
from cleanair_core.alerts.evaluation import Cell, CellAir, fetch_cell_air, last_hour_end
from cleanair_core.offload import Offload, inline


class CellAirCache:
    """The air fetched for cells during the current hour, each with whether it holds the
    forecast's hours. Used from one event loop (a worker's); not thread-safe."""

    def __init__(self) -> None:
        self._hour: datetime | None = None
        self._cells: dict[Cell, tuple[CellAir, bool]] = {}

    async def air(
        self,
        source: AirQualitySource,
        cells: Mapping[Cell, bool],
        now: datetime,
        *,
        offload: Offload = inline,
    ) -> dict[Cell, CellAir]:
        """`fetch_cell_air(source, cells, now)`, asking the source only for the cells not
        kept for this hour (or kept without the forecast's hours a cell now wants)."""
        hour = last_hour_end(now)
        if hour != self._hour:
            self._hour, self._cells = hour, {}
        missing = {
            cell: forecast
            for cell, forecast in cells.items()
            if cell not in self._cells or (forecast and not self._cells[cell][1])
        }
        fetched = await fetch_cell_air(source, missing, now, offload=offload)
        for cell, air in fetched.items():
            self._cells[cell] = (air, missing[cell])
        return {cell: self._cells[cell][0] for cell in cells if cell in self._cells}
