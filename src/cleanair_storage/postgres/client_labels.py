"""PostgreSQL: recognised client labels (`ClientLabelStore`)."""

from __future__ import annotations

from datetime import datetime

from cleanair_storage.postgres.database import PostgresDatabase


class PostgresClientLabels(PostgresDatabase):
    """The recognised client labels."""

    def add_client_label(self, label: str, at: datetime) -> bool:
        with self._conn() as conn:
            cur = conn.execute(
                "INSERT INTO client_labels (label, created_at) VALUES (%s, %s) "
                "ON CONFLICT (label) DO NOTHING",
                (label, at),
            )
            return cur.rowcount == 1

    def is_client_label(self, label: str) -> bool:
        with self._conn() as conn:
            row = conn.execute("SELECT 1 FROM client_labels WHERE label = %s", (label,)).fetchone()
        return row is not None
