"""Calls that depend on no upstream: admitted on one read, charged once answered in one write.

A store that records which of its methods each call used shows the request's store calls;
the answers come from fakes that say whether they were asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from cleanair_core.access.scopes import Scope
from cleanair_core.air.quality_source import Sample
from cleanair_core.air.wifi import WifiAccessPoint
from cleanair_core.clock import ManualClock
from cleanair_core.credits.final_charges import GroupCommit
from cleanair_core.credits.ledger import CreditLimits, Debit, FinalCharge, LedgerEntry, Usage
from cleanair_core.errors import (
    CreditsExhausted,
    Limit,
    MissingScope,
    NotAuthenticated,
    NotPremium,
    RateLimited,
    SourceUnavailable,
    StoreUnavailable,
    Unprocessable,
)
from cleanair_core.keys import TokenKeys
from cleanair_core.policy import Policy
from cleanair_core.ports import Sources, Store
from cleanair_core.service import CleanAir
from cleanair_storage.memory import MemoryStore
from support.fakes import HELSINKI, FakeGeolocator, FakeIp, FakeNamer, FakeSource

KEYS = TokenKeys(b"final-charges-tests-key-32-bytes!!")
NOW = datetime(2026, 11, 22, 10, 15, 30, tzinfo=UTC)
#: The store methods that write.
WRITES = {"hit", "debit", "confirm_charge", "refund", "settle_charges"}


class RecordingStore:
    """A MemoryStore that records the name of every method called on it."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if not callable(value):
            return value

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return value(*args, **kwargs)

        return recorded

    def writes(self) -> list[str]:
        return [call for call in self.calls if call in WRITES]


def make_core(
    *,
    source: FakeSource | None = None,
    local_air: bool = True,
    requests_per_minute: int = 600,
    credits: CreditLimits | None = None,
) -> tuple[CleanAir, RecordingStore, str]:
    store = RecordingStore()
    sources = Sources(
        source or FakeSource(),
        FakeGeolocator(HELSINKI),
        FakeIp(),
        FakeNamer(),
        local_air=local_air,
        local_wifi=True,
    )
    policy = Policy(
        requests_per_minute=requests_per_minute, credits=credits or CreditLimits(1000, 100)
    )
    core = CleanAir(cast(Store, store), KEYS, policy, ManualClock(NOW), sources=sources)
    core.add_user("alice")
    token = core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "1.2.3.4").token
    store.calls.clear()
    return core, store, token


def usage(core: CleanAir) -> Usage:
    return core.store.usage("user:alice", NOW)


def score(core: CleanAir, token: str) -> Any:
    admitted = core.admit(token, scope=Scope.AQ_READ, defer_hit=True)
    assert admitted.proof is not None
    return asyncio.run(core.score(admitted.proof, point=HELSINKI, pending=admitted.pending))


# -- one read, one write ----------------------------------------------------------------------


