"""The runtime's tests (processes, composition, CLI): the fixtures in support/http_fixtures.py."""

from support.http_fixtures import client, clock, core, database, make_client, no_database, sources

__all__ = ["client", "clock", "core", "database", "make_client", "no_database", "sources"]
