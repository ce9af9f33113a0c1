"""The PostgreSQL store (psycopg 3): one database shared by every process on every machine."""
