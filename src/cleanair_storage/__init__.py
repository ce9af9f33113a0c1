"""Storage adapters (in-memory, SQLite and PostgreSQL) for the core ports."""
