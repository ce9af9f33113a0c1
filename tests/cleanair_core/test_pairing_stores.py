"""Redemption on every store: one rule for names, and the code spent only with its connection.

PostgreSQL's text cannot hold U+0000; a name carrying one was a 500 there (and stored as
given on SQLite), and its code was spent anyway, because the code was marked used in one
transaction and the connection stored in another.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cleanair_core.access.connections import Connection
from cleanair_core.clock import ManualClock
from cleanair_core.errors import (
    InvalidPairingCode,
    RateLimited,
    StoreUnavailable,
    Unprocessable,
)
from cleanair_core.keys import TokenKeys
from cleanair_core.policy import Policy
from cleanair_core.ports import Store
from cleanair_core.service import CleanAir

KEYS = TokenKeys(b"pairing-store-tests-server-key-32b!")
NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


def service(store: Store, guess_budget: int = 1000) -> CleanAir:
    policy = Policy(pairing_attempts_per_minute=1000, pairing_guess_budget=guess_budget)
    core = CleanAir(store, KEYS, policy, ManualClock(NOW))
    core.add_user("alice")
    return core


@pytest.mark.parametrize(
    "name",
    ["a\x00b", "\x00", "tab\there", "line\nbreak", "esc\x1b[2J", "del\x7f", "next\x85line"],
    ids=["nul", "only-nul", "tab", "newline", "escape", "delete", "c1-next-line"],
)
def test_a_name_with_a_control_character_is_refused_alike_on_every_store(
    store: Store, name: str
) -> None:
    core = service(store)
    code = core.create_pairing_code("alice")

    with pytest.raises(Unprocessable):
        core.redeem_pairing_code(code, name, "10.0.0.1")

    assert core.connections_of_user("alice") == []
    # The code was not tried, let alone spent: it still pairs.
    assert core.redeem_pairing_code(code, "phone", "10.0.0.1").connection.name == "phone"


@pytest.mark.parametrize("name", ["Kitchen display", "Küche 🌬", "x" * 100, "a\u200bb"])
def test_printable_names_are_stored_as_given(store: Store, name: str) -> None:
    core = service(store)
    issued = core.redeem_pairing_code(core.create_pairing_code("alice"), name, "10.0.0.1")
    assert [c.name for c in core.connections_of_user("alice")] == [name]
    assert issued.connection.name == name


def test_a_connection_that_cannot_be_stored_leaves_its_code_unspent(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = service(store)
    code = core.create_pairing_code("alice")

    def unavailable(connection: Connection) -> None:
        raise StoreUnavailable()

    with monkeypatch.context() as patched:
        patched.setattr(store, "add_connection", unavailable)
        with pytest.raises(StoreUnavailable):
            core.redeem_pairing_code(code, "phone", "10.0.0.1")

    assert core.connections_of_user("alice") == []
    # Code and connection are one transaction: the code comes back with the failure.
    assert core.redeem_pairing_code(code, "phone", "10.0.0.1").connection.name == "phone"
    with pytest.raises(InvalidPairingCode):
        core.redeem_pairing_code(code, "tablet", "10.0.0.1")


def test_a_wrong_code_still_spends_a_guess_inside_the_transaction(store: Store) -> None:
    """InvalidPairingCode is raised after the transaction commits: raised inside it, the
    guess just recorded would roll back and wrong codes would cost nothing."""
    core = service(store, guess_budget=1)
    code = core.create_pairing_code("alice")
    wrong = f"{(int(code) + 1) % 1_000_000:06d}"
    with pytest.raises(InvalidPairingCode):
        core.redeem_pairing_code(wrong, "phone", "10.0.0.1")
    with pytest.raises(RateLimited):
        core.redeem_pairing_code(code, "phone", "10.0.0.1")
