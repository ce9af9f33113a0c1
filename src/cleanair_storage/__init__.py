"""Storage adapters (in-memory and SQLite) for the core ports."""
