"""PostgreSQL adapter for every storage port: one database shared by every process on every
machine (psycopg 3 with a connection pool).

`database` holds the pool, migrations (`migrations`, `schema`) and units of work; each port
has its own module over it, and `store.PostgresStore` puts them together.
"""

from cleanair_storage.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
