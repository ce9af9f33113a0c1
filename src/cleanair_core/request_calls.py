"""The request path's store calls, awaitable (`RequestStore`), and their default: the sync
ports run on an `Offload`.

Every charged request makes the same few store calls: its admission read, perhaps a
rate-limit hit, perhaps its client label, and its final charge. The use cases await them
here rather than hand sync calls to an offload, so that an adapter whose driver speaks
asyncio (PostgreSQL's, `cleanair_storage.postgres.requests`) runs them on the event loop
with no thread hand-over. Any other store keeps its sync ports and gets `offloaded`: each
call run on the offload it was given (SQLite's `here_or_in_thread`: right here unless the
store would wait), as before; a store whose commits wait for the disk and that commits
writes together on a thread of its own (`GroupWrites`: SQLite's with `synchronous=FULL`)
takes the writes (rate-limit hits, final charges) there directly, never tried on the loop
first, so hits and charges of concurrent requests share one sync. Sync callers (the CLI, an
embedder without an event loop) never meet this port: they call the sync ports.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from cleanair_core.credits.ledger import CreditLimits, FinalCharge, Settlement
from cleanair_core.offload import Offload

if TYPE_CHECKING:  # ports imports this module: its names are for annotations only
    from cleanair_core.ports import AdmissionRead, Store


class RequestStore(Protocol):
    """Storage port for the calls a request makes from the event loop, each the awaitable
    twin of a sync port's method and bound by the same contract."""

    async def admission(self, token_hash: str, rate_limit: str, at: datetime) -> AdmissionRead:
        """`AdmissionStore.admission`."""
        ...

    async def hit(self, key: str, window_start: int, window_seconds: int = 60) -> int:
        """`RateLimitStore.hit`."""
        ...

    async def is_client_label(self, label: str) -> bool:
        """`ClientLabelStore.is_client_label`."""
        ...

    async def settle_charges(
        self, charges: Sequence[FinalCharge], limits: CreditLimits
    ) -> list[Settlement]:
        """`CreditLedger.settle_charges`."""
        ...


@runtime_checkable
class GroupWrites(Protocol):
    """A store that can commit the request path's writes together away from the loop."""

    def group_writes(self) -> Offload | None:
        """The offload its writes go to, committed together with whatever else is queued
        (one sync for them all); None when its writes may be tried right here instead."""
        ...


class _Offloaded:
    """`RequestStore` over a sync store: each call run on `offload`, and its writes on the
    store's `GroupWrites` when it has them."""

    def __init__(self, store: Store, offload: Offload) -> None:
        self._store = store
        self._offload = offload
        together = store.group_writes() if isinstance(store, GroupWrites) else None
        self._writes = offload if together is None else together

    async def admission(self, token_hash: str, rate_limit: str, at: datetime) -> AdmissionRead:
        return await self._offload(
            functools.partial(self._store.admission, token_hash, rate_limit, at)
        )

    async def hit(self, key: str, window_start: int, window_seconds: int = 60) -> int:
        return await self._writes(
            functools.partial(self._store.hit, key, window_start, window_seconds)
        )

    async def is_client_label(self, label: str) -> bool:
        return await self._offload(functools.partial(self._store.is_client_label, label))

    async def settle_charges(
        self, charges: Sequence[FinalCharge], limits: CreditLimits
    ) -> list[Settlement]:
        return await self._writes(functools.partial(self._store.settle_charges, charges, limits))


def offloaded(store: Store, offload: Offload) -> RequestStore:
    """The request path's calls on `store`'s sync ports, each run on `offload` (the
    deployment's `store_calls`: each is one atomic step at most, so `here_unless_blocked`
    may run them right here)."""
    return _Offloaded(store, offload)


def offload_of(requests: RequestStore) -> Offload | None:
    """The offload an `offloaded` request store runs its calls on; None for an adapter's
    own. A use case making several calls in a row runs them there as one piece of work
    instead: one hand-over at most, as before there was this port."""
    if not isinstance(requests, _Offloaded) or requests._writes is not requests._offload:
        # A store with group writes: its read here, its write queued for the group commit;
        # as one piece, the read was tried on the loop, then done again in a thread.
        return None
    return requests._offload


def group_writes_of(requests: RequestStore) -> Offload | None:
    """Where an `offloaded` store commits writes together (`GroupWrites`: SQLite's synced
    one); None for any other. A held charge's debit and settlement go there rather than be
    tried on the loop, raise WouldBlock and go to a thread."""
    if isinstance(requests, _Offloaded) and requests._writes is not requests._offload:
        return requests._writes
    return None
