"""BSSIDs from requests are never logged, echoed or stored (contract 2.3; issue 3).

Every log record at DEBUG, every response and every byte of the SQLite files are searched
for each BSSID of the requests, in every spelling a MAC address can take.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.air.wifi import KnownAccessPoint
from cleanair_core.air.wifi_location import LocalWifiGeolocator
from cleanair_core.geo import Point
from cleanair_core.ports import Sources
from cleanair_storage.sqlite import SqliteStore
from support.fakes import FakeIp, FakeNamer, FakeSource
from support.http import Client, MakeClient, bearer, pair

SCORE = "/v1/airquality/score"
# Three access points the operator imported, a few metres apart in Helsinki.
KNOWN = {
    "3C:84:6A:10:20:31": Point(60.16990, 24.93840),
    "3C:84:6A:10:20:32": Point(60.16995, 24.93870),
    "3C:84:6A:10:20:33": Point(60.16985, 24.93855),
}
UNKNOWN = ["8C-3B-AD-44-55-66", "8c3bad445567", "8C3B.AD44.5568"]


def spellings(mac: str) -> set[str]:
    """The MAC as sent, and bare, colon, dash and dotted forms in both cases."""
    digits = re.sub(r"[^0-9a-fA-F]", "", mac)
    assert len(digits) == 12
    forms = {mac}
    for text in (digits.lower(), digits.upper()):
        octets = [text[i : i + 2] for i in range(0, 12, 2)]
        forms.update({text, ":".join(octets), "-".join(octets)})
        forms.add(".".join(text[i : i + 4] for i in range(0, 12, 4)))
    return forms


@pytest.fixture
def core(tmp_path: Path, clock: ManualClock) -> Iterator[CleanAir]:
    store = SqliteStore(tmp_path / "cleanair.db")
    keys = TokenKeys(generate_key())
    store.put_access_points(
        (keys.hash_bssid(mac.lower().replace("-", ":")), KnownAccessPoint(point, 20.0))
        for mac, point in KNOWN.items()
    )
    sources = Sources(FakeSource(), LocalWifiGeolocator(store, keys), FakeIp(), FakeNamer())
    yield CleanAir(store, keys, Policy(), clock, sources=sources)
    store.close()


def scan(*macs: str) -> list[dict[str, Any]]:
    return [{"mac": mac, "rssi": -40 - i} for i, mac in enumerate(macs)]


def test_no_bssid_is_logged_echoed_or_stored(
    core: CleanAir,
    make_client: MakeClient,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.DEBUG)
    client: Client = make_client(access_log=True)
    token = pair(core, client)
    known = list(KNOWN)
    requests = [
        ({"wifi": scan(*known)}, 200),  # resolved from the imported access points
        ({"wifi": scan(*known, *UNKNOWN)}, 200),
        ({"wifi": scan(*UNKNOWN)}, 422),  # nothing known
        ({"wifi": scan(known[0], *UNKNOWN)}, 422),  # one known AP alone never locates
        ({"lat": 60.2, "lon": 24.9, "wifi": scan(*known)}, 200),  # coordinates win
        ({"wifi": [{"mac": UNKNOWN[0], "rssi": 5}]}, 422),  # invalid body
        ({"wifi": [{"mac": UNKNOWN[1] * 3, "rssi": -50}]}, 422),
    ]
    responses = []
    for body, status in requests:
        response = client.post(SCORE, json=body, headers=bearer(token))
        assert response.status_code == status, body
        responses.append(response.text)

    located = client.post(SCORE, json={"wifi": scan(*known)}, headers=bearer(token))
    assert located.status_code == 200
    assert caplog.records, "the access log should have written records"
    logged = "\n".join(
        record.getMessage() + " " + repr(record.__dict__) for record in caplog.records
    )
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("cleanair.db*"))
    for mac in [*known, *UNKNOWN]:
        for form in spellings(mac):
            assert form not in logged
            assert all(form not in text for text in responses)
            assert form.encode() not in stored
