"""Count what the request path's PostgreSQL connections send: statements and round trips, read
from libpq's own protocol trace, so a count holds whatever code sends them."""

from __future__ import annotations

import collections
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from psycopg import pq

from cleanair_storage.postgres.requests import AsyncConnection, PostgresRequests


class Sent:
    """The frontend messages traced so far, by name (`Parse`, `Bind`, `Execute`, `Sync`,
    `Query`...), once the trace has ended."""

    def __init__(self) -> None:
        self.messages: collections.Counter[str] = collections.Counter()

    @property
    def statements(self) -> int:
        """Statements run: each extended-protocol Execute, each simple Query."""
        return self.messages["Execute"] + self.messages["Query"]

    @property
    def round_trips(self) -> int:
        """Times the client waited for the server: each Sync (the end of an extended-protocol
        exchange; a pipeline's statements share one) and each simple Query."""
        return self.messages["Sync"] + self.messages["Query"]


@contextmanager
def traced(requests: PostgresRequests) -> Iterator[Sent]:
    """Trace every connection `requests` holds or opens while the block runs."""
    sent = Sent()
    files: list[tuple[AsyncConnection, IO[bytes]]] = []

    def trace(conn: AsyncConnection) -> None:
        file = tempfile.TemporaryFile()  # noqa: SIM115 (closed once read, below)
        conn.pgconn.trace(file.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        files.append((conn, file))

    for pool in requests._pools.values():
        for conn in pool.idle:
            trace(conn)
    connect = requests._connect

    async def connect_traced() -> Any:
        conn = await connect()
        trace(conn)
        return conn

    requests._connect = connect_traced  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        requests._connect = connect  # type: ignore[method-assign]
        for conn, file in files:
            if conn.pgconn.status != pq.ConnStatus.BAD:
                conn.pgconn.untrace()  # flushes what it traced
            file.seek(0)
            for line in file.read().decode(errors="replace").splitlines():
                fields = line.split("\t")
                if len(fields) > 2 and fields[0] == "F":
                    sent.messages[fields[2].split(" ")[0]] += 1
            file.close()
