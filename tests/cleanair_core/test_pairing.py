"""Pairing codes: six digits, single use, 60 seconds, premium only, rate limited."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cleanair_core.accounts import Owner, OwnerKind
from cleanair_core.clock import ManualClock
from cleanair_core.connections import IssuedConnection
from cleanair_core.errors import InvalidPairingCode, OperatorError, RateLimited
from cleanair_core.pairing import new_code
from cleanair_core.scopes import Scope
from cleanair_core.service import CleanAir, Policy
from cleanair_core.tokens import TokenKeys
from cleanair_storage.memory import MemoryStore
from cleanair_storage.sqlite import SqliteStore

KEYS = TokenKeys(b"pairing-tests-server-key-32-bytes!!")
# A whole minute and a whole 10-minute window start here, so rate-limit resets are known.
ALIGNED = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
LENIENT = Policy(pairing_attempts_per_minute=1000, pairing_failure_budget=1000)


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
    policy = Policy(pairing_attempts_per_minute=3, pairing_failure_budget=1000)
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
    policy = Policy(pairing_attempts_per_minute=2, pairing_failure_budget=1000)
    core, _ = make_service(policy)
    for _ in range(2):
        core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "10.0.0.1")
    with pytest.raises(RateLimited):
        core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "10.0.0.1")


def test_global_failure_budget_blocks_even_valid_codes() -> None:
    policy = Policy(
        pairing_attempts_per_minute=1000, pairing_failure_budget=5, pairing_failure_window=600
    )
    # 590 s into a 10-minute window: the budget resets in 10 s, while a fresh code lives 60 s.
    core, clock = make_service(policy, ALIGNED + timedelta(seconds=590))
    code = core.create_pairing_code("alice")
    for address in range(5):
        with pytest.raises(InvalidPairingCode):
            core.redeem_pairing_code(other_code(code), "phone", f"10.0.1.{address}")

    with pytest.raises(RateLimited) as raised:
        core.redeem_pairing_code(code, "phone", "10.0.2.1")
    assert raised.value.retry_after == 10

    clock.advance(9.5)
    with pytest.raises(RateLimited):
        core.redeem_pairing_code(code, "phone", "10.0.2.1")

    clock.advance(0.5)  # the next window: the code, not consumed while blocked, works
    issued = core.redeem_pairing_code(code, "phone", "10.0.2.1")
    assert issued.connection.owner.name == "alice"


def test_successes_do_not_spend_the_failure_budget() -> None:
    policy = Policy(pairing_attempts_per_minute=1000, pairing_failure_budget=2)
    core, _ = make_service(policy)
    for _ in range(5):
        core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "10.0.0.1")
    with pytest.raises(InvalidPairingCode):
        core.redeem_pairing_code("000000", "phone", "10.0.0.1")


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
