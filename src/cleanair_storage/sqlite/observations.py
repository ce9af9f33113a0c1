"""SQLite: monitoring stations and their hourly observations (`ObservationStore`).

A write of observations is one transaction (or part of the caller's unit of work), and
counts what it did in two passes over the batch: an insert that skips stored keys (what it
inserted was added), then an update of the values that differ (what it updated was
replaced). The passes run through `executemany`, so a 400k-row import is a few seconds, and
they count a key given twice in one batch as the memory adapter does, one row after another.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime

from cleanair_core.air.observations import (
    OBSERVED,
    Observation,
    ObservationsWritten,
    Station,
    StationSummary,
    validate_observations,
)
from cleanair_core.air.pollutants import Pollutant
from cleanair_storage.observation_rows import station_from_row
from cleanair_storage.sqlite.database import SqliteDatabase, instant, instant_or_none

_BUMP_VERSION = "UPDATE observations_version SET version = version + 1 WHERE id = 1"


class SqliteObservations(SqliteDatabase):
    """Stations and their hourly observations, with the version readers cache against."""

    def put_stations(self, stations: Iterable[Station]) -> int:
        rows = [
            (s.id, s.name, s.point.lat, s.point.lon, s.station_type, s.area_type) for s in stations
        ]
        if not rows:
            return 0
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO stations (id, name, lat, lon, station_type, area_type) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "name = excluded.name, lat = excluded.lat, lon = excluded.lon, "
                "station_type = excluded.station_type, area_type = excluded.area_type",
                rows,
            )
            conn.execute(_BUMP_VERSION)
        return len(rows)

    def put_observations(self, observations: Iterable[Observation]) -> ObservationsWritten:
        # Rows are built before the write lock is taken, so a slow producer never holds it.
        given = list(observations)
        rows = [
            (o.station_id, o.pollutant.value, int(o.hour_end.timestamp()), o.value) for o in given
        ]
        with self._write() as conn:
            # Read under the write lock: no station can be added between the check and the
            # write (stations are never deleted, but this keeps the check exact regardless).
            validate_observations(given, self._station_ids(conn))
            if not rows:
                return ObservationsWritten()
            added = conn.executemany(
                "INSERT INTO observations (station_id, pollutant, hour_end, value) "
                "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                rows,
            ).rowcount
            # A row just inserted already holds its value, so the update leaves it alone.
            replaced = conn.executemany(
                "UPDATE observations SET value = ?4 "
                "WHERE station_id = ?1 AND pollutant = ?2 AND hour_end = ?3 AND value IS NOT ?4",
                rows,
            ).rowcount
            if added or replaced:
                conn.execute(_BUMP_VERSION)
        return ObservationsWritten(added, replaced, len(rows) - added - replaced)

    @staticmethod
    def _station_ids(conn: sqlite3.Connection) -> set[str]:
        return {str(station_id) for (station_id,) in conn.execute("SELECT id FROM stations")}

    def list_stations(self) -> list[Station]:
        rows = self._read().execute(
            "SELECT id, name, lat, lon, station_type, area_type FROM stations ORDER BY id"
        )
        return [station_from_row(*row) for row in rows]

    def station_summaries(self) -> list[StationSummary]:
        # The observations' primary key starts with the station, so the join reads each
        # station's hours as one range of the index.
        rows = self._read().execute(
            "SELECT s.id, s.name, s.lat, s.lon, s.station_type, s.area_type, "
            "count(o.hour_end), min(o.hour_end), max(o.hour_end) "
            "FROM stations s LEFT JOIN observations o ON o.station_id = s.id "
            "GROUP BY s.id ORDER BY s.id"
        )
        return [
            StationSummary(
                station_from_row(*station), count, instant_or_none(first), instant_or_none(last)
            )
            for *station, count, first, last in rows
        ]

    def observations_between(
        self, start: datetime, end: datetime, pollutants: Sequence[Pollutant] = OBSERVED
    ) -> list[Observation]:
        wanted = sorted({Pollutant(p).value for p in pollutants})
        if not wanted:
            return []
        marks = ", ".join("?" * len(wanted))
        # Bounds as float seconds: an instant between two hours compares exactly with the
        # stored integers.
        rows = self._read().execute(
            "SELECT station_id, pollutant, hour_end, value FROM observations "  # noqa: S608
            f"WHERE hour_end >= ? AND hour_end <= ? AND pollutant IN ({marks}) "
            "ORDER BY hour_end, station_id, pollutant",
            (start.timestamp(), end.timestamp(), *wanted),
        )
        return [
            Observation(station_id, Pollutant(pollutant), instant(hour_end), value)
            for station_id, pollutant, hour_end, value in rows
        ]

    def observations_version(self) -> int:
        row = self._read().execute("SELECT version FROM observations_version").fetchone()
        return int(row[0])

    def delete_observations_before(self, cutoff: datetime) -> int:
        with self._write() as conn:
            deleted = conn.execute(
                "DELETE FROM observations WHERE hour_end < ?", (cutoff.timestamp(),)
            ).rowcount
            if deleted:
                conn.execute(_BUMP_VERSION)
        return deleted
