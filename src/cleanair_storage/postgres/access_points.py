"""PostgreSQL: imported Wi-Fi access points, by BSSID hash only (`AccessPointStore`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cleanair_core.air.wifi import KnownAccessPoint, is_bssid_hash
from cleanair_core.geo import Point
from cleanair_storage.postgres.database import PostgresDatabase


class PostgresAccessPoints(PostgresDatabase):
    """Imported access points, keyed by BSSID hash only."""

    def put_access_points(self, entries: Iterable[tuple[str, KnownAccessPoint]]) -> int:
        rows = [
            (bssid_hash, ap.point.lat, ap.point.lon, ap.accuracy_m) for bssid_hash, ap in entries
        ]
        if not all(is_bssid_hash(row[0]) for row in rows):
            raise ValueError("access points are stored under a BSSID hash, never a raw BSSID")
        if not rows:
            return 0
        with self._conn() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO access_points (bssid_hash, lat, lon, accuracy_m) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (bssid_hash) DO UPDATE SET "
                "lat = EXCLUDED.lat, lon = EXCLUDED.lon, accuracy_m = EXCLUDED.accuracy_m",
                rows,
            )
        return len(rows)

    def find_access_points(self, bssid_hashes: Sequence[str]) -> Mapping[str, KnownAccessPoint]:
        wanted = list(dict.fromkeys(bssid_hashes))
        if not wanted:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT bssid_hash, lat, lon, accuracy_m FROM access_points "
                "WHERE bssid_hash = ANY(%s)",
                (wanted,),
            ).fetchall()
        return {
            str(h): KnownAccessPoint(Point(lat, lon), accuracy) for h, lat, lon, accuracy in rows
        }

    def count_access_points(self) -> int:
        with self._conn() as conn:
            row = conn.execute("SELECT count(*) FROM access_points").fetchone()
        assert row is not None
        return int(row[0])
