"""One contract suite for every `Store` adapter (the `store` fixture runs it on each)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import attrs
import pytest

from cleanair_core.access.accounts import Owner, OwnerKind, Partner, User
from cleanair_core.access.connections import Connection
from cleanair_core.access.pairing import PairingCode
from cleanair_core.access.scopes import Scope
from cleanair_core.clock import ManualClock
from cleanair_core.credits.ledger import (
    CreditLimits,
    Debit,
    FinalCharge,
    LedgerEntry,
    OverRateLimit,
    Usage,
)
from cleanair_core.credits.rate_limits import RateHit
from cleanair_core.errors import CreditsExhausted, DuplicateEntry, Limit, RateLimited
from cleanair_core.ports import AdmissionRead, Store

# Microseconds on purpose: timestamps must survive the round trip through each adapter.
T0 = datetime(2026, 3, 10, 9, 30, 15, 250_000, tzinfo=UTC)
ALICE = Owner(OwnerKind.USER, "alice")
POOL = ALICE.key
OTHER_POOL = "user:bob"
LIMITS = CreditLimits(monthly=50, daily=10)


def make_connection(
    owner: Owner = ALICE,
    *,
    created_at: datetime = T0,
    token_hash: str | None = None,
    scopes: frozenset[Scope] = frozenset({Scope.AQ_READ}),
    name: str = "phone",
) -> Connection:
    return Connection(
        id=uuid.uuid4(),
        owner=owner,
        name=name,
        scopes=scopes,
        token_hash=token_hash or uuid.uuid4().hex * 2,
        created_at=created_at,
    )


def make_code(code_hash: str, user: str = "alice", created_at: datetime = T0) -> PairingCode:
    return PairingCode(code_hash, user, created_at, created_at + timedelta(seconds=60))


def debit(
    store: Store,
    amount: int,
    at: datetime = T0,
    *,
    pool: str = POOL,
    label: str = "score",
    limits: CreditLimits = LIMITS,
) -> LedgerEntry:
    return store.debit(Debit(pool, "conn-1", label, amount, at), limits)


# -- users ------------------------------------------------------------------------------------


def test_add_and_get_user(store: Store) -> None:
    user = User("alice", True, T0)
    assert store.add_user(user) is True
    assert store.get_user("alice") == user


def test_duplicate_user_is_refused_and_keeps_the_original(store: Store) -> None:
    assert store.add_user(User("alice", True, T0))
    assert store.add_user(User("alice", False, T0 + timedelta(days=1))) is False
    assert store.get_user("alice") == User("alice", True, T0)


def test_set_premium(store: Store) -> None:
    store.add_user(User("alice", True, T0))
    assert store.set_premium("alice", False) is True
    fetched = store.get_user("alice")
    assert fetched is not None
    assert fetched.premium is False
    assert store.set_premium("alice", True) is True
    fetched = store.get_user("alice")
    assert fetched is not None
    assert fetched.premium is True
    assert fetched.created_at == T0


def test_unknown_user(store: Store) -> None:
    store.add_user(User("alice", True, T0))
    assert store.get_user("bob") is None
    assert store.set_premium("bob", True) is False
    assert store.get_user("bob") is None


# -- partners ---------------------------------------------------------------------------------


def test_partners(store: Store) -> None:
    partner = Partner("acme", True, T0)
    assert store.add_partner(partner) is True
    assert store.add_partner(Partner("acme", False, T0)) is False
    assert store.get_partner("acme") == partner
    assert store.get_partner("nobody") is None

    assert store.set_partner_active("acme", False) is True
    assert store.get_partner("acme") == Partner("acme", False, T0)
    assert store.set_partner_active("acme", True) is True
    assert store.get_partner("acme") == partner
    assert store.set_partner_active("nobody", False) is False


def test_users_are_listed_by_name_in_code_point_order(store: Store) -> None:
    assert store.list_users() == []
    # Upper case before lower case, digits first: code point order, whatever the collation.
    names = ["bob", "Zed", "alice", "0day", "al.ice"]
    for index, name in enumerate(names):
        assert store.add_user(User(name, index % 2 == 0, T0 + timedelta(seconds=index)))
    store.set_premium("bob", False)
    assert store.list_users() == [
        User("0day", False, T0 + timedelta(seconds=3)),
        User("Zed", False, T0 + timedelta(seconds=1)),
        User("al.ice", True, T0 + timedelta(seconds=4)),
        User("alice", True, T0 + timedelta(seconds=2)),
        User("bob", False, T0),
    ]


def test_partners_are_listed_by_name_active_or_not(store: Store) -> None:
    assert store.list_partners() == []
    for name in ["globex", "Acme", "acme"]:
        assert store.add_partner(Partner(name, True, T0))
    store.set_partner_active("acme", False)
    assert store.add_user(User("initech", True, T0))  # a user is no partner
    assert store.list_partners() == [
        Partner("Acme", True, T0),
        Partner("acme", False, T0),
        Partner("globex", True, T0),
    ]


def test_users_and_partners_are_separate_namespaces(store: Store) -> None:
    assert store.add_user(User("shared", False, T0))
    assert store.add_partner(Partner("shared", True, T0))
    assert store.get_user("shared") == User("shared", False, T0)
    assert store.get_partner("shared") == Partner("shared", True, T0)


# -- connections ------------------------------------------------------------------------------


def test_connection_lookup_by_token_hash(store: Store) -> None:
    scopes = frozenset({Scope.AQ_READ, Scope.ROUTES_PLAN})
    connection = make_connection(token_hash="a" * 64, scopes=scopes)
    store.add_connection(connection)
    assert store.connection_by_token_hash("a" * 64) == connection
    assert store.connection_by_token_hash("b" * 64) is None


def test_a_duplicate_connection_is_one_port_error_on_every_adapter(store: Store) -> None:
    """Neither the same id nor the same token hash is stored twice, and the refusal is the
    core's DuplicateEntry, never a driver's IntegrityError."""
    first = make_connection(token_hash="c" * 64)
    store.add_connection(first)
    same_id = attrs.evolve(first, token_hash="d" * 64, name="tablet")
    same_token = make_connection(token_hash="c" * 64, name="tablet")
    for duplicate in (same_id, same_token):
        with pytest.raises(DuplicateEntry):
            store.add_connection(duplicate)
    assert store.connections_of(ALICE) == [first]
    assert store.connection_by_token_hash("d" * 64) is None


def test_connection_keeps_every_scope_set(store: Store) -> None:
    for index, scopes in enumerate([frozenset(), frozenset({Scope.AQ_ROUTES}), frozenset(Scope)]):
        connection = make_connection(token_hash=f"{index}" * 64, scopes=scopes)
        store.add_connection(connection)
        found = store.connection_by_token_hash(f"{index}" * 64)
        assert found is not None
        assert found.scopes == scopes


def test_connections_of_is_oldest_first_and_per_owner(store: Store) -> None:
    middle = make_connection(created_at=T0 + timedelta(minutes=5), name="middle")
    newest = make_connection(created_at=T0 + timedelta(days=2), name="newest")
    oldest = make_connection(created_at=T0, name="oldest")
    partner_twin = make_connection(Owner(OwnerKind.PARTNER, "alice"), name="partner")
    bobs = make_connection(Owner(OwnerKind.USER, "bob"), name="bob")
    for connection in (middle, bobs, newest, partner_twin, oldest):
        store.add_connection(connection)

    assert [c.name for c in store.connections_of(ALICE)] == ["oldest", "middle", "newest"]
    assert store.connections_of(Owner(OwnerKind.PARTNER, "alice")) == [partner_twin]
    assert store.connections_of(Owner(OwnerKind.USER, "carol")) == []


def test_revoke_connection_once(store: Store) -> None:
    connection = make_connection(token_hash="c" * 64)
    store.add_connection(connection)
    revoked_at = T0 + timedelta(hours=3)

    assert store.revoke_connection(connection.id, revoked_at) is True
    assert store.revoke_connection(connection.id, revoked_at + timedelta(hours=1)) is False

    found = store.connection_by_token_hash("c" * 64)
    assert found is not None
    assert found.revoked
    assert found.revoked_at == revoked_at
    assert store.connections_of(ALICE)[0].revoked_at == revoked_at


def test_revoke_unknown_connection(store: Store) -> None:
    connection = make_connection()
    store.add_connection(connection)
    assert store.revoke_connection(uuid.uuid4(), T0) is False
    assert store.connections_of(ALICE)[0].revoked_at is None


# -- pairing codes ----------------------------------------------------------------------------

BUDGET = 100


def redeem(store: Store, code_hash: str, at: datetime, budget: int = BUDGET) -> str | None:
    return store.redeem_pairing_code(code_hash, ManualClock(at), budget)


def test_pairing_code_redeems_once(store: Store) -> None:
    assert store.add_pairing_code(make_code("h1"), T0) is True
    assert redeem(store, "h1", T0 + timedelta(seconds=30)) == "alice"
    assert redeem(store, "h1", T0 + timedelta(seconds=31)) is None


def test_unknown_pairing_code(store: Store) -> None:
    store.add_pairing_code(make_code("h1"), T0)
    assert redeem(store, "h2", T0) is None


def test_pairing_code_lives_until_just_before_its_expiry(store: Store) -> None:
    code = make_code("h1")
    store.add_pairing_code(code, T0)
    assert redeem(store, "h1", code.expires_at - timedelta(microseconds=1)) == "alice"


@pytest.mark.parametrize("after", [timedelta(0), timedelta(hours=1)])
def test_pairing_code_dies_at_its_expiry(store: Store, after: timedelta) -> None:
    code = make_code("h1")
    store.add_pairing_code(code, T0)
    assert redeem(store, "h1", code.expires_at + after) is None


def test_pairing_guesses_fill_the_budget_and_age_out(store: Store) -> None:
    for k in range(3):
        assert redeem(store, f"g{k}", T0 + timedelta(seconds=10 * k), 3) is None
    with pytest.raises(RateLimited) as raised:
        redeem(store, "g3", T0 + timedelta(seconds=25), 3)
    assert raised.value.retry_after == 35  # g0 leaves the window at T0 + 60 s
    redeem(store, "g1", T0 + timedelta(seconds=25), 3)  # known: admitted
    # At T0 + 60 s g0 is gone (a guess lives strictly less than a code life).
    redeem(store, "g3", T0 + timedelta(seconds=60), 3)
    with pytest.raises(RateLimited) as raised:
        redeem(store, "g4", T0 + timedelta(seconds=60), 3)
    # g1 was refreshed at +25 s, so g2 (+20 s) is now the oldest.
    assert raised.value.retry_after == 20


def test_a_refused_guess_changes_nothing(store: Store) -> None:
    store.add_pairing_code(make_code("h1"), T0)
    redeem(store, "g0", T0, 1)
    with pytest.raises(RateLimited):
        redeem(store, "h1", T0 + timedelta(seconds=1), 1)
    assert redeem(store, "h1", T0 + timedelta(seconds=59), 2) == "alice"  # still unused


def test_a_retried_guess_stays_as_long_as_it_is_retried(store: Store) -> None:
    redeem(store, "g0", T0, 1)
    for second in range(50, 500, 50):
        redeem(store, "g0", T0 + timedelta(seconds=second), 1)
        with pytest.raises(RateLimited):
            redeem(store, "new", T0 + timedelta(seconds=second + 1), 1)


def test_a_late_clock_is_never_earlier_than_the_newest_guess(store: Store) -> None:
    """A process whose time was read before it waited for the lock must not be timed before
    guesses admitted meanwhile: its guess would land in a window the log has moved past."""
    code = make_code("h1")  # live over [T0, T0 + 60 s)
    store.add_pairing_code(code, T0)
    redeem(store, "g0", T0, 2)
    redeem(store, "g1", T0, 2)
    redeem(store, "g2", T0 + timedelta(seconds=60.5), 2)  # g0 and g1 leave the log
    # Timed at 59.9 s this would be admitted (the log holds one guess) and redeem a code
    # that has already faced g0 and g1; timed after g2, the code is dead.
    assert redeem(store, "h1", T0 + timedelta(seconds=59.9), 2) is None


def test_same_hash_while_live_is_refused(store: Store) -> None:
    assert store.add_pairing_code(make_code("h1", "alice"), T0)
    later = T0 + timedelta(seconds=59)
    assert store.add_pairing_code(make_code("h1", "bob", later), later) is False
    # The refused insert did not replace the live code.
    assert redeem(store, "h1", later) == "alice"


def test_same_hash_after_expiry_replaces(store: Store) -> None:
    assert store.add_pairing_code(make_code("h1", "alice"), T0)
    later = T0 + timedelta(seconds=60)
    assert store.add_pairing_code(make_code("h1", "bob", later), later) is True
    assert redeem(store, "h1", later + timedelta(seconds=1)) == "bob"


def test_same_hash_after_use_replaces(store: Store) -> None:
    assert store.add_pairing_code(make_code("h1", "alice"), T0)
    assert redeem(store, "h1", T0 + timedelta(seconds=1)) == "alice"
    later = T0 + timedelta(seconds=2)
    assert store.add_pairing_code(make_code("h1", "bob", later), later) is True
    assert redeem(store, "h1", later) == "bob"
    assert redeem(store, "h1", later) is None


# -- credit ledger ----------------------------------------------------------------------------


def test_debit_appends_an_entry(store: Store) -> None:
    entry = store.debit(Debit(POOL, "conn-7", "forecast", 2, T0), LIMITS)
    assert (entry.pool, entry.connection_id, entry.label, entry.amount) == (
        POOL,
        "conn-7",
        "forecast",
        2,
    )
    assert entry.at == T0
    assert (entry.month, entry.day) == ("2026-03", "2026-03-10")
    assert entry.reverses is None
    assert store.entries(POOL) == [entry]
    assert store.usage(POOL, T0) == Usage(month=2, day=2)


def test_usage_counts_month_and_day_windows(store: Store) -> None:
    debit(store, 3, datetime(2026, 3, 1, 0, 0, tzinfo=UTC))
    debit(store, 4, datetime(2026, 3, 10, 8, 0, tzinfo=UTC))
    debit(store, 5, datetime(2026, 3, 10, 23, 59, 59, tzinfo=UTC))
    debit(store, 6, datetime(2026, 4, 1, 0, 0, tzinfo=UTC))

    assert store.usage(POOL, datetime(2026, 3, 10, 12, tzinfo=UTC)) == Usage(month=12, day=9)
    assert store.usage(POOL, datetime(2026, 3, 1, 12, tzinfo=UTC)) == Usage(month=12, day=3)
    assert store.usage(POOL, datetime(2026, 3, 11, tzinfo=UTC)) == Usage(month=12, day=0)
    assert store.usage(POOL, datetime(2026, 4, 1, 5, tzinfo=UTC)) == Usage(month=6, day=6)
    assert store.usage(POOL, datetime(2026, 2, 28, tzinfo=UTC)) == Usage(month=0, day=0)
    assert store.usage(OTHER_POOL, T0) == Usage(month=0, day=0)


def test_debit_that_does_not_fit_the_day_is_refused(store: Store) -> None:
    at = datetime(2026, 3, 10, 10, 0, tzinfo=UTC)
    debit(store, 10, at)
    with pytest.raises(CreditsExhausted) as raised:
        debit(store, 1, at)
    assert raised.value.retry_after == 14 * 3600
    assert store.usage(POOL, at) == Usage(month=10, day=10)
    assert len(store.entries(POOL)) == 1
    # Another pool is unaffected, and so is the next day.
    debit(store, 10, at, pool=OTHER_POOL)
    debit(store, 1, at + timedelta(hours=14))


def test_debit_that_does_not_fit_the_month_is_refused(store: Store) -> None:
    limits = CreditLimits(monthly=12, daily=10)
    debit(store, 10, datetime(2026, 3, 30, 12, tzinfo=UTC), limits=limits)
    at = datetime(2026, 3, 31, 18, 0, tzinfo=UTC)
    debit(store, 2, at, limits=limits)
    with pytest.raises(CreditsExhausted) as raised:
        debit(store, 1, at, limits=limits)
    assert raised.value.retry_after == 6 * 3600
    assert store.usage(POOL, at) == Usage(month=12, day=2)
    debit(store, 10, datetime(2026, 4, 1, tzinfo=UTC), limits=limits)


def test_an_amount_over_the_daily_cap_names_the_month_when_the_month_blocks_too(
    store: Store,
) -> None:
    """The month blocks first (it resets no earlier than the day), even for an amount that
    alone exceeds the daily cap."""
    limits = CreditLimits(monthly=12, daily=10)
    debit(store, 10, datetime(2026, 3, 9, 12, tzinfo=UTC), limits=limits)
    at = datetime(2026, 3, 10, 10, 0, tzinfo=UTC)
    with pytest.raises(CreditsExhausted) as raised:
        debit(store, 11, at, limits=limits)
    assert raised.value.retry_after == (datetime(2026, 4, 1, tzinfo=UTC) - at).total_seconds()
    assert store.usage(POOL, at) == Usage(month=10, day=0)


def test_refund_restores_the_original_windows(store: Store) -> None:
    debited_at = datetime(2026, 3, 31, 23, 59, tzinfo=UTC)
    original = debit(store, 4, debited_at, label="client:app")
    refunded_at = debited_at + timedelta(minutes=2)  # next day and next month

    refund = store.refund(original.id, refunded_at)

    assert refund is not None
    assert refund.amount == -4
    assert refund.reverses == original.id
    assert refund.id != original.id
    assert (refund.pool, refund.label, refund.connection_id) == (POOL, "client:app", "conn-1")
    assert refund.at == refunded_at
    assert (refund.month, refund.day) == ("2026-03", "2026-03-31")
    assert store.usage(POOL, debited_at) == Usage(month=0, day=0)
    assert store.usage(POOL, refunded_at) == Usage(month=0, day=0)
    assert store.entries(POOL) == [original, refund]


def test_a_grant_raises_this_months_pool_and_is_in_the_ledger(store: Store) -> None:
    limits = CreditLimits(monthly=12, daily=10)
    debit(store, 10, datetime(2026, 3, 9, 12, tzinfo=UTC), limits=limits)
    with pytest.raises(CreditsExhausted):
        debit(store, 5, limits=limits)

    grant = store.grant(POOL, 20, "outage on 9 March", T0)

    assert (grant.amount, grant.reason, grant.at, grant.month) == (
        20,
        "outage on 9 March",
        T0,
        "2026-03",
    )
    assert store.usage(POOL, T0) == Usage(month=10, day=0, granted=20)
    entry = debit(store, 5, limits=limits)  # 15 of 32: fits now
    assert store.entries(POOL)[-2:] == [grant, entry]
    assert store.usage(POOL, T0) == Usage(month=15, day=5, granted=20)
    # Not usage: attribution and other pools do not see it, nor does the next month.
    assert store.usage_by_label(POOL, "2026-03") == {"score": 15}
    assert store.usage(OTHER_POOL, T0).granted == 0
    assert store.usage(POOL, datetime(2026, 4, 1, tzinfo=UTC)) == Usage(month=0, day=0)
    assert store.refund(grant.id, T0) is None  # a grant is never reversed


def test_a_grant_does_not_raise_the_daily_burst_cap(store: Store) -> None:
    limits = CreditLimits(monthly=12, daily=10)
    store.grant(POOL, 100, "goodwill", T0)
    debit(store, 10, limits=limits)
    with pytest.raises(CreditsExhausted) as raised:
        debit(store, 1, limits=limits)
    assert raised.value.limit == Limit.DAILY_BURST
    # An amount over the plain pool, within the pool with the grant, on a fresh day.
    debit(store, 10, T0 + timedelta(days=1), limits=limits)
    assert store.usage(POOL, T0 + timedelta(days=1)) == Usage(month=20, day=10, granted=100)


def test_a_first_debit_over_the_plain_pool_fits_a_granted_one(store: Store) -> None:
    limits = CreditLimits(monthly=0, daily=30)
    store.grant(POOL, 25, "trial", T0)
    debit(store, 25, limits=limits)  # the window's first debit: no counter row yet
    assert store.usage(POOL, T0) == Usage(month=25, day=25, granted=25)
    with pytest.raises(CreditsExhausted) as raised:
        debit(store, 1, limits=limits)
    assert raised.value.limit == Limit.MONTHLY_POOL


def test_a_day_grant_lifts_todays_burst_cap_only(store: Store) -> None:
    limits = CreditLimits(monthly=50, daily=10)
    debit(store, 10, limits=limits)
    with pytest.raises(CreditsExhausted) as raised:
        debit(store, 5, limits=limits)
    assert raised.value.limit == Limit.DAILY_BURST

    grant = store.grant(POOL, 5, "README walkthrough", T0, day_only=True)

    assert (grant.amount, grant.reason, grant.at, grant.month, grant.day) == (
        5,
        "README walkthrough",
        T0,
        "2026-03",
        "2026-03-10",
    )
    assert (grant.is_grant, grant.is_day_grant) == (True, True)
    assert store.usage(POOL, T0) == Usage(month=10, day=10, granted=0, day_granted=5)
    entry = debit(store, 5, limits=limits)  # 15 of today's 15: fits now
    assert store.entries(POOL)[-2:] == [grant, entry]
    with pytest.raises(CreditsExhausted) as raised:
        debit(store, 1, limits=limits)
    assert raised.value.limit == Limit.DAILY_BURST
    # Not usage, not the month's pool, not another pool's; and it lapses at midnight (UTC).
    assert store.usage_by_label(POOL, "2026-03") == {"score": 15}
    assert store.usage(OTHER_POOL, T0).day_granted == 0
    tomorrow = datetime(2026, 3, 11, tzinfo=UTC)
    assert store.usage(POOL, tomorrow) == Usage(month=15, day=0)
    with pytest.raises(CreditsExhausted) as raised:
        debit(store, 11, tomorrow, limits=limits)
    assert raised.value.limit == Limit.DAILY_BURST
    assert store.refund(grant.id, T0) is None  # a grant is never reversed


def test_a_day_grant_never_lets_the_month_be_overspent(store: Store) -> None:
    limits = CreditLimits(monthly=12, daily=10)
    debit(store, 10, datetime(2026, 3, 9, 12, tzinfo=UTC), limits=limits)
    store.grant(POOL, 100, "goodwill", T0, day_only=True)
    with pytest.raises(CreditsExhausted) as raised:
        debit(store, 3, limits=limits)
    assert raised.value.limit == Limit.MONTHLY_POOL
    settled = store.settle_charges([final(3, key=None)], limits)
    assert isinstance(settled[0], CreditsExhausted)
    assert settled[0].limit == Limit.MONTHLY_POOL
    debit(store, 2, limits=limits)  # what the month still holds
    assert store.usage(POOL, T0) == Usage(month=12, day=2, granted=0, day_granted=100)
    # Granting the month as well is what lets the user spend more overall.
    store.grant(POOL, 20, "goodwill", T0)
    debit(store, 20, limits=limits)
    assert store.usage(POOL, T0) == Usage(month=32, day=22, granted=20, day_granted=100)


def test_a_first_debit_over_the_plain_burst_cap_fits_a_day_grant(store: Store) -> None:
    limits = CreditLimits(monthly=50, daily=10)
    store.grant(POOL, 15, "trial", T0, day_only=True)
    debit(store, 25, limits=limits)  # the day's first debit: no counter row yet
    assert store.usage(POOL, T0) == Usage(month=25, day=25, day_granted=15)
    with pytest.raises(CreditsExhausted) as raised:
        debit(store, 1, limits=limits)
    assert raised.value.limit == Limit.DAILY_BURST


def test_refund_only_once(store: Store) -> None:
    original = debit(store, 3)
    first = store.refund(original.id, T0)
    assert first is not None
    assert store.refund(original.id, T0) is None
    assert store.refund(first.id, T0) is None  # a refund cannot be refunded
    assert store.refund(10_000, T0) is None  # nor can an unknown entry
    assert store.usage(POOL, T0) == Usage(month=0, day=0)
    assert len(store.entries(POOL)) == 2


def test_refund_frees_room_for_another_debit(store: Store) -> None:
    original = debit(store, 10)
    with pytest.raises(CreditsExhausted):
        debit(store, 1)
    store.refund(original.id, T0)
    debit(store, 10)
    assert store.usage(POOL, T0) == Usage(month=10, day=10)


def test_usage_by_label(store: Store) -> None:
    debit(store, 1, label="score")
    debit(store, 1, label="score")
    forecast = debit(store, 2, label="forecast")
    debit(store, 5, label="client:app")
    debit(store, 7, datetime(2026, 4, 2, tzinfo=UTC), label="score")
    debit(store, 9, pool=OTHER_POOL, label="score")
    store.refund(forecast.id, T0)

    assert store.usage_by_label(POOL, "2026-03") == {"score": 2, "forecast": 0, "client:app": 5}
    assert store.usage_by_label(POOL, "2026-04") == {"score": 7}
    assert store.usage_by_label(POOL, "2026-05") == {}
    assert store.usage_by_label(OTHER_POOL, "2026-03") == {"score": 9}


def test_entries_are_per_pool_and_in_order(store: Store) -> None:
    first = debit(store, 1)
    debit(store, 2, pool=OTHER_POOL)
    second = debit(store, 3, T0 + timedelta(hours=1))
    refund = store.refund(first.id, T0 + timedelta(hours=2))
    assert store.entries(POOL) == [first, second, refund]
    assert [e.amount for e in store.entries(OTHER_POOL)] == [2]
    assert store.entries("user:nobody") == []
    ids = [e.id for e in store.entries(POOL)]
    assert ids == sorted(ids)
    assert len(set(ids)) == 3


# -- holds on unconfirmed debits --------------------------------------------------------------

HOLD_END = T0 + timedelta(seconds=60)


def held(store: Store, amount: int = 1, until: datetime = HOLD_END) -> LedgerEntry:
    return store.debit(Debit(POOL, "conn-1", "score", amount, T0, hold_until=until), LIMITS)


def test_a_held_debit_counts_at_once(store: Store) -> None:
    held(store, 3)
    assert store.usage(POOL, T0) == Usage(month=3, day=3)


def test_a_confirmed_debit_is_never_swept(store: Store) -> None:
    entry = held(store, 3)
    assert store.confirm_charge(entry.id) is True
    assert store.confirm_charge(entry.id) is False  # nothing left to confirm
    assert store.sweep_holds(HOLD_END + timedelta(days=1), "lost") == 0
    assert store.usage(POOL, T0) == Usage(month=3, day=3)


def test_an_ended_hold_is_refunded_once(store: Store) -> None:
    kept = held(store, 2, until=HOLD_END + timedelta(seconds=1))
    lost = held(store, 3)
    assert store.sweep_holds(HOLD_END - timedelta(microseconds=1), "lost") == 0
    assert store.sweep_holds(HOLD_END, "lost") == 1  # a hold ends at its `until`
    assert store.sweep_holds(HOLD_END, "lost") == 0
    assert store.usage(POOL, T0) == Usage(month=2, day=2)
    refund = store.entries(POOL)[-1]
    assert (refund.amount, refund.reverses, refund.at) == (-3, lost.id, HOLD_END)
    assert store.confirm_charge(lost.id) is False  # too late: the answer goes out free
    assert store.refund(lost.id, HOLD_END) is None
    assert store.confirm_charge(kept.id) is True


def test_renewal_moves_the_end_of_a_hold(store: Store) -> None:
    first, second = held(store), held(store)
    later = HOLD_END + timedelta(minutes=5)
    assert store.renew_holds([first.id, second.id, 999_999], later) == 2
    assert store.sweep_holds(HOLD_END, "lost") == 0
    store.confirm_charge(second.id)
    assert store.renew_holds([second.id], later + timedelta(minutes=5)) == 0
    assert store.sweep_holds(later, "lost") == 1
    assert store.usage(POOL, T0) == Usage(month=1, day=1)


def test_a_refund_drops_the_hold(store: Store) -> None:
    entry = held(store, 4)
    assert store.refund(entry.id, T0) is not None
    assert store.sweep_holds(HOLD_END, "lost") == 0
    assert store.confirm_charge(entry.id) is False
    assert [e.amount for e in store.entries(POOL)] == [4, -4]


# -- final charges: a rate-limit hit and a debit in one write ----------------------------------


def final(
    amount: int, *, pool: str = POOL, key: str | None = "req:c1", limit: int = 3
) -> FinalCharge:
    hit = None if key is None else RateHit(key, 600, 60, limit)
    return FinalCharge(Debit(pool, "c1", "score", amount, T0), hit)


def test_final_charges_count_their_hits_and_debit_in_order(store: Store) -> None:
    settled = store.settle_charges(
        [final(2), final(3, pool=OTHER_POOL, key=None), final(4)], LIMITS
    )
    assert [type(s) for s in settled] == [LedgerEntry, LedgerEntry, LedgerEntry]
    first, other, second = settled
    assert isinstance(first, LedgerEntry)
    assert isinstance(second, LedgerEntry)
    assert (first.pool, first.amount, first.label, first.at) == (POOL, 2, "score", T0)
    assert isinstance(other, LedgerEntry)
    assert other.pool == OTHER_POOL
    assert store.entries(POOL) == [first, second]
    assert store.usage(POOL, T0) == Usage(month=6, day=6)
    assert store.usage(OTHER_POOL, T0) == Usage(month=3, day=3)
    # Two hits were counted under the key, none for the charge without one.
    assert store.hit("req:c1", 600) == 3
    assert store.sweep_holds(T0 + timedelta(days=40), "lost") == 0  # final: never held


def test_a_final_charge_over_its_rate_limit_debits_nothing(store: Store) -> None:
    settled = store.settle_charges([final(1, limit=2) for _ in range(3)], LIMITS)
    assert [type(s) for s in settled] == [LedgerEntry, LedgerEntry, OverRateLimit]
    assert store.usage(POOL, T0) == Usage(month=2, day=2)
    assert len(store.entries(POOL)) == 2


def test_a_final_charge_that_does_not_fit_debits_nothing_but_counts_its_hit(
    store: Store,
) -> None:
    settled = store.settle_charges([final(8), final(3), final(2)], LIMITS)
    assert isinstance(settled[0], LedgerEntry)
    refused = settled[1]
    assert isinstance(refused, CreditsExhausted)
    assert refused.limit is Limit.DAILY_BURST
    assert refused.retry_after == debit_retry_after_day()
    assert isinstance(settled[2], LedgerEntry)  # what the refused one left
    assert store.usage(POOL, T0) == Usage(month=10, day=10)
    assert store.hit("req:c1", 600) == 4


def test_a_final_charge_sees_the_months_grants(store: Store) -> None:
    wide = CreditLimits(monthly=50, daily=100)
    store.grant(POOL, 5, "support", T0)
    debit(store, 50, limits=wide)
    settled = store.settle_charges([final(5, key=None), final(1, key=None)], wide)
    assert isinstance(settled[0], LedgerEntry)
    refused = settled[1]
    assert isinstance(refused, CreditsExhausted)
    assert refused.limit is Limit.MONTHLY_POOL


def test_a_final_charge_sees_the_days_grants(store: Store) -> None:
    debit(store, 10)
    store.grant(POOL, 3, "support", T0, day_only=True)
    settled = store.settle_charges([final(3, key=None), final(1, key=None)], LIMITS)
    assert isinstance(settled[0], LedgerEntry)
    refused = settled[1]
    assert isinstance(refused, CreditsExhausted)
    assert refused.limit is Limit.DAILY_BURST
    assert store.usage(POOL, T0) == Usage(month=13, day=13, day_granted=3)


@pytest.mark.parametrize(
    "before",
    [
        datetime(2026, 3, 10, 23, 59, 59, 900_000, tzinfo=UTC),  # midnight within a month
        datetime(2026, 3, 31, 23, 59, 59, 900_000, tzinfo=UTC),  # and at a month's end
    ],
)
def test_a_batch_across_midnight_counts_each_charge_in_its_own_windows(
    store: Store, before: datetime
) -> None:
    # One pool's charges on either side of midnight, interleaved (a batch is sorted by pool
    # only): each day's burst sees its own day's charges, each month its own month's.
    after = before + timedelta(milliseconds=200)

    def at(when: datetime, amount: int) -> FinalCharge:
        return FinalCharge(Debit(POOL, "c1", "score", amount, when))

    settled = store.settle_charges(
        [at(before, 6), at(after, 7), at(before, 3), at(after, 4), at(before, 2)], LIMITS
    )
    kinds = [type(s) for s in settled]
    assert kinds == [LedgerEntry, LedgerEntry, LedgerEntry, CreditsExhausted, CreditsExhausted]
    same_month = before.month == after.month
    assert store.usage(POOL, before) == Usage(month=16 if same_month else 9, day=9)
    assert store.usage(POOL, after) == Usage(month=16 if same_month else 7, day=7)
    assert [e.amount for e in store.entries(POOL)] == [6, 7, 3]


def test_a_final_charge_with_a_hold_is_refused_by_the_core() -> None:
    with pytest.raises(ValueError, match="never held"):
        FinalCharge(Debit(POOL, "c1", "score", 1, T0, hold_until=T0))


def test_no_final_charges_settle_to_nothing(store: Store) -> None:
    assert store.settle_charges([], LIMITS) == []


def debit_retry_after_day() -> int:
    midnight = datetime(2026, 3, 11, tzinfo=UTC)
    return int((midnight - T0).total_seconds()) + 1  # rounded up


# -- the admission read -----------------------------------------------------------------------


def test_admission_reads_connection_standing_counter_and_usage(store: Store) -> None:
    store.add_user(User("alice", True, T0))
    connection = make_connection(token_hash="h" * 64)
    store.add_connection(connection)
    debit(store, 3)
    store.grant(POOL, 7, "support", T0)
    store.grant(POOL, 4, "support", T0, day_only=True)
    key = f"req:{connection.id}"
    store.hit(key, 600)
    store.hit(key, 600)
    store.hit(f"polls:{connection.id}", 600)
    read = store.admission("h" * 64, "req", T0)
    usage = Usage(month=3, day=3, granted=7, day_granted=4)
    assert read == AdmissionRead(connection, True, (600, 2), usage)
    store.set_premium("alice", False)
    assert store.admission("h" * 64, "other", T0) == AdmissionRead(connection, False, None, usage)


def test_admission_of_a_partner_reads_whether_it_is_active(store: Store) -> None:
    store.add_partner(Partner("acme", True, T0))
    connection = make_connection(Owner(OwnerKind.PARTNER, "acme"), token_hash="p" * 64)
    store.add_connection(connection)
    assert store.admission("p" * 64, "req", T0).standing is True
    store.set_partner_active("acme", False)
    read = store.admission("p" * 64, "req", T0)
    assert (read.connection, read.standing, read.counter) == (connection, False, None)
    assert read.usage == Usage(0, 0)


def test_admission_of_an_unknown_token_or_a_gone_account(store: Store) -> None:
    assert store.admission("x" * 64, "req", T0) == AdmissionRead(None)
    connection = make_connection(token_hash="g" * 64)  # alice was never added
    store.add_connection(connection)
    assert store.admission("g" * 64, "req", T0).standing is None


# -- rate-limit counters ----------------------------------------------------------------------


def test_rate_limit_hits_count_per_key(store: Store) -> None:
    assert [store.hit("k", 600) for _ in range(3)] == [1, 2, 3]
    assert store.hit("other", 600) == 1
    assert store.hit("k", 600) == 4


def test_rate_limit_window_change_resets(store: Store) -> None:
    store.hit("k", 600)
    store.hit("k", 600)
    assert store.hit("k", 660) == 1
    assert store.hit("k", 660) == 2


def test_a_hit_from_an_older_window_counts_in_the_newer_one(store: Store) -> None:
    """Two hosts whose clocks straddle a minute's boundary: the one behind must not reset the
    counter every other request (that would let a client through at twice the limit)."""
    assert [store.hit("k", 660), store.hit("k", 600), store.hit("k", 660)] == [1, 2, 3]
    assert store.hit("k", 600) == 4
    assert store.hit("k", 720) == 1


def test_a_counter_from_a_clock_far_ahead_does_not_hold_the_limit_until_then(
    store: Store,
) -> None:
    """A host whose clock once jumped an hour ahead stored that window: hits from the right
    time start the counter again rather than adding to it for an hour."""
    assert [store.hit("k", 4200), store.hit("k", 4200)] == [1, 2]
    assert store.hit("k", 600) == 1
    assert store.hit("k", 600) == 2


# -- client labels ----------------------------------------------------------------------------


def test_client_labels(store: Store) -> None:
    assert store.is_client_label("app") is False
    assert store.add_client_label("app", T0) is True
    assert store.add_client_label("app", T0 + timedelta(days=1)) is False
    assert store.is_client_label("app") is True
    assert store.is_client_label("ap") is False
    assert store.is_client_label("other") is False


# -- the unit of work -------------------------------------------------------------------------


class Abandoned(Exception):
    pass


def test_a_unit_of_work_that_raises_leaves_nothing_behind(store: Store) -> None:
    store.add_user(User("alice", True, T0))

    def abandoned() -> None:
        with store.transaction() as work:
            work.add_user(User("bob", True, T0))
            work.set_premium("alice", False)
            entry = debit(work, 3)
            work.hit("requests:conn-1", 0)  # single statements join the unit too
            work.confirm_charge(entry.id)
            work.add_connection(make_connection(token_hash="e" * 64))
            raise Abandoned

    with pytest.raises(Abandoned):
        abandoned()
    assert store.get_user("bob") is None
    assert store.get_user("alice") == User("alice", True, T0)
    assert store.usage(POOL, T0) == Usage(0, 0)
    assert store.entries(POOL) == []
    assert store.connection_by_token_hash("e" * 64) is None
    assert store.hit("requests:conn-1", 0) == 1


def test_a_unit_of_work_reads_its_own_writes_and_commits_them_together(store: Store) -> None:
    with store.transaction() as work:
        work.add_user(User("bob", False, T0))
        assert work.get_user("bob") == User("bob", False, T0)
        entry = debit(work, 4)
        assert work.usage(POOL, T0) == Usage(4, 4)
    assert store.get_user("bob") == User("bob", False, T0)
    assert store.entries(POOL) == [entry]


def test_a_failed_step_inside_a_unit_of_work_undoes_the_earlier_ones(store: Store) -> None:
    """The core's composed steps rely on this: a debit stands only with what it pays for."""
    first = make_connection(token_hash="f" * 64)
    store.add_connection(first)

    def pay_then_duplicate() -> None:
        with store.transaction() as work:
            debit(work, 5)
            work.add_connection(attrs.evolve(first, name="again"))

    with pytest.raises(DuplicateEntry):
        pay_then_duplicate()
    assert store.usage(POOL, T0) == Usage(0, 0)
    assert store.connections_of(ALICE) == [first]


# -- readiness --------------------------------------------------------------------------------


def test_an_opened_store_has_the_current_schema(store: Store) -> None:
    assert store.schema_is_current() is True
