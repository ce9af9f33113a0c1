"""The runtime's tests (processes, composition, CLI): the fixtures in support/http_fixtures.py,
and the process's logging put back after each test (support/logging_fixtures.py)."""

from support.http_fixtures import client, clock, core, database, make_client, no_database, sources
from support.logging_fixtures import restored_logging

__all__ = [
    "client",
    "clock",
    "core",
    "database",
    "make_client",
    "no_database",
    "restored_logging",
    "sources",
]
