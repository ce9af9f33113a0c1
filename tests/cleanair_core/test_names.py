"""Names and labels are checked against the whole string: a trailing newline is no loophole.

`re.match` with `$` accepts "bob\\n" (`$` also matches before a final newline), which let an
operator create "bob\\n" beside "bob". Every check here must refuse such near-namesakes.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cleanair_core.access.accounts import validate_account_name
from cleanair_core.air.forecast_window import parse_timezone
from cleanair_core.clock import ManualClock
from cleanair_core.credits.attribution import attribution_label, validate_client_label
from cleanair_core.credits.ledger import Billable
from cleanair_core.errors import InvalidPairingCode, NotAuthenticated, Unprocessable
from cleanair_core.keys import TokenKeys
from cleanair_core.policy import Policy
from cleanair_core.service import CleanAir
from cleanair_storage.memory import MemoryStore

KEYS = TokenKeys(b"name-tests-server-key-of-32-bytes!!")
#: What a shell's $'...' or a pasted line most easily smuggles in after or before a name.
INVISIBLE_EDGES = ["\n", "\r\n", "\r", "\x00", " ", "\t"]


@pytest.fixture
def core() -> CleanAir:
    return CleanAir(MemoryStore(), KEYS, Policy(), ManualClock())


@pytest.mark.parametrize("edge", INVISIBLE_EDGES)
def test_a_user_name_with_a_trailing_or_leading_control_is_refused(
    core: CleanAir, edge: str
) -> None:
    core.add_user("bob")
    for name in (f"bob{edge}", f"{edge}bob"):
        with pytest.raises(ValueError, match="a name is"):
            core.add_user(name)
        assert core.store.get_user(name) is None
    assert core.store.get_user("bob") is not None


@pytest.mark.parametrize("edge", INVISIBLE_EDGES)
def test_a_partner_name_with_a_trailing_or_leading_control_is_refused(
    core: CleanAir, edge: str
) -> None:
    for name in (f"acme{edge}", f"{edge}acme"):
        with pytest.raises(ValueError, match="a name is"):
            core.add_partner(name)
        assert core.store.get_partner(name) is None


def test_a_user_with_a_trailing_newline_cannot_be_added_before_its_namesake(
    core: CleanAir,
) -> None:
    with pytest.raises(ValueError, match="a name is"):
        core.add_user("bob\n")
    core.add_user("bob")  # the plain name is still free
    assert core.store.get_user("bob") is not None


@given(
    name=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,98}", fullmatch=True),
    tail=st.sampled_from(INVISIBLE_EDGES),
)
@example(name="bob", tail="\n")
@example(name="a" * 99, tail="\n")  # 100 characters: only the newline is wrong
def test_any_valid_name_plus_a_control_is_refused(name: str, tail: str) -> None:
    assert validate_account_name(name) == name
    with pytest.raises(ValueError, match="a name is"):
        validate_account_name(name + tail)


@pytest.mark.parametrize("label", ["app\n", "app\r\n", "\napp", "app\x00", "app "])
def test_a_client_label_with_a_control_is_refused(core: CleanAir, label: str) -> None:
    with pytest.raises(ValueError, match="client label"):
        validate_client_label(label)
    with pytest.raises(ValueError, match="client label"):
        core.add_client_label(label)
    assert not core.store.is_client_label(label)


def test_a_recognised_label_with_a_trailing_newline_is_not_attributed(core: CleanAir) -> None:
    core.add_client_label("app")
    assert attribution_label("app", Billable.SCORE, core.store) == "client:app"
    assert attribution_label("app\n", Billable.SCORE, core.store) == Billable.SCORE.value


@pytest.mark.parametrize("zone", ["Europe/Helsinki\n", "UTC\n", "Europe/Helsinki\r\n"])
def test_a_timezone_with_a_trailing_newline_is_unprocessable(zone: str) -> None:
    parse_timezone(zone.rstrip())
    with pytest.raises(Unprocessable):
        parse_timezone(zone)


def test_a_pairing_code_with_a_trailing_newline_does_not_redeem(core: CleanAir) -> None:
    """The API's schema already refuses it by length; the core refuses it on its own too."""
    core.add_user("alice")
    code = core.create_pairing_code("alice")
    with pytest.raises(InvalidPairingCode):
        core.redeem_pairing_code(code + "\n", "app", "127.0.0.1")
    # The code was not spent by the refused attempt.
    assert core.redeem_pairing_code(code, "app", "127.0.0.1").connection.name == "app"


def test_a_token_with_a_trailing_newline_does_not_authenticate(core: CleanAir) -> None:
    core.add_user("alice")
    issued = core.redeem_pairing_code(core.create_pairing_code("alice"), "app", "127.0.0.1")
    core.authenticate(issued.token)
    with pytest.raises(NotAuthenticated):
        core.authenticate(issued.token + "\n")
