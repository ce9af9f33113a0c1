"""Pairing codes: six digits, single use, 60 seconds, premium only, rate limited."""

from __future__ import annotations

import tempfile
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import IssuedConnection
from cleanair_core.access.pairing import PAIRING_CODE_TTL, new_code
from cleanair_core.access.scopes import Scope
from cleanair_core.clock import ManualClock
from cleanair_core.errors import InvalidPairingCode, OperatorError, RateLimited
from cleanair_core.keys import TokenKeys
from cleanair_core.policy import Policy
from cleanair_core.ports import Store
from cleanair_core.service import CleanAir
from cleanair_storage.memory import MemoryStore
from cleanair_storage.sqlite import SqliteStore

KEYS = TokenKeys(b"pairing-tests-server-key-32-bytes!!")
# A whole minute and a whole 10-minute window start here, so rate-limit resets are known.
ALIGNED = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
LENIENT = Policy(pairing_attempts_per_minute=1000, pairing_guess_budget=1000)


def make_service(
    policy: Policy = LENIENT, start: datetime = ALIGNED
) -> tuple[CleanAir, ManualClock]:
    clock = ManualClock(start)
    core = CleanAir(MemoryStore(), KEYS, policy, clock)
    core.add_user("alice", premium=True)
    return core, clock


def other_code(code: str) -> str:
    """A well-formed code that differs from `code`."""
    return f"{(int(code) + 1) % 1_000_000:06d}"


# -- the digits -------------------------------------------------------------------------------


@given(value=st.integers(min_value=0, max_value=999_999))
@example(value=0)
@example(value=999_999)
@example(value=7)
def test_codes_are_six_ascii_digits(value: int) -> None:
    bounds: list[int] = []

    def randbelow(bound: int) -> int:
        bounds.append(bound)
        return value

    code = new_code(randbelow)

    assert bounds == [1_000_000]
    assert len(code) == 6
    assert code.isascii()
    assert all(c in "0123456789" for c in code)
    assert int(code) == value


def test_default_codes_are_six_digits() -> None:
    codes = [new_code() for _ in range(200)]
    assert all(len(c) == 6 and c.isascii() and c.isdigit() for c in codes)
    assert len(set(codes)) > 1


def test_service_draws_codes_from_its_random_source() -> None:
    clock = ManualClock(ALIGNED)
    core = CleanAir(MemoryStore(), KEYS, LENIENT, clock, randbelow=lambda _: 42)
    core.add_user("alice")
    assert core.create_pairing_code("alice") == "000042"


# -- redemption -------------------------------------------------------------------------------


def test_code_redeems_once() -> None:
    core, _ = make_service()
    code = core.create_pairing_code("alice")
    issued = core.redeem_pairing_code(code, "phone", "10.0.0.1")
    assert issued.connection.owner == Owner(OwnerKind.USER, "alice")
    with pytest.raises(InvalidPairingCode):
        core.redeem_pairing_code(code, "tablet", "10.0.0.1")
    assert len(core.connections_of_user("alice")) == 1


def test_redeemed_connection_has_the_pairing_scopes() -> None:
    core, _ = make_service()
    issued = core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "10.0.0.1")
    expected = {"aq:read", "aq:routes", "routes:plan"}
    assert {s.value for s in issued.connection.scopes} == expected
    assert issued.connection.name == "phone"
    caller = core.authenticate(issued.token)
    assert {s.value for s in caller.scopes} == expected
    assert caller.owner == Owner(OwnerKind.USER, "alice")
    assert core.connections_of_user("alice") == [issued.connection]


@given(elapsed=st.floats(min_value=0, max_value=59.999_999))
@example(elapsed=59.0)
@example(elapsed=59.999_999)
def test_code_is_alive_before_60_seconds(elapsed: float) -> None:
    core, clock = make_service()
    code = core.create_pairing_code("alice")
    clock.advance(elapsed)
    core.redeem_pairing_code(code, "phone", "10.0.0.1")


