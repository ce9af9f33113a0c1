"""SQLite: recognised client labels (`ClientLabelStore`)."""

from __future__ import annotations

from datetime import datetime

from cleanair_storage.sqlite.database import SqliteDatabase, timestamp


class SqliteClientLabels(SqliteDatabase):
    """The recognised client labels."""

    def add_client_label(self, label: str, at: datetime) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO client_labels (label, created_at) VALUES (?, ?) "
                "ON CONFLICT (label) DO NOTHING",
                (label, timestamp(at)),
            )
            return cur.rowcount == 1

    def is_client_label(self, label: str) -> bool:
        row = (
            self._read().execute("SELECT 1 FROM client_labels WHERE label = ?", (label,)).fetchone()
        )
        return row is not None
