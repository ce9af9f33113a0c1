"""Bearer tokens `ca_<env>_<secret>` and the server key that hashes them."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.access.tokens import (
    Environment,
    issue_token,
    same_hash,
    token_environment,
)
from cleanair_core.keys import TokenKeys, generate_key

# Written from the contract: prefix `ca`, env `tst` or `pdn`, 256 random bits as 43 base64url.
TOKEN_SHAPE = re.compile(r"ca_(tst|pdn)_[A-Za-z0-9_-]{43}")
SECRET = "A" * 20 + "-_" + "z9" * 10 + "Q"  # 43 characters of the base64url alphabet
KEY = b"0123456789abcdef0123456789abcdef"


def test_secret_fixture_is_43_characters() -> None:
    assert len(SECRET) == 43


@pytest.mark.parametrize("environment", list(Environment))
def test_issued_tokens_have_the_contract_shape(environment: Environment) -> None:
    tokens = {issue_token(environment) for _ in range(50)}
    assert len(tokens) == 50
    for token in tokens:
        assert TOKEN_SHAPE.fullmatch(token), token
        assert token.split("_", 2)[1] == environment.value
        assert token_environment(token) is environment


def test_environment_values_are_the_contract_ones() -> None:
    assert {e.value for e in Environment} == {"tst", "pdn"}


@pytest.mark.parametrize(
    ("token", "environment"),
    [
        (f"ca_tst_{SECRET}", Environment.TEST),
        (f"ca_pdn_{SECRET}", Environment.PRODUCTION),
        ("ca_tst_" + "_" * 43, Environment.TEST),  # underscores belong to the secret alphabet
    ],
)
def test_environment_of_well_formed_tokens(token: str, environment: Environment) -> None:
    assert token_environment(token) is environment


@pytest.mark.parametrize(
    "token",
    [
        "",
        "ca",
        "ca_tst",
        "ca_tst_",
        f"cb_tst_{SECRET}",  # wrong prefix
        f"CA_tst_{SECRET}",
        f"xca_tst_{SECRET}",
        f"_tst_{SECRET}",
        f"ca_dev_{SECRET}",  # wrong environment
        f"ca_TST_{SECRET}",
        f"ca__{SECRET}",
        f"ca_tst_{SECRET[:42]}",  # short secret
        f"ca_tst_{SECRET}A",  # long secret
        f"ca_tst_{SECRET[:42]}!",  # outside the alphabet
        f"ca_tst_{SECRET[:42]}=",
        f"ca_tst_{SECRET[:42]}.",
        f"ca_tst_{SECRET[:42]}é",
        f"ca_tst_{SECRET} ",  # extra characters
        f" ca_tst_{SECRET}",
        f"ca_tst_{SECRET}\n",
        f"ca_tst_{SECRET}\r\n",
        f"Bearer ca_tst_{SECRET}",
        f"ca_tst_{SECRET}ca_tst_{SECRET}",
    ],
)
def test_malformed_tokens_have_no_environment(token: str) -> None:
    assert token_environment(token) is None


NEAR_TOKENS = st.builds(
    "{}_{}_{}{}".format,
    st.sampled_from(["ca", "cb", "CA", ""]),
    st.sampled_from(["tst", "pdn", "dev", "TST", ""]),
    st.text(alphabet=st.sampled_from("Az09-_=.+/ é"), min_size=41, max_size=45),
    st.sampled_from(["", "", "", "\n", " ", "x"]),
)


@given(NEAR_TOKENS)
def test_environment_is_named_exactly_for_the_contract_shape(token: str) -> None:
    expected = token.split("_")[1] if TOKEN_SHAPE.fullmatch(token) else None
    found = token_environment(token)
    assert (None if found is None else found.value) == expected


@given(secret=st.text(alphabet=st.sampled_from("Az09-_"), min_size=43, max_size=43))
def test_any_43_character_secret_is_well_formed(secret: str) -> None:
    assert token_environment(f"ca_pdn_{secret}") is Environment.PRODUCTION
    assert token_environment(f"ca_pdn_{secret}\n") is None


# -- the server key ---------------------------------------------------------------------------


@pytest.mark.parametrize("length", [0, 1, 16, 31])
def test_short_keys_are_rejected(length: int) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        TokenKeys(b"k" * length)


def test_keys_of_32_bytes_or_more_are_accepted() -> None:
    TokenKeys(b"k" * 32)
    TokenKeys(b"k" * 64)
    assert len(generate_key()) >= 32
    assert generate_key() != generate_key()


def test_repr_hides_the_key() -> None:
    secret = b"super-secret-key-material-XYZ-42"
    keys = TokenKeys(secret)
    for shown in (repr(keys), str(keys), f"{keys!r}", repr([keys]), repr({"keys": keys})):
        assert "super-secret" not in shown
        assert secret.hex() not in shown
        assert "XYZ-42" not in shown


def test_hashes_are_stable_hex_digests_of_the_key() -> None:
    keys = TokenKeys(KEY)
    token = f"ca_tst_{SECRET}"
    digest = keys.hash_token(token)
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert TokenKeys(KEY).hash_token(token) == digest
    assert TokenKeys(KEY[::-1]).hash_token(token) != digest
    assert keys.hash_token(token + "x") != digest
    assert SECRET not in digest


@given(value=st.text(max_size=50))
def test_token_and_pairing_code_hashes_are_separate_domains(value: str) -> None:
    keys = TokenKeys(KEY)
    assert keys.hash_token(value) != keys.hash_pairing_code(value)


def test_pairing_code_hashes_differ_per_code() -> None:
    keys = TokenKeys(KEY)
    hashes = {keys.hash_pairing_code(f"{n:06d}") for n in range(1000)}
    assert len(hashes) == 1000


def test_same_hash() -> None:
    keys = TokenKeys(KEY)
    a, b = keys.hash_token("a"), keys.hash_token("b")
    assert same_hash(a, a)
    assert not same_hash(a, b)
    assert not same_hash(a, a[:-1])
