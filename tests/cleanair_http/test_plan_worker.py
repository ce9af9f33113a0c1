"""The plan worker, driven on a manual clock: it renews a long plan's lease (through a
transient storage error), takes a dead worker's plan once the lease is over, waits the idle
time between looks, and turns a database outage into two log lines.

Every wait of the worker goes through `ClockSleep`, which ends a wait only when the test has
moved the manual clock past it: no test lets real time pass.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import anyio
import attrs
import pytest

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.access.connections import Caller
from cleanair_core.access.scopes import Scope
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.alerts.outbox import NewEvent
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.errors import StoreUnavailable
from cleanair_core.geo import Point
from cleanair_core.ports import Sources
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.plans import AnyPlanResult, Plan, PlanStatus
from cleanair_core.use_cases.routes import AIR_PREPARATION_LEAD
from cleanair_http.app import create_app
from cleanair_http.offloading import in_thread
from cleanair_http.plan_worker import PRUNE_SECONDS, PlanWorker
from cleanair_runtime.composition.settings import Settings
from cleanair_sources.street_router import LoadedNetworks
from cleanair_storage.sqlite import SqliteStore
from support.http import MakeClient, bearer, pair
from support.networks import DLON, ORIGIN, grid

T = TypeVar("T")
NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
LEASE = 60
#: The lease is renewed every third of it.
RENEW_EVERY = LEASE / 3
IDLE = 1.0


@attrs.define(eq=False)
class Nap:
    seconds: float
    end: datetime
    over: anyio.Event = attrs.field(factory=anyio.Event)


class ClockSleep:
    """The worker's `sleep` on a manual clock: a wait ends when the test has moved the clock
    to its end (`advance`), never by itself."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._naps: list[Nap] = []
        self._changed = anyio.Event()

    async def __call__(self, seconds: float) -> None:
        nap = Nap(seconds, self.clock.now() + timedelta(seconds=seconds))
        self._naps.append(nap)
        self._touch()
        try:
            await nap.over.wait()
        finally:
            if nap in self._naps:  # cancelled before its end
                self._naps.remove(nap)
                self._touch()

    def napping(self, seconds: float) -> int:
        """How many waits of `seconds` are under way."""
        return sum(1 for nap in self._naps if nap.seconds == seconds)

    def advance(self, seconds: float) -> None:
        """Move the clock on and end every wait that is then over."""
        now = self.clock.advance(seconds)
        for nap in [nap for nap in self._naps if nap.end <= now]:
            self._naps.remove(nap)
            nap.over.set()
        self._touch()

    async def until(self, ready: Callable[[], bool]) -> None:
        """Return once `ready()`; it is checked whenever a wait begins or ends, which the
        worker does after every step. The real-time limit only turns a hang into a failure."""
        with anyio.fail_after(10):
            while not ready():
                await self._changed.wait()

    def _touch(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()


class HeldAir:
    """Uniform air; the first call takes as long as the test wants (until `release`)."""

    update_interval = 3600

    def __init__(self) -> None:
        self.released = anyio.Event()

    def release(self) -> None:
        self.released.set()

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        await self.released.wait()
        return [{Pollutant.NO2: 20.0} for _ in samples]


def make_core(store: SqliteStore, clock: ManualClock, air: HeldAir) -> CleanAir:
    policy = Policy(credits=CreditLimits(1000, 1000), plan_lease_seconds=LEASE)
    sources = Sources(air, networks=LoadedNetworks([grid(3, 6)]))
    return CleanAir(
        store, TokenKeys(generate_key()), policy, clock, sources=sources, offload=in_thread
    )


def paired(core: CleanAir) -> Caller:
    core.add_user("alice")
    issued = core.redeem_pairing_code(core.create_pairing_code("alice"), "app", "127.0.0.1")
    return core.authenticate(issued.token)


def submit(core: CleanAir, caller: Caller) -> uuid.UUID:
    return core.submit_plan(
        core.authorize(caller, Scope.ROUTES_PLAN, user_owned=True),
        start=ORIGIN,
        end=Point(ORIGIN.lat, ORIGIN.lon + 5 * DLON),
        activity=PlanActivityType.WALKING,
    )


def stored(core: CleanAir, plan_id: uuid.UUID) -> Plan:
    plan = core.store.get_plan(plan_id)
    assert plan is not None
    return plan


class FlakyRenewStore(SqliteStore):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.renewals = 0

    def renew_lease(self, plan_id: uuid.UUID, until: datetime, claim: int | None = None) -> bool:
        self.renewals += 1
        if self.renewals == 1:
            raise RuntimeError("database is locked")  # a transient storage error
        return super().renew_lease(plan_id, until, claim)


def test_a_long_plans_lease_is_renewed_every_third_even_after_a_failed_renewal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock, air = ManualClock(NOW), HeldAir()
    store = FlakyRenewStore(tmp_path / "cleanair.db")
    core = make_core(store, clock, air)
    alice = paired(core)
    first = submit(core, alice)
    sleep = ClockSleep(clock)

    async def main() -> uuid.UUID:
        worker = PlanWorker(core, runners=1, idle_seconds=IDLE, sleep=sleep)
        async with worker.running():
            # The plan runs (the air holds it) and the lease keeper waits a third of a lease.
            await sleep.until(lambda: sleep.napping(RENEW_EVERY) == 1)
            assert stored(core, first).lease_until == NOW + timedelta(seconds=LEASE)
            sleep.advance(RENEW_EVERY)
            await sleep.until(lambda: store.renewals == 1 and sleep.napping(RENEW_EVERY) == 1)
            # The renewal failed: the lease is unchanged and the keeper tries again.
            assert stored(core, first).lease_until == NOW + timedelta(seconds=LEASE)
            sleep.advance(RENEW_EVERY)
            await sleep.until(lambda: store.renewals == 2 and sleep.napping(RENEW_EVERY) == 1)
            assert stored(core, first).lease_until == clock.now() + timedelta(seconds=LEASE)
            assert stored(core, first).status is PlanStatus.PENDING

            air.release()
            await sleep.until(lambda: sleep.napping(IDLE) == 1)  # done, and idle
            assert stored(core, first).status is PlanStatus.COMPLETED

            # The worker lives on: the next plan is planned too.
            second = submit(core, alice)
            worker.notify()
            await sleep.until(
                lambda: (
                    stored(core, second).status is PlanStatus.COMPLETED and sleep.napping(IDLE) == 1
                )
            )
            return second

    try:
        second = anyio.run(main)
        assert stored(core, first).attempts == stored(core, second).attempts == 1
    finally:
        store.close()
    assert [r.getMessage() for r in caplog.records if r.exc_info] == [
        "could not renew a plan's lease"
    ]


def test_a_dead_workers_plan_is_taken_again_once_its_lease_is_over(tmp_path: Path) -> None:
    clock, air = ManualClock(NOW), HeldAir()
    store = SqliteStore(tmp_path / "cleanair.db")
    core = make_core(store, clock, air)
    plan_id = submit(core, paired(core))
    sleep = ClockSleep(clock)

    async def main() -> None:
        dying = PlanWorker(core, runners=1, idle_seconds=IDLE, sleep=sleep)
        # A killed process hands nothing back: its stop is simulated without the hand-back.
        core.release_plan = lambda plan: False  # type: ignore[method-assign]
        async with dying.running():
            await sleep.until(lambda: sleep.napping(RENEW_EVERY) == 1)
        # Its process died mid-plan: nothing was stored, the lease runs on.
        assert stored(core, plan_id).attempts == 1
        del core.release_plan
        air.release()

        async with PlanWorker(core, runners=1, idle_seconds=IDLE, sleep=sleep).running():
            await sleep.until(lambda: sleep.napping(IDLE) == 1)
            sleep.advance(LEASE - 1)  # a look just before the lease is over finds nothing
            await sleep.until(lambda: sleep.napping(IDLE) == 1)
            assert stored(core, plan_id).attempts == 1
            sleep.advance(1)
            await sleep.until(
                lambda: (
                    stored(core, plan_id).status is PlanStatus.COMPLETED
                    and sleep.napping(IDLE) == 1
                )
            )
        assert stored(core, plan_id).attempts == 2

    try:
        anyio.run(main)
    finally:
        store.close()


def test_a_stopped_worker_hands_its_plan_back_for_the_next_to_take_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock, air = ManualClock(NOW), HeldAir()
    store = SqliteStore(tmp_path / "cleanair.db")
    core = make_core(store, clock, air)
    plan_id = submit(core, paired(core))
    sleep = ClockSleep(clock)

    async def main() -> None:
        stopping = PlanWorker(core, runners=1, idle_seconds=IDLE, sleep=sleep)
        async with stopping.running():
            await sleep.until(lambda: sleep.napping(RENEW_EVERY) == 1)
        # Stopped mid-plan (SIGTERM): handed back, no lease, the attempt not counted.
        handed_back = stored(core, plan_id)
        assert handed_back.status is PlanStatus.PENDING
        assert handed_back.lease_until is None
        assert handed_back.attempts == 0
        air.release()
        async with PlanWorker(core, runners=1, idle_seconds=IDLE, sleep=sleep).running():
            # No clock moves: the next worker takes it at once, not after the lease.
            await sleep.until(lambda: stored(core, plan_id).status is PlanStatus.COMPLETED)
        assert stored(core, plan_id).attempts == 1

    with caplog.at_level(logging.INFO, logger="cleanair.plans"):
        try:
            anyio.run(main)
        finally:
            store.close()
    messages = [record.getMessage() for record in caplog.records]
    assert messages.count("claimed a plan") == 2
    assert messages.count("handed a plan back") == 1


class GatedOffload:
    """The core's offload, whose first call (a plan's first path-search step) blocks in its
    thread until `open`: a search that no cancellation can stop."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self._gate = threading.Event()
        self._calls = 0

    def open(self) -> None:
        self._gate.set()

    async def __call__(self, work: Callable[[], T]) -> T:
        self._calls += 1
        if self._calls == 1:

            def gated() -> T:
                self.entered.set()
                self._gate.wait(timeout=10)
                return work()

            return await in_thread(gated)
        return await in_thread(work)


class CompletionsStore(SqliteStore):
    """Records each `complete_plan`: the claim it was made on and whether it was stored."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.completions: list[tuple[int | None, bool]] = []

    def complete_plan(
        self, plan_id: uuid.UUID, result: AnyPlanResult, now: datetime, claim: int | None = None
    ) -> bool:
        stored = super().complete_plan(plan_id, result, now, claim)
        self.completions.append((claim, stored))
        return stored


def test_stop_hands_back_at_once_a_plan_whose_search_thread_runs_on_and_never_stores_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock, air, offload = ManualClock(NOW), HeldAir(), GatedOffload()
    air.release()
    store = CompletionsStore(tmp_path / "cleanair.db")
    policy = Policy(credits=CreditLimits(1000, 1000), plan_lease_seconds=LEASE)
    core = CleanAir(
        store,
        TokenKeys(generate_key()),
        policy,
        clock,
        sources=Sources(air, networks=LoadedNetworks([grid(3, 6)])),
        offload=offload,
    )
    plan_id = submit(core, paired(core))
    sleep = ClockSleep(clock)

    async def main() -> None:
        stopping = PlanWorker(core, runners=1, idle_seconds=IDLE, sleep=sleep)
        async with stopping.running():
            await sleep.until(lambda: sleep.napping(RENEW_EVERY) == 1)
            assert await in_thread(lambda: offload.entered.wait(timeout=10))
            # SIGTERM: `stop` returns with the search still blocked in its thread ...
            await stopping.stop()
            handed_back = stored(core, plan_id)
            assert handed_back.status is PlanStatus.PENDING
            assert handed_back.lease_until is None
            assert handed_back.attempts == 0
            # ... and the next worker takes the plan at once (no clock moves) and finishes it.
            async with PlanWorker(core, runners=1, idle_seconds=IDLE, sleep=sleep).running():
                await sleep.until(lambda: stored(core, plan_id).status is PlanStatus.COMPLETED)
            # The stopped worker's search ends only now: its result is never stored.
            offload.open()
        assert store.completions == [(2, True)]  # by the second claim only
        assert stored(core, plan_id).attempts == 1

    with caplog.at_level(logging.INFO, logger="cleanair.plans"):
        try:
            anyio.run(main)
        finally:
            store.close()
    messages = [record.getMessage() for record in caplog.records]
    assert messages.count("handed a plan back") == 1
    assert messages.count("completed a plan") == 1


def test_a_worker_stopped_before_it_started_claims_nothing(tmp_path: Path) -> None:
    """uvicorn may be told to stop while the app is still starting: its runners never start."""
    clock, air = ManualClock(NOW), HeldAir()
    store = SqliteStore(tmp_path / "cleanair.db")
    core = make_core(store, clock, air)
    plan_id = submit(core, paired(core))
    claims = 0
    claim = core.claim_next_plan

    def counted() -> Plan | None:
        nonlocal claims
        claims += 1
        return claim()

    core.claim_next_plan = counted  # type: ignore[method-assign]

    async def main() -> None:
        worker = PlanWorker(core, runners=2, idle_seconds=IDLE, sleep=ClockSleep(clock))
        await worker.stop()
        async with worker.running():
            await anyio.wait_all_tasks_blocked()  # a started runner would now be claiming

    try:
        anyio.run(main)
        assert claims == 0
        assert stored(core, plan_id).attempts == 0
    finally:
        store.close()


def test_each_plans_claim_and_outcome_is_one_log_line_with_the_reason_of_a_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock, air = ManualClock(NOW), HeldAir()
    air.release()
    store = SqliteStore(tmp_path / "cleanair.db")
    core = make_core(store, clock, air)
    alice = paired(core)
    completes = submit(core, alice)
    fails = core.submit_plan(
        core.authorize(alice, Scope.ROUTES_PLAN, user_owned=True),
        start=Point(ORIGIN.lat - 0.01, ORIGIN.lon),  # off the network
        end=ORIGIN,
        activity=PlanActivityType.WALKING,
    )
    sleep = ClockSleep(clock)

    async def main() -> None:
        async with PlanWorker(core, runners=1, idle_seconds=IDLE, sleep=sleep).running():
            await sleep.until(
                lambda: (
                    all(
                        stored(core, plan).status is not PlanStatus.PENDING
                        for plan in (completes, fails)
                    )
                    and sleep.napping(IDLE) == 1
                )
            )

    with caplog.at_level(logging.INFO, logger="cleanair.plans"):
        try:
            anyio.run(main)
        finally:
            store.close()
    lines = [
        (r.getMessage(), getattr(r, "plan", None), getattr(r, "reason", None))
        for r in caplog.records
    ]
    # Submitted at the same instant, the two are claimed in either order.
    assert sorted(lines) == sorted(
        [
            ("claimed a plan", str(completes), None),
            ("completed a plan", str(completes), None),
            ("claimed a plan", str(fails), None),
            ("a plan failed", str(fails), "No street network covers the start and the end"),
        ]
    )


class ThreadWakeups:
    """`PlanWakeups` whose wake-ups the test sends, from a thread of their own as the
    PostgreSQL listener does."""

    def __init__(self) -> None:
        self.wakes: list[Callable[[], None]] = []
        self.closed = 0

    def subscribe(self, wake: Callable[[], None]) -> ThreadWakeups:
        self.wakes.append(wake)
        return self

    def send(self) -> None:
        for wake in self.wakes:
            sender = threading.Thread(target=wake)
            sender.start()
            sender.join()

    def close(self) -> None:
        self.closed += 1


def test_a_wake_up_from_elsewhere_starts_an_idle_runner_at_once(tmp_path: Path) -> None:
    """A plan submitted to another process or machine: the wake-up, not the idle time."""
    clock, air = ManualClock(NOW), HeldAir()
    air.release()
    store = SqliteStore(tmp_path / "cleanair.db")
    core = make_core(store, clock, air)
    caller = paired(core)
    sleep = ClockSleep(clock)
    wakeups = ThreadWakeups()

    async def main() -> None:
        worker = PlanWorker(core, runners=1, idle_seconds=IDLE, sleep=sleep, wakeups=wakeups)
        async with worker.running():
            await sleep.until(lambda: sleep.napping(IDLE) == 1)
            plan_id = submit(core, caller)  # elsewhere: this worker is not notified directly
            wakeups.send()
            # No clock moves: the runner wakes and plans it.
            await sleep.until(lambda: stored(core, plan_id).status is PlanStatus.COMPLETED)
        assert wakeups.closed == 1

    try:
        anyio.run(main)
    finally:
        store.close()


def test_an_idle_runner_looks_again_after_the_idle_time(tmp_path: Path) -> None:
    """A plan submitted to another process (no `notify` here) waits for the idle time."""
    clock, air = ManualClock(NOW), HeldAir()
    air.release()
    store = SqliteStore(tmp_path / "cleanair.db")
    core = make_core(store, clock, air)
    alice = paired(core)
    sleep = ClockSleep(clock)
    idle = 5.0

    async def main() -> None:
        async with PlanWorker(core, runners=1, idle_seconds=idle, sleep=sleep).running():
            await sleep.until(lambda: sleep.napping(idle) == 1)
            plan_id = submit(core, alice)
            sleep.advance(idle - 0.5)
            assert sleep.napping(idle) == 1
            assert stored(core, plan_id).attempts == 0
            sleep.advance(0.5)
            await sleep.until(
                lambda: (
                    stored(core, plan_id).status is PlanStatus.COMPLETED
                    and sleep.napping(idle) == 1
                )
            )

    try:
        anyio.run(main)
    finally:
        store.close()


def test_the_app_gives_its_worker_the_idle_time_setting(core: CleanAir) -> None:
    app = create_app(core, Settings(plan_workers=1, plan_worker_idle_seconds=7.5))
    assert app.state.plan_worker.idle_seconds == 7.5


@pytest.mark.parametrize("form", ["{%s}", "urn:uuid:%s", "HEX"])
def test_non_canonical_request_ids_are_422(
    core: CleanAir,
    make_client: MakeClient,
    form: str,
) -> None:
    client = make_client(Settings(plan_workers=0))
    token = pair(core, client)
    rid = str(uuid.uuid4())
    shown = rid.replace("-", "") if form == "HEX" else form % rid
    assert client.get(f"/v1/routes/{shown}", headers=bearer(token)).status_code == 422
    assert client.get(f"/v1/routes/{rid.upper()}", headers=bearer(token)).status_code == 404


class OutageStore(SqliteStore):
    """Unavailable for its first `outage` claims, then fine."""

    def __init__(self, path: Path, outage: int) -> None:
        super().__init__(path)
        self.claims = 0
        self.outage = outage

    def claim_plan(self, now, lease):  # type: ignore[no-untyped-def]
        self.claims += 1
        if self.claims <= self.outage:
            raise StoreUnavailable()
        return super().claim_plan(now, lease)


def test_a_database_outage_is_two_log_lines_not_a_traceback_a_second(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = OutageStore(tmp_path / "cleanair.db", outage=5)
    clock = ManualClock(NOW)
    core = CleanAir(store, TokenKeys(generate_key()), Policy(), clock)
    sleep = ClockSleep(clock)
    caplog.set_level(logging.DEBUG, logger="cleanair")

    async def main() -> None:
        async with PlanWorker(core, runners=1, idle_seconds=IDLE, sleep=sleep).running():
            for looks in range(1, 8):  # five looks in the outage, three after it
                await sleep.until(lambda: sleep.napping(IDLE) == 1)
                assert store.claims == looks
                sleep.advance(IDLE)
            await sleep.until(
                lambda: (
                    store.claims == 8
                    and sleep.napping(IDLE) == 1
                    and sleep.napping(PRUNE_SECONDS) == 1
                )
            )

    try:
        anyio.run(main)
    finally:
        store.close()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "cleanair.plans"]
    assert lines == [
        ("WARNING", "the database is unavailable; plans wait until it is back"),
        ("INFO", "the database is available again; planning resumes"),
    ]
    assert not any(r.exc_info for r in caplog.records)


def test_the_worker_prunes_the_alert_feed_past_its_retention(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "cleanair.db")
    clock = ManualClock(NOW)
    core = CleanAir(store, TokenKeys(generate_key()), Policy(), clock)
    cutoff = NOW - timedelta(seconds=core.policy.alert_retention_seconds)
    old, kept = (
        NewEvent(
            event_id=uuid.uuid4(),
            owner="alice",
            subscription_id=uuid.uuid4(),
            payload="{}",
            created_at=at,
            url=None,
        )
        for at in (cutoff - timedelta(seconds=1), cutoff)
    )
    store.record_alert_events([old, kept])
    sleep = ClockSleep(clock)

    async def main() -> None:
        async with PlanWorker(core, runners=1, idle_seconds=IDLE, sleep=sleep).running():
            await sleep.until(lambda: sleep.napping(PRUNE_SECONDS) == 1)

    try:
        anyio.run(main)
        assert [e.event_id for e in store.alert_feed("alice", 0, 10)] == [kept.event_id]
    finally:
        store.close()


class PreparingCore(CleanAir):
    """Records when the worker prepares the next hours' node air."""

    prepared_at: list[datetime]

    async def prepare_network_air(self) -> int:
        self.prepared_at.append(self.clock.now())
        return await super().prepare_network_air()


def test_the_worker_prepares_the_next_hours_air_shortly_before_each_hour(
    tmp_path: Path,
) -> None:
    clock, air = ManualClock(NOW), HeldAir()
    store = SqliteStore(tmp_path / "cleanair.db")
    plain = make_core(store, clock, air)
    core = PreparingCore(
        store, plain.keys, plain.policy, clock, sources=plain.sources, offload=in_thread
    )
    core.prepared_at = []
    sleep = ClockSleep(clock)
    lead = AIR_PREPARATION_LEAD.total_seconds()
    first = NOW.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)

    async def main() -> None:
        async with PlanWorker(core, runners=1, idle_seconds=IDLE, sleep=sleep).running():
            await anyio.wait_all_tasks_blocked()
            assert core.prepared_at == []
            for hour in range(3):
                turn = first + timedelta(hours=hour)
                sleep.advance((turn - clock.now()).total_seconds() - lead)
                await sleep.until(lambda: len(core.prepared_at) == hour + 1)  # noqa: B023
                assert core.prepared_at[-1] == turn - AIR_PREPARATION_LEAD

    try:
        anyio.run(main)
    finally:
        store.close()