@given(elapsed=st.floats(min_value=60, max_value=10 * 86_400))
@example(elapsed=60.0)
def test_code_is_dead_from_60_seconds(elapsed: float) -> None:
    core, clock = make_service()
    code = core.create_pairing_code("alice")
    clock.advance(elapsed)
    with pytest.raises(InvalidPairingCode):
        core.redeem_pairing_code(code, "phone", "10.0.0.1")


def test_code_dies_when_premium_lapses() -> None:
    core, _ = make_service()
    code = core.create_pairing_code("alice")
    core.set_premium("alice", False)
    with pytest.raises(InvalidPairingCode):
        core.redeem_pairing_code(code, "phone", "10.0.0.1")
    assert core.connections_of_user("alice") == []


def test_non_premium_users_cannot_create_codes() -> None:
    core, _ = make_service()
    core.add_user("bob", premium=False)
    with pytest.raises(OperatorError):
        core.create_pairing_code("bob")
    with pytest.raises(OperatorError):
        core.create_pairing_code("nobody")


def test_unknown_code_is_invalid() -> None:
    core, _ = make_service()
    code = core.create_pairing_code("alice")
    with pytest.raises(InvalidPairingCode):
        core.redeem_pairing_code(other_code(code), "phone", "10.0.0.1")
    # The miss did not disturb the real code.
    core.redeem_pairing_code(code, "phone", "10.0.0.1")


FULLWIDTH_DIGITS = "".join(chr(0xFF10 + d) for d in range(1, 7))  # str.isdigit() says yes


@pytest.mark.parametrize(
    "malformed", ["", "12345", "1234567", "12a456", " 12345", "123456\n", FULLWIDTH_DIGITS]
)
def test_malformed_code_is_invalid(malformed: str) -> None:
    core, _ = make_service()
    with pytest.raises(InvalidPairingCode):
        core.redeem_pairing_code(malformed, "phone", "10.0.0.1")


def test_codes_of_two_users_stay_apart() -> None:
    core, _ = make_service()
    core.add_user("bob", premium=True)
    alices = core.create_pairing_code("alice")
    bobs = core.create_pairing_code("bob")
    assert core.redeem_pairing_code(bobs, "b", "10.0.0.1").connection.owner.name == "bob"
    assert core.redeem_pairing_code(alices, "a", "10.0.0.1").connection.owner.name == "alice"


# -- rate limits ------------------------------------------------------------------------------


def test_attempts_are_limited_per_address() -> None:
    policy = Policy(pairing_attempts_per_minute=3, pairing_guess_budget=1000)
    core, clock = make_service(policy, ALIGNED + timedelta(seconds=15.25))
    for _ in range(3):
        with pytest.raises(InvalidPairingCode):
            core.redeem_pairing_code("000000", "phone", "10.0.0.1")

    code = core.create_pairing_code("alice")
    with pytest.raises(RateLimited) as raised:
        core.redeem_pairing_code(code, "phone", "10.0.0.1")
    assert raised.value.retry_after == 45  # 44.75 s to the next minute, rounded up

    # Another address is not affected, and may even redeem the same code.
    core.redeem_pairing_code(code, "phone", "10.0.0.2")

    clock.set(ALIGNED + timedelta(minutes=1))
    with pytest.raises(InvalidPairingCode):
        core.redeem_pairing_code("000000", "phone", "10.0.0.1")


def test_successful_attempts_count_against_the_address() -> None:
    policy = Policy(pairing_attempts_per_minute=2, pairing_guess_budget=1000)
    core, _ = make_service(policy)
    for _ in range(2):
        core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "10.0.0.1")
    with pytest.raises(RateLimited):
        core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "10.0.0.1")


def guessing_service(budget: int, start: datetime = ALIGNED) -> tuple[CleanAir, ManualClock]:
    """A service whose only limit on guessing is the global guess budget."""
    policy = Policy(pairing_attempts_per_minute=1000, pairing_guess_budget=budget)
    return make_service(policy, start)


def wrong_codes(code: str, count: int) -> list[str]:
    """`count` distinct well-formed codes, none of them `code`."""
    return [f"{(int(code) + k) % 1_000_000:06d}" for k in range(1, count + 1)]


