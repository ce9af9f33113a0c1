"""Contract of `AccessPointStore` (the `store` fixture runs it on every adapter)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cleanair_core.air.wifi import KnownAccessPoint, is_bssid_hash
from cleanair_core.geo import Point
from cleanair_core.keys import TokenKeys
from cleanair_core.ports import Store
from cleanair_storage.sqlite import LOOKUP_CHUNK, SqliteStore

KEYS = TokenKeys(b"access-point-store-tests-key-32-b")
H1, H2, H3 = (KEYS.hash_bssid(f"00:11:22:33:44:0{i}") for i in (1, 2, 3))
BERLIN = KnownAccessPoint(Point(52.52, 13.405), 25.0)
SYDNEY = KnownAccessPoint(Point(-33.8688, 151.2093))
DATELINE = KnownAccessPoint(Point(-16.5, 180.0), 0.5)


def test_put_and_find(store: Store) -> None:
    assert store.put_access_points([(H1, BERLIN), (H2, SYDNEY)]) == 2
    assert store.find_access_points([H1, H2]) == {H1: BERLIN, H2: SYDNEY}
    assert store.find_access_points([H2]) == {H2: SYDNEY}
    assert store.count_access_points() == 2


def test_find_returns_only_the_known_ones(store: Store) -> None:
    store.put_access_points([(H1, BERLIN)])
    assert store.find_access_points([H3, H1, H3]) == {H1: BERLIN}
    assert store.find_access_points([H2, H3]) == {}


def test_empty_store_and_empty_lookups(store: Store) -> None:
    assert store.count_access_points() == 0
    assert store.find_access_points([]) == {}
    assert store.find_access_points([H1]) == {}
    assert store.put_access_points([]) == 0
    assert store.count_access_points() == 0


def test_put_replaces(store: Store) -> None:
    store.put_access_points([(H1, BERLIN), (H2, SYDNEY)])
    assert store.put_access_points([(H1, DATELINE)]) == 1
    assert store.find_access_points([H1, H2]) == {H1: DATELINE, H2: SYDNEY}
    assert store.count_access_points() == 2


def test_the_last_entry_for_a_hash_wins_within_one_put(store: Store) -> None:
    store.put_access_points([(H1, BERLIN), (H1, SYDNEY)])
    assert store.find_access_points([H1]) == {H1: SYDNEY}
    assert store.count_access_points() == 1


def test_values_survive_the_round_trip(store: Store) -> None:
    precise = KnownAccessPoint(Point(-89.999999999, -179.123456789012), 123.456)
    store.put_access_points(iter([(H1, precise), (H2, DATELINE)]))  # any iterable will do
    assert store.find_access_points([H1, H2]) == {H1: precise, H2: DATELINE}


def test_lookups_larger_than_one_chunk(store: Store) -> None:
    hashes = [KEYS.hash_bssid(f"00:11:22:33:{i // 256:02x}:{i % 256:02x}") for i in range(1_200)]
    assert LOOKUP_CHUNK < 1_200
    store.put_access_points((h, BERLIN) for h in hashes[::2])
    found = store.find_access_points(hashes)
    assert set(found) == set(hashes[::2])
    assert store.count_access_points() == 600


@pytest.mark.parametrize(
    "key",
    ["00:11:22:33:44:55", "001122334455", "0011.2233.4455", H1.upper(), H1[:-1], H1 + "0", ""],
)
def test_anything_but_a_hash_is_refused_and_nothing_is_written(store: Store, key: str) -> None:
    with pytest.raises(ValueError, match="hash") as raised:
        store.put_access_points([(H2, SYDNEY), (key, BERLIN)])
    assert key == "" or key not in str(raised.value)
    assert store.count_access_points() == 0
    assert not is_bssid_hash(key)


def test_the_database_file_never_holds_a_raw_bssid(tmp_path: Path) -> None:
    macs = [f"a4:2b:b0:{i:02x}:5e:c7" for i in range(50)]
    hashes = [KEYS.hash_bssid(mac) for mac in macs]
    path = tmp_path / "cleanair.db"
    store = SqliteStore(path)
    try:
        store.put_access_points((h, BERLIN) for h in hashes)
        assert store.count_access_points() == 50
        files = [path, path.with_name(path.name + "-wal")]
        # Read while the store is open (the rows may sit only in the WAL) and after it closed
        # (checkpointed into the main file).
        contents = b"".join(f.read_bytes() for f in files if f.exists())
    finally:
        store.close()
    contents += b"".join(f.read_bytes() for f in files if f.exists())

    # The positive control: the hashes are there, so we read the right bytes.
    assert all(h.encode() in contents for h in hashes)
    text = contents.decode("latin-1").lower()
    for mac in macs:
        bare = mac.replace(":", "")
        for form in (mac, mac.replace(":", "-"), bare, ".".join(re.findall("....", bare))):
            assert form not in text
        assert bytes.fromhex(bare) not in contents  # nor as six raw bytes
