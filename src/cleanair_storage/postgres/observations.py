"""PostgreSQL: monitoring stations and their hourly observations (`ObservationStore`).

Every write first locks the one row of `observations_version`, so writers of stations and
observations take turns: a write's counts are exact however many processes import at once,
and the version it bumps is committed with what it wrote. A batch of observations goes in by
COPY into a session-local table, then two statements: one counts what the batch does (a key
given twice counts one row after another, as the memory adapter does), one writes each
key's last value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from cleanair_core.air.observations import (
    OBSERVED,
    AreaType,
    Observation,
    ObservationsWritten,
    Station,
    StationSummary,
    StationType,
    validate_observations,
)
from cleanair_core.air.pollutants import Pollutant
from cleanair_storage.observation_rows import station_from_row
from cleanair_storage.postgres.database import Connection, PostgresDatabase

_LOCK_VERSION = "SELECT version FROM observations_version FOR UPDATE"
_BUMP_VERSION = "UPDATE observations_version SET version = version + 1"
#: The batch being written, on the connection that writes it; emptied before and after use, so
#: several writes in one unit of work each see their own rows only.
_INCOMING = "incoming_observations"
_COUNT = f"""
    WITH batch AS (
        SELECT i.value,
               o.value AS stored,
               lag(i.value) OVER (
                   PARTITION BY i.station_id, i.pollutant, i.hour_end ORDER BY i.seq
               ) AS previous
        FROM {_INCOMING} i
        LEFT JOIN observations o
            ON o.station_id = i.station_id AND o.pollutant = i.pollutant
            AND o.hour_end = i.hour_end
    )
    SELECT
        count(*) FILTER (WHERE previous IS NULL AND stored IS NULL),
        count(*) FILTER (
            WHERE coalesce(previous, stored) IS NOT NULL
            AND coalesce(previous, stored) <> value
        )
    FROM batch
"""  # noqa: S608
_WRITE = f"""
    INSERT INTO observations (station_id, pollutant, hour_end, value)
    SELECT DISTINCT ON (station_id, pollutant, hour_end) station_id, pollutant, hour_end, value
    FROM {_INCOMING}
    ORDER BY station_id, pollutant, hour_end, seq DESC
    ON CONFLICT (station_id, pollutant, hour_end) DO UPDATE SET value = EXCLUDED.value
    WHERE observations.value IS DISTINCT FROM EXCLUDED.value
"""  # noqa: S608


def _utc(at: datetime | None) -> datetime | None:
    return None if at is None else at.astimezone(UTC)


class PostgresObservations(PostgresDatabase):
    """Stations and their hourly observations, with the version readers cache against."""

    def put_stations(self, stations: Iterable[Station]) -> int:
        rows = [
            (s.id, s.name, s.point.lat, s.point.lon, _text(s.station_type), _text(s.area_type))
            for s in stations
        ]
        if not rows:
            return 0
        with self._conn() as conn, conn.cursor() as cur:
            cur.execute(_LOCK_VERSION)
            cur.executemany(
                "INSERT INTO stations (id, name, lat, lon, station_type, area_type) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
                "name = EXCLUDED.name, lat = EXCLUDED.lat, lon = EXCLUDED.lon, "
                "station_type = EXCLUDED.station_type, area_type = EXCLUDED.area_type",
                rows,
            )
            cur.execute(_BUMP_VERSION)
        return len(rows)

    def put_observations(self, observations: Iterable[Observation]) -> ObservationsWritten:
        given = list(observations)
        with self._conn() as conn:
            conn.execute(_LOCK_VERSION)
            validate_observations(given, self._station_ids(conn))
            if not given:
                return ObservationsWritten()
            self._stage(conn, given)
            counted = conn.execute(_COUNT).fetchone()
            assert counted is not None
            added, replaced = int(counted[0]), int(counted[1])
            conn.execute(_WRITE)
            conn.execute(f"TRUNCATE {_INCOMING}")
            if added or replaced:
                conn.execute(_BUMP_VERSION)
        return ObservationsWritten(added, replaced, len(given) - added - replaced)

    @staticmethod
    def _station_ids(conn: Connection) -> set[str]:
        return {str(station_id) for (station_id,) in conn.execute("SELECT id FROM stations")}

    @staticmethod
    def _stage(conn: Connection, given: list[Observation]) -> None:
        """COPY the batch, numbered in the order given, into this session's staging table."""
        conn.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {_INCOMING} ("
            " seq INTEGER NOT NULL,"
            ' station_id TEXT COLLATE "C" NOT NULL,'
            ' pollutant TEXT COLLATE "C" NOT NULL,'
            " hour_end TIMESTAMPTZ NOT NULL,"
            " value DOUBLE PRECISION NOT NULL)"
        )
        conn.execute(f"TRUNCATE {_INCOMING}")
        with conn.cursor() as cur:
            copy_rows = f"COPY {_INCOMING} (seq, station_id, pollutant, hour_end, value) FROM STDIN"
            with cur.copy(copy_rows) as copy:
                for seq, o in enumerate(given):
                    copy.write_row((seq, o.station_id, o.pollutant.value, o.hour_end, o.value))
        conn.execute(f"ANALYZE {_INCOMING}")

    def list_stations(self) -> list[Station]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT id, name, lat, lon, station_type, area_type FROM stations ORDER BY id"
            ).fetchall()
        return [station_from_row(*row) for row in rows]

    def station_summaries(self) -> list[StationSummary]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT s.id, s.name, s.lat, s.lon, s.station_type, s.area_type, "
                "count(o.hour_end), min(o.hour_end), max(o.hour_end) "
                "FROM stations s LEFT JOIN observations o ON o.station_id = s.id "
                "GROUP BY s.id ORDER BY s.id"
            ).fetchall()
        return [
            StationSummary(station_from_row(*station), int(count), _utc(first), _utc(last))
            for *station, count, first, last in rows
        ]

    def observations_between(
        self, start: datetime, end: datetime, pollutants: Sequence[Pollutant] = OBSERVED
    ) -> list[Observation]:
        wanted = sorted({Pollutant(p).value for p in pollutants})
        if not wanted:
            return []
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT station_id, pollutant, hour_end, value FROM observations "
                "WHERE hour_end >= %s AND hour_end <= %s AND pollutant = ANY(%s) "
                "ORDER BY hour_end, station_id, pollutant",
                (start, end, wanted),
            ).fetchall()
        return [
            Observation(station_id, Pollutant(pollutant), hour_end, value)
            for station_id, pollutant, hour_end, value in rows
        ]

    def observations_version(self) -> int:
        with self._statement() as conn:
            row = conn.execute("SELECT version FROM observations_version").fetchone()
        assert row is not None
        return int(row[0])

    def delete_observations_before(self, cutoff: datetime) -> int:
        with self._conn() as conn:
            conn.execute(_LOCK_VERSION)
            deleted = conn.execute("DELETE FROM observations WHERE hour_end < %s", (cutoff,))
            if deleted.rowcount:
                conn.execute(_BUMP_VERSION)
        return deleted.rowcount


def _text(kind: StationType | AreaType | None) -> str | None:
    # The enums' values, not the enums: psycopg adapts a StrEnum by its name otherwise.
    return None if kind is None else kind.value