def test_an_attack_locks_redemptions_out_for_one_code_life_at_most() -> None:
    # Not aligned to any minute: the lock-out runs from the attack, not from a window edge.
    core, clock = guessing_service(5, ALIGNED + timedelta(seconds=17.5))
    code = core.create_pairing_code("alice")
    for address, wrong in enumerate(wrong_codes(code, 5)):  # five addresses, five guesses
        with pytest.raises(InvalidPairingCode):
            core.redeem_pairing_code(wrong, "phone", f"10.0.1.{address}")

    clock.advance(10)
    with pytest.raises(RateLimited) as raised:
        core.redeem_pairing_code(code, "phone", "10.0.2.1")
    assert raised.value.retry_after == 50
    clock.advance(49.5)
    with pytest.raises(RateLimited) as raised:
        core.redeem_pairing_code(code, "phone", "10.0.2.1")
    assert raised.value.retry_after == 1

    # 60 s after the attack: the code (not consumed while refused) has just died with the
    # lock-out, and the user's fresh code goes through.
    clock.advance(0.5)
    fresh = core.create_pairing_code("alice")
    assert core.redeem_pairing_code(fresh, "phone", "10.0.2.1").connection.owner.name == "alice"


def test_the_lock_out_ends_when_the_oldest_guess_is_a_code_life_old() -> None:
    core, clock = guessing_service(3)
    guesses = wrong_codes("000000", 4)
    for k, wrong in enumerate(guesses[:3]):  # one guess every 20 s
        with pytest.raises(InvalidPairingCode):
            core.redeem_pairing_code(wrong, "phone", "10.0.0.1")
        if k < 2:
            clock.advance(20)
    with pytest.raises(RateLimited) as raised:
        core.redeem_pairing_code(guesses[3], "phone", "10.0.0.2")
    assert raised.value.retry_after == 20  # the first guess leaves the window 60 s after it
    clock.advance(20)
    with pytest.raises(InvalidPairingCode):  # one place freed, for one new code
        core.redeem_pairing_code(guesses[3], "phone", "10.0.0.2")
    with pytest.raises(RateLimited):
        core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "10.0.0.3")


def test_retrying_a_tried_code_spends_nothing() -> None:
    core, _ = guessing_service(2)
    code = core.create_pairing_code("alice")
    (typo,) = wrong_codes(code, 1)
    for address in range(20):
        with pytest.raises(InvalidPairingCode):
            core.redeem_pairing_code(typo, "phone", f"10.0.0.{address}")
    issued = core.redeem_pairing_code(code, "phone", "10.0.1.1")  # the second of two places
    assert issued.connection.owner.name == "alice"
    # Both places are taken now, yet either code may still be tried again: a retry tells an
    # attacker nothing new, so it is answered (401), not refused (429).
    with pytest.raises(InvalidPairingCode):
        core.redeem_pairing_code(code, "phone", "10.0.1.2")
    with pytest.raises(InvalidPairingCode):
        core.redeem_pairing_code(typo, "phone", "10.0.1.3")
    with pytest.raises(RateLimited):
        core.redeem_pairing_code(wrong_codes(code, 2)[1], "phone", "10.0.1.4")


def test_malformed_codes_spend_no_guess() -> None:
    core, _ = guessing_service(1)
    for malformed in ["12345", "abcdef", "1234567", FULLWIDTH_DIGITS]:
        with pytest.raises(InvalidPairingCode):
            core.redeem_pairing_code(malformed, "phone", "10.0.0.1")
    core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "10.0.0.1")


def test_a_guess_budget_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="pairing_guess_budget"):
        Policy(pairing_guess_budget=0)


#: An attack as hypothesis draws it: (seconds the clock moves before the attempt, code
#: tried). Negative moves stand for processes whose time was read before they waited for the
#: store's lock, or whose clocks lag.
ATTEMPTS = st.lists(
    st.tuples(
        st.sampled_from([-30.0, -0.25, 0.0, 0.25, 1.0, 7.5, 29.75, 30.0, 59.75, 60.0, 61.0]),
        st.integers(min_value=0, max_value=11),
    ),
    max_size=60,
)