def test_a_local_score_is_one_read_then_one_write_with_no_hold() -> None:
    core, store, token = make_core()
    assert score(core, token).score is not None
    assert store.calls == ["admission", "settle_charges"]
    assert usage(core) == Usage(1, 1)
    # Final at once: nothing held, so nothing for a sweep to refund however late it runs.
    assert core.store.sweep_holds(NOW + timedelta(days=400), "lost") == 0
    # The rate-limit hit was counted with the charge.
    key = f"requests:{core.authenticate(token).connection_id}"
    assert core.store.hit(key, int(NOW.timestamp()) // 60 * 60) == 1 + 1


def test_a_remote_source_keeps_the_held_charge() -> None:
    core, store, token = make_core(local_air=False)
    score(core, token)
    assert store.writes() == ["hit", "debit", "confirm_charge"]
    assert usage(core) == Usage(1, 1)


class HoldingSource(FakeSource):
    """A remote source that holds the air asked for (`holds`) or would fetch it; records
    which samples it was asked about."""

    def __init__(self, *, holds: bool) -> None:
        super().__init__()
        self.holds = holds
        self.asked: list[Sample] = []

    def answers_at_once(self, samples: Sequence[Sample]) -> bool:
        self.asked.extend(samples)
        return self.holds


@pytest.mark.parametrize(
    ("holds", "writes"),
    [(True, ["settle_charges"]), (False, ["hit", "debit", "confirm_charge"])],
)
def test_a_remote_source_holding_the_air_asked_is_charged_once_answered(
    holds: bool, writes: list[str]
) -> None:
    source = HoldingSource(holds=holds)
    core, store, token = make_core(source=source, local_air=False)
    score(core, token)
    assert store.writes() == writes
    assert usage(core) == Usage(1, 1)
    assert source.asked == source.samples  # asked about the very air the score used


def test_a_scan_on_a_remote_source_keeps_the_held_charge() -> None:
    # Where a scan lands is known only once it is looked up: the air asked, only then.
    source = HoldingSource(holds=True)
    core, store, token = make_core(source=source, local_air=False)
    admitted = core.admit(token, scope=Scope.AQ_READ, defer_hit=True)
    assert admitted.proof is not None
    scan = [WifiAccessPoint("01:23:45:67:89:ab", -50), WifiAccessPoint("01:23:45:67:89:ac", -60)]
    asyncio.run(core.score(admitted.proof, wifi=scan, pending=admitted.pending))
    assert store.writes() == ["hit", "debit", "confirm_charge"]
    assert source.asked == []


@pytest.mark.parametrize(
    ("local_air", "local_wifi", "wifi_lookup", "upstream"),
    [
        (True, True, True, False),
        (True, False, False, False),  # coordinates given: no scan is looked up
        (True, False, True, True),
        (False, True, False, True),
    ],
)
def test_a_call_needs_an_upstream_when_its_air_or_its_scan_lookup_is_remote(
    local_air: bool, local_wifi: bool, wifi_lookup: bool, upstream: bool
) -> None:
    from cleanair_core.use_cases.context import needs_upstream

    sources = Sources(FakeSource(), local_air=local_air, local_wifi=local_wifi)
    assert needs_upstream(sources, wifi_lookup=wifi_lookup) is upstream


def test_a_forecast_and_a_route_are_charged_once_answered_too() -> None:
    from datetime import date

    from cleanair_core.routes.enrichment import Waypoint

    core, store, token = make_core()
    admitted = core.admit(token, scope=Scope.AQ_READ, defer_hit=True)
    assert admitted.proof is not None
    asyncio.run(
        core.forecast(
            admitted.proof,
            day=date(2026, 11, 22),
            timezone="UTC",
            point=HELSINKI,
            pending=admitted.pending,
        )
    )
    routes = core.admit(token, scope=Scope.AQ_ROUTES, defer_hit=True)
    assert routes.proof is not None
    asyncio.run(
        core.enrich_route(
            routes.proof,
            waypoints=[Waypoint(HELSINKI), Waypoint(HELSINKI)],
            start_time=NOW,
            pending=routes.pending,
        )
    )
    assert store.writes() == ["settle_charges", "settle_charges"]
    assert usage(core) == Usage(4, 4)


# -- nothing written without an answer --------------------------------------------------------


def test_a_call_that_fails_writes_nothing_but_its_hit_stays_pending() -> None:
    core, store, token = make_core(source=FakeSource(fail=True))
    admitted = core.admit(token, scope=Scope.AQ_READ, defer_hit=True)
    assert admitted.proof is not None
    assert admitted.pending is not None
    with pytest.raises(SourceUnavailable):
        asyncio.run(core.score(admitted.proof, point=HELSINKI, pending=admitted.pending))
    assert store.writes() == []
    assert core.store.entries("user:alice") == []
    # Whoever ends the request counts it: once.
    assert core.count_pending_hit(admitted.pending) is False
    assert core.count_pending_hit(admitted.pending) is False
    assert store.writes() == ["hit"]


def test_a_pool_already_spent_is_told_before_any_work() -> None:
    source = FakeSource()
    core, _store, token = make_core(source=source, credits=CreditLimits(1000, 1))
    score(core, token)
    source.samples.clear()
    with pytest.raises(CreditsExhausted) as raised:
        score(core, token)
    assert raised.value.limit is Limit.DAILY_BURST
    assert source.samples == []  # the air was never asked for
    assert usage(core) == Usage(1, 1)


def test_a_lost_race_for_the_last_credit_answers_429_and_charges_nothing() -> None:
    core, _store, token = make_core(credits=CreditLimits(1000, 1))
    admitted = core.admit(token, scope=Scope.AQ_READ, defer_hit=True)
    assert admitted.proof is not None
    score(core, token)  # another request takes the last credit after the first one's read
    with pytest.raises(CreditsExhausted):
        asyncio.run(core.score(admitted.proof, point=HELSINKI, pending=admitted.pending))
    assert usage(core) == Usage(1, 1)
    assert len(core.store.entries("user:alice")) == 1


def test_a_lost_race_for_the_last_request_answers_429_and_charges_nothing() -> None:
    core, _store, token = make_core(requests_per_minute=1)
    admitted = core.admit(token, scope=Scope.AQ_READ, defer_hit=True)
    assert admitted.proof is not None
    score(core, token)  # the window's one request, taken after the first one's read
    with pytest.raises(RateLimited) as raised:
        asyncio.run(core.score(admitted.proof, point=HELSINKI, pending=admitted.pending))
    assert raised.value.retry_after == 30  # the minute resets at 10:16:00
    assert usage(core) == Usage(1, 1)


# -- admission --------------------------------------------------------------------------------


def test_admission_refuses_in_order_unknown_token_rate_limit_then_scope() -> None:
    core, _store, _ = make_core(requests_per_minute=2)
    core.add_partner("acme")
    token = core.issue_partner_token("acme", "backend", [Scope.AQ_READ]).token
    with pytest.raises(NotAuthenticated):
        core.admit(token[:-1] + ("A" if token[-1] != "A" else "B"), scope=Scope.AQ_READ)
    with pytest.raises(MissingScope):  # a refused request counts against the limit too
        core.admit(token, scope=Scope.AQ_ROUTES, defer_hit=True)
    admitted = core.admit(token, scope=Scope.AQ_READ, defer_hit=True)
    assert admitted.proof is not None
    asyncio.run(core.score(admitted.proof, point=HELSINKI, pending=admitted.pending))
    with pytest.raises(RateLimited):
        core.admit(token, scope=Scope.AQ_ROUTES, defer_hit=True)  # 429 before 403
    core.deactivate_partner("acme")
    with pytest.raises(NotAuthenticated):  # 401 before 429
        core.admit(token, scope=Scope.AQ_READ)


def test_admission_reads_premium_with_the_token() -> None:
    core, store, token = make_core()
    core.set_premium("alice", False)
    store.calls.clear()
    with pytest.raises(NotPremium):
        core.admit(token, scope=Scope.AQ_READ, defer_hit=True)
    assert store.calls == ["admission", "hit"]  # one read; the refused request counted


def test_a_route_without_a_charge_counts_its_hit_at_admission() -> None:
    core, store, token = make_core()
    admitted = core.admit(token)
    assert (admitted.proof, admitted.pending) == (None, None)
    assert store.calls == ["admission", "hit"]


def test_an_unprocessable_request_writes_nothing_in_the_call() -> None:
    core, store, token = make_core()
    admitted = core.admit(token, scope=Scope.AQ_READ, defer_hit=True)
    assert admitted.proof is not None
    with pytest.raises(Unprocessable):
        asyncio.run(core.score(admitted.proof, pending=admitted.pending))
    assert store.writes() == []


# -- group commit -----------------------------------------------------------------------------


class BatchesStore(MemoryStore):
    """Records the size of every batch of final charges it settles."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []
        self.fail = False

    def settle_charges(self, charges: Any, limits: CreditLimits) -> Any:
        self.batches.append(len(charges))
        if self.fail:
            raise StoreUnavailable()
        return super().settle_charges(charges, limits)


def charge_of(n: int) -> Callable[[], FinalCharge]:
    return lambda: FinalCharge(Debit("user:alice", f"c{n}", "score", 1, NOW))


def test_concurrent_final_charges_are_committed_together() -> None:
    store = BatchesStore()
    commits = GroupCommit(store, CreditLimits(1000, 100))

    async def main() -> list[Any]:
        return await asyncio.gather(*(commits.settle(charge_of(n)) for n in range(5)))

    settled = asyncio.run(main())
    assert store.batches == [5]
    assert all(isinstance(s, LedgerEntry) for s in settled)
    assert [s.connection_id for s in settled] == [f"c{n}" for n in range(5)]

    async def one_after_another() -> None:
        for n in range(2):
            await commits.settle(charge_of(n))

    asyncio.run(one_after_another())
    assert store.batches == [5, 1, 1]


def test_charges_queued_while_a_batch_commits_go_in_the_next_one() -> None:
    store = BatchesStore()

    async def main() -> None:
        release = asyncio.Event()
        first_running = asyncio.Event()

        async def offload(work: Callable[[], Any]) -> Any:
            first_running.set()
            await release.wait()  # the batch's commit is under way
            return work()

        commits = GroupCommit(store, CreditLimits(1000, 100), offload)
        first = asyncio.create_task(commits.settle(charge_of(0)))
        await first_running.wait()
        later = [asyncio.create_task(commits.settle(charge_of(n))) for n in (1, 2, 3)]
        await asyncio.sleep(0)  # a yield, no time: the three are queued
        release.set()
        await asyncio.gather(first, *later)

    asyncio.run(main())
    assert store.batches == [1, 3]


def test_a_charge_cancelled_before_its_batch_is_left_out_of_it() -> None:
    store = BatchesStore()
    commits = GroupCommit(store, CreditLimits(1000, 100))

    async def main() -> Any:
        gone = asyncio.create_task(commits.settle(charge_of(0)))
        kept = asyncio.create_task(commits.settle(charge_of(1)))
        await asyncio.sleep(0)  # a yield: both are queued, their batch not started
        gone.cancel()
        return await kept

    settled = asyncio.run(main())
    assert isinstance(settled, LedgerEntry)
    assert store.batches == [1]
    assert [e.connection_id for e in store.entries("user:alice")] == ["c1"]


def test_a_failed_batch_fails_every_charge_in_it_and_the_next_batch_runs() -> None:
    store = BatchesStore()
    store.fail = True
    commits = GroupCommit(store, CreditLimits(1000, 100))

    async def main() -> list[Any]:
        return await asyncio.gather(
            *(commits.settle(charge_of(n)) for n in range(3)), return_exceptions=True
        )

    assert all(isinstance(r, StoreUnavailable) for r in asyncio.run(main()))
    store.fail = False
    assert isinstance(asyncio.run(main())[0], LedgerEntry)
    assert store.batches == [3, 3]


def test_a_drain_cancelled_mid_batch_cancels_its_charges_instead_of_leaving_them() -> None:
    store = BatchesStore()

    async def main() -> tuple[object, ...]:
        started = asyncio.Event()

        async def offload(work: Callable[[], Any]) -> Any:
            started.set()
            await asyncio.Event().wait()  # a commit that never returns: the loop shuts down

        commits = GroupCommit(store, CreditLimits(1000, 100), offload)
        first = asyncio.create_task(commits.settle(charge_of(0)))
        await started.wait()
        queued = asyncio.create_task(commits.settle(charge_of(1)))
        await asyncio.sleep(0)
        drains = [
            task
            for task in asyncio.all_tasks()
            if getattr(task.get_coro(), "__qualname__", "") == "GroupCommit._drain"
        ]
        assert len(drains) == 1
        drains[0].cancel()
        async with asyncio.timeout(30):
            return await asyncio.gather(first, queued, return_exceptions=True)

    outcomes = asyncio.run(main())
    assert all(isinstance(o, asyncio.CancelledError) for o in outcomes)
