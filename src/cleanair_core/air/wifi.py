"""Wi-Fi access points: what a scan carries, what the server knows, and the ports.

BSSIDs are personal data (they reveal where a person is). A scan from a request is used to
compute one point and then dropped: never logged, never stored. The access points the operator
imports are stored only under a keyed hash of their BSSID (`TokenKeys.hash_bssid`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import attrs

from cleanair_core.geo import Point

_BSSID_HASH = re.compile(r"[0-9a-f]{64}")


@attrs.frozen(repr=False)
class WifiAccessPoint:
    """One entry of a scan: a BSSID as the client sent it and its signal in dBm."""

    mac: str
    rssi: int

    def __repr__(self) -> str:  # a repr lands in tracebacks and logs; never show the BSSID
        return f"WifiAccessPoint(<hidden>, rssi={self.rssi})"


@attrs.frozen
class KnownAccessPoint:
    """Where an access point is, as imported by the operator."""

    point: Point
    accuracy_m: float | None = None


def is_bssid_hash(value: str) -> bool:
    """Whether `value` has the form of `TokenKeys.hash_bssid` (64 lowercase hex digits).

    The stores refuse any other key, so a raw BSSID cannot be stored by mistake.
    """
    return _BSSID_HASH.fullmatch(value) is not None


class AccessPointStore(Protocol):
    """Imported access points, keyed by `TokenKeys.hash_bssid` of the normalised BSSID."""

    def put_access_points(self, entries: Iterable[tuple[str, KnownAccessPoint]]) -> int:
        """Insert or replace; returns how many entries were written.

        All or nothing per call (one write transaction); a later entry for the same hash wins.
        Raises ValueError, writing nothing, if a key is not `is_bssid_hash`.
        """
        ...

    def find_access_points(self, bssid_hashes: Sequence[str]) -> Mapping[str, KnownAccessPoint]:
        """The known ones among `bssid_hashes`."""
        ...

    def count_access_points(self) -> int: ...


class WifiGeolocator(Protocol):
    """Turns a scan into a point, or None when the scan cannot be resolved.

    Raises `SourceUnavailable` when a remote geolocation service does not answer.
    """

    async def locate(self, scan: Sequence[WifiAccessPoint]) -> Point | None: ...
