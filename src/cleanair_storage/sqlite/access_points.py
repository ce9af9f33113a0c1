"""SQLite: imported Wi-Fi access points, by BSSID hash only (`AccessPointStore`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cleanair_core.air.wifi import KnownAccessPoint, is_bssid_hash
from cleanair_core.geo import Point
from cleanair_storage.sqlite.database import LOOKUP_CHUNK, SqliteDatabase


class SqliteAccessPoints(SqliteDatabase):
    """Imported access points, keyed by BSSID hash only."""

    def put_access_points(self, entries: Iterable[tuple[str, KnownAccessPoint]]) -> int:
        # Rows are built before the write lock is taken, so a slow producer never holds it.
        rows = [
            (bssid_hash, ap.point.lat, ap.point.lon, ap.accuracy_m) for bssid_hash, ap in entries
        ]
        if not all(is_bssid_hash(row[0]) for row in rows):
            raise ValueError("access points are stored under a BSSID hash, never a raw BSSID")
        if not rows:
            return 0
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO access_points (bssid_hash, lat, lon, accuracy_m) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (bssid_hash) DO UPDATE SET "
                "lat = excluded.lat, lon = excluded.lon, accuracy_m = excluded.accuracy_m",
                rows,
            )
        return len(rows)

    def find_access_points(self, bssid_hashes: Sequence[str]) -> Mapping[str, KnownAccessPoint]:
        wanted = list(dict.fromkeys(bssid_hashes))
        found: dict[str, KnownAccessPoint] = {}
        conn = self._read()
        for start in range(0, len(wanted), LOOKUP_CHUNK):
            chunk = wanted[start : start + LOOKUP_CHUNK]
            marks = ", ".join("?" * len(chunk))
            rows = conn.execute(
                "SELECT bssid_hash, lat, lon, accuracy_m FROM access_points "  # noqa: S608
                f"WHERE bssid_hash IN ({marks})",
                chunk,
            ).fetchall()
            for bssid_hash, lat, lon, accuracy_m in rows:
                found[bssid_hash] = KnownAccessPoint(Point(lat, lon), accuracy_m)
        return found

    def count_access_points(self) -> int:
        row = self._read().execute("SELECT COUNT(*) FROM access_points").fetchone()
        return int(row[0])
