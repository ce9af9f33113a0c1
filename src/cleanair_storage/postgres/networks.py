"""PostgreSQL: street networks, their arrays as bytea (`StreetNetworkStore`).

Stored in the database, so a plan worker on any machine loads the same networks.
"""

from __future__ import annotations

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
from cleanair_storage.postgres.database import PostgresDatabase

_SUMMARY = "name, nodes, edges, south, west, north, east, source, imported_at"
_ARRAY_COLUMNS = ", ".join(
    [
        *(name for name, _ in NETWORK_ARRAYS),
        "street_names",
        *(column for column, _, _ in AREA_ARRAYS),
    ]
)


class PostgresStreetNetworks(PostgresDatabase):
    """Street networks, their arrays stored as little-endian bytes."""

    def save_network(self, network: StreetNetwork) -> None:
        # Encoded before the transaction starts: a large network never holds a row lock long.
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
            network.imported_at,
            *blobs,
            names,
            *stored_areas(network.areas),
        )
        updates = ", ".join(
            f"{column} = EXCLUDED.{column}"
            for column in [*_SUMMARY.split(", ")[1:], *_ARRAY_COLUMNS.split(", ")]
        )
        with self._conn() as conn:
            conn.execute(
                f"INSERT INTO street_networks ({_SUMMARY}, {_ARRAY_COLUMNS}) "  # noqa: S608
                f"VALUES ({', '.join(['%s'] * len(row))}) "
                f"ON CONFLICT (name) DO UPDATE SET {updates}",
                row,
            )

    def load_networks(self) -> list[StreetNetwork]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT name, source, imported_at, {_ARRAY_COLUMNS} "  # noqa: S608
                "FROM street_networks ORDER BY name"
            ).fetchall()
        networks = []
        for name, source, imported_at, *columns in rows:
            blobs = columns[: len(NETWORK_ARRAYS)]
            names = columns[len(NETWORK_ARRAYS)]
            area_blobs = [
                None if blob is None else bytes(blob) for blob in columns[len(NETWORK_ARRAYS) + 1 :]
            ]
            arrays = {
                column: None if blob is None else array_of(bytes(blob), kind)
                for (column, kind), blob in zip(NETWORK_ARRAYS, blobs, strict=True)
            }
            # A NULL edge_traffic (stored before it was recorded) gets the class defaults; a
            # NULL edge_name (stored before names were kept) leaves the map without names, and
            # NULL areas (stored before they were kept) without water and parks.
            networks.append(
                StreetNetwork(
                    name=name,
                    source=source,
                    imported_at=imported_at,
                    street_names=names_of(None if names is None else bytes(names)),
                    areas=areas_of(area_blobs),
                    **arrays,  # type: ignore[arg-type]
                )
            )
        return networks

    def network_summaries(self) -> list[NetworkSummary]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_SUMMARY} FROM street_networks ORDER BY name"  # noqa: S608
            ).fetchall()
        return [
            NetworkSummary(
                name=name,
                nodes=nodes,
                edges=edges,
                bounds=(south, west, north, east),
                source=source,
                imported_at=imported_at,
            )
            for name, nodes, edges, south, west, north, east, source, imported_at in rows
        ]

    def delete_network(self, name: str) -> bool:
        with self._conn() as conn:
            cur = conn.execute("DELETE FROM street_networks WHERE name = %s", (name,))
            return cur.rowcount == 1