def check_no_code_life_sees_more_than_the_budget(
    store: Store, attempts: list[tuple[float, int]], budget: int
) -> None:
    """The property the odds rest on: at most `budget` distinct codes reach the code check
    within any 60 s of the times they are checked at. Those times are the clock's, but never
    earlier than an earlier admitted guess's (the store's lock orders them), so the test
    computes them as a running maximum."""
    clock = ManualClock(ALIGNED)
    policy = Policy(pairing_attempts_per_minute=1000, pairing_guess_budget=budget)
    core = CleanAir(store, KEYS, policy, clock)
    checked: list[tuple[datetime, int]] = []
    for step, (move, guess) in enumerate(attempts):
        clock.advance(move)
        try:
            core.redeem_pairing_code(f"{guess:06d}", "phone", f"10.0.{step}.1")
        except InvalidPairingCode:
            at = max([clock.now(), *(time for time, _ in checked)])
            checked.append((at, guess))
        except RateLimited:
            pass
    for start, _ in checked:
        life = {guess for at, guess in checked if start <= at < start + PAIRING_CODE_TTL}
        assert len(life) <= budget


@given(attempts=ATTEMPTS, budget=st.integers(min_value=1, max_value=4))
def test_no_code_life_sees_more_distinct_guesses_than_the_budget(
    attempts: list[tuple[float, int]], budget: int
) -> None:
    check_no_code_life_sees_more_than_the_budget(MemoryStore(), attempts, budget)


@settings(max_examples=40, deadline=None)
@given(attempts=ATTEMPTS, budget=st.integers(min_value=1, max_value=4))
def test_no_code_life_sees_more_distinct_guesses_than_the_budget_on_sqlite(
    attempts: list[tuple[float, int]], budget: int
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        store = SqliteStore(Path(directory) / "pairing.db")
        try:
            check_no_code_life_sees_more_than_the_budget(store, attempts, budget)
        finally:
            store.close()


# -- concurrency ------------------------------------------------------------------------------


def redeem_together(core: CleanAir, code: str, addresses: list[str]) -> list[object]:
    """Redeem `code` from one thread per address, released at once; outcomes or errors."""
    barrier = threading.Barrier(len(addresses))
    outcomes: list[object] = []
    lock = threading.Lock()

    def redeem(address: str) -> None:
        barrier.wait(timeout=30)
        try:
            outcome: object = core.redeem_pairing_code(code, "phone", address)
        except Exception as exc:  # collected and checked by the caller
            outcome = exc
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=redeem, args=(address,)) for address in addresses]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def test_two_threads_redeeming_one_code_only_one_wins(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "pairing.db")
    try:
        core = CleanAir(store, KEYS, LENIENT, ManualClock(ALIGNED))
        core.add_user("alice")
        for round_ in range(20):
            code = core.create_pairing_code("alice")
            outcomes = redeem_together(core, code, [f"10.0.{round_}.1", f"10.0.{round_}.2"])
            winners = [o for o in outcomes if isinstance(o, IssuedConnection)]
            losers = [o for o in outcomes if isinstance(o, InvalidPairingCode)]
            assert (len(winners), len(losers)) == (1, 1), outcomes
            assert winners[0].connection.scopes == frozenset(Scope)
        assert len(core.connections_of_user("alice")) == 20
    finally:
        store.close()


def test_twenty_concurrent_redemptions_of_one_code_spend_one_guess(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "pairing.db")
    try:
        policy = Policy(pairing_attempts_per_minute=1000, pairing_guess_budget=2)
        core = CleanAir(store, KEYS, policy, ManualClock(ALIGNED))
        core.add_user("alice")
        code = core.create_pairing_code("alice")
        outcomes = redeem_together(core, code, [f"10.0.0.{k}" for k in range(20)])
        assert sum(isinstance(o, IssuedConnection) for o in outcomes) == 1
        assert sum(isinstance(o, InvalidPairingCode) for o in outcomes) == 19, outcomes
        # One place of two was spent by all twenty: the user's next code still goes through.
        core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "10.0.1.1")
    finally:
        store.close()
