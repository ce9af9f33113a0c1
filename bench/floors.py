"""What a score request cannot go below with this stack: the framework's part and the store's.

1. Litestar alone: a POST whose JSON body is decoded into a msgspec struct, behind an
   authentication middleware that checks nothing, answering a struct: the HTTP work a score
   request does, with no token lookup, no store and no model. As a ratio to the bare GET.
2. The store alone: the durable SQLite calls one score request makes over the embedded model
   (the admission read; the rate-limit hit and final debit in one write), timed in a loop,
   no HTTP, each write a batch of one (no group commit to share it).

Together they bound the in-process ratio any score endpoint on this stack could reach while
every acknowledged charge is committed before its answer leaves.
"""

from __future__ import annotations

import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from litestar import Litestar, post
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult
from litestar.middleware.base import DefineMiddleware

from cleanair_core.credits.ledger import CreditLimits, Debit, FinalCharge
from cleanair_core.credits.rate_limits import RateHit
from cleanair_storage.sqlite import SqliteStore

STORE_ROUNDS = 3000


class _Point(msgspec.Struct):
    lat: float
    lon: float


class _Score(msgspec.Struct):
    score: int
    ttl: int


class _AnyBearer(AbstractAuthenticationMiddleware):
    async def authenticate_request(self, connection: Any) -> AuthenticationResult:
        return AuthenticationResult(user=connection.headers.get("authorization"), auth=None)


@post("/floor", status_code=200)
async def _floor(data: _Point) -> _Score:
    return _Score(score=round(data.lat), ttl=60)


def framework_app() -> Litestar:
    """Litestar doing a score request's HTTP work and nothing else."""
    return Litestar([_floor], middleware=[DefineMiddleware(_AnyBearer)], openapi_config=None)


def store_floor() -> float:
    """Median seconds of one score request's durable store calls on SQLite."""
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "floor.db")
        limits = CreditLimits(monthly=10**9, daily=10**9)
        timings = []
        for i in range(STORE_ROUNDS):
            now = datetime.now(UTC)
            started = time.perf_counter()
            store.admission("an unknown hash", "requests", now)
            hit = RateHit("requests:connection", i // 1000 * 60, 60, 10**9)
            store.settle_charges(
                [FinalCharge(Debit("user:floor", "connection", "score", 1, now), hit)], limits
            )
            timings.append(time.perf_counter() - started)
        store.close()
    return sorted(timings)[len(timings) // 2]
