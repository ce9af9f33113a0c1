"""SQLite: street networks, their arrays as blobs (`StreetNetworkStore`)."""

from __future__ import annotations

import contextlib
import sqlite3
import time

from cleanair_core.errors import StoreUnavailable
from cleanair_core.offload import WouldBlock
from cleanair_core.routes.network import NetworkSummary, StreetNetwork
from cleanair_storage.network_arrays import (
    AREA_ARRAYS,
    NETWORK_ARRAYS,
    areas_of,
    array_of,
    names_bytes,
    names_of,
    stored_areas,
    stored_arrays,
)
from cleanair_storage.sqlite.database import SqliteDatabase, instant_or_none, timestamp

#: Tries, and the pause between them, to cut the WAL back after a large write.
SHRINK_ATTEMPTS = 20
SHRINK_RETRY_S = 0.025


class SqliteStreetNetworks(SqliteDatabase):
    """Street networks, their arrays stored as little-endian blobs."""

    _NETWORK_SUMMARY_COLUMNS = "name, nodes, edges, south, west, north, east, source, imported_at"

    def save_network(self, network: StreetNetwork) -> None:
        # Encoded before the write lock is taken: a large network never holds it for long.
        blobs = stored_arrays(network)
        names = None if network.edge_name is None else names_bytes(network.street_names)
        south, west, north, east = network.bounds
        row = (
            network.name,
            network.node_count,
            network.edge_count,
            south,
            west,
            north,
            east,
            network.source,
            None if network.imported_at is None else timestamp(network.imported_at),
            *blobs,
            names,
            *stored_areas(network.areas),
        )
        columns = ", ".join(
            [
                self._NETWORK_SUMMARY_COLUMNS,
                *(name for name, _ in NETWORK_ARRAYS),
                "street_names",
                *(column for column, _, _ in AREA_ARRAYS),
            ]
        )
        marks = ", ".join("?" * len(row))
        with self._write() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO street_networks ({columns}) VALUES ({marks})",  # noqa: S608
                row,
            )
        self._shrink_wal()

    def _shrink_wal(self) -> None:
        """Give back the disk a large transaction took in the WAL now, rather than at the
        next write (best effort: a reader in the middle of a read keeps it until then; inside
        a unit of work, the WAL is left for the checkpoint thread)."""
        if self._in_transaction():
            return
        for _ in range(SHRINK_ATTEMPTS):
            with (
                contextlib.suppress(sqlite3.OperationalError, StoreUnavailable, WouldBlock),
                self._outside_transaction() as conn,
            ):
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if not busy:
                    return
            # Another connection's checkpoint (a server's background thread) held it: that
            # one ends within milliseconds, so try again shortly.
            time.sleep(SHRINK_RETRY_S)

    def load_networks(self) -> list[StreetNetwork]:
        rows = (
            self._read()
            .execute(
                "SELECT name, source, imported_at, node_lat, node_lon, edge_from, edge_to, "
                "edge_length, edge_class, edge_access, edge_traffic, edge_name, street_names, "
                "area_kind, area_ring_end, area_lat, area_lon "
                "FROM street_networks ORDER BY name"
            )
            .fetchall()
        )
        return [
            StreetNetwork(
                name=row[0],
                node_lat=array_of(row[3], "float64"),
                node_lon=array_of(row[4], "float64"),
                edge_from=array_of(row[5], "int32"),
                edge_to=array_of(row[6], "int32"),
                edge_length=array_of(row[7], "float64"),
                edge_class=array_of(row[8], "uint8"),
                edge_access=array_of(row[9], "uint8"),
                # NULL: stored before traffic was recorded; the class defaults stand in.
                edge_traffic=None if row[10] is None else array_of(row[10], "float64"),
                # NULL: stored before street names were kept; the map shows none.
                edge_name=None if row[11] is None else array_of(row[11], "int32"),
                street_names=names_of(row[12]),
                # NULL: stored before areas were kept; the map draws streets only.
                areas=areas_of(list(row[13:17])),
                source=row[1],
                imported_at=instant_or_none(row[2]),
            )
            for row in rows
        ]

    def network_summaries(self) -> list[NetworkSummary]:
        rows = (
            self._read()
            .execute(
                f"SELECT {self._NETWORK_SUMMARY_COLUMNS} FROM street_networks "  # noqa: S608
                "ORDER BY name"
            )
            .fetchall()
        )
        return [
            NetworkSummary(
                name=name,
                nodes=nodes,
                edges=edges,
                bounds=(south, west, north, east),
                source=source,
                imported_at=instant_or_none(imported_at),
            )
            for name, nodes, edges, south, west, north, east, source, imported_at in rows
        ]

    def delete_network(self, name: str) -> bool:
        with self._write() as conn:
            cur = conn.execute("DELETE FROM street_networks WHERE name = ?", (name,))
            return cur.rowcount == 1
