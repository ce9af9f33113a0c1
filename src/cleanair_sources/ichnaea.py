"""`WifiGeolocator` over an Ichnaea-compatible geolocate API.

Mozilla's Ichnaea defined the format; BeaconDB, Google's Geolocation API and self-hosted
Ichnaea speak it: `POST {"considerIp": false, "wifiAccessPoints": [{"macAddress": ...,
"signalStrength": ...}]}` answers `{"location": {"lat": ..., "lng": ...}, "accuracy": ...}`,
or 404 when there is no fix.

The request body carries BSSIDs and the URL may carry an API key, so neither is ever logged
nor put into an exception: every failure becomes a bare `SourceUnavailable` raised `from None`
(no chained httpx exception holding the request). httpx itself logs each request URL, key
included, at INFO on the `httpx` logger; the composition root raises that logger to WARNING
(`cleanair_runtime.logs.quiet_upstream_urls`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import httpx

from cleanair_core.air.wifi import WifiAccessPoint
from cleanair_core.air.wifi_location import locatable_scan
from cleanair_core.errors import SourceUnavailable
from cleanair_core.geo import Point
from cleanair_core.metrics import NO_METRICS, Metrics, Upstream

UNAVAILABLE = "The Wi-Fi geolocation service is unavailable"


class IchnaeaGeolocator:
    """Resolves a scan through a remote Ichnaea-style `/v1/geolocate` endpoint.

    Only the usable part of the scan is sent (fixed access points, de-duplicated, strongest
    first, at most `MAX_SCAN_ACCESS_POINTS`; see `locatable_scan`), and only when it holds at
    least `MIN_ACCESS_POINTS`; otherwise no request is made and the answer is None.

    Statuses: 200 with a valid location → the point; 404 (no fix) → None. Everything else is
    `SourceUnavailable`, including 400: our request is built from validated, filtered data, so
    a 400 means a bug here or a changed upstream (or, for Google, a bad key), which the
    operator must hear about as an outage rather than as scans that silently never resolve.
    Timeouts, transport errors and malformed JSON are `SourceUnavailable` as well.

    The geolocator owns `client`: `aclose` closes it.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        url: str,
        api_key: str | None = None,
        timeout: float = 5.0,
        *,
        metrics: Metrics = NO_METRICS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """`metrics` hears of every request: its time (on `monotonic`) and whether it
        failed (a 404, no fix for the scan, is an answer, not a failure)."""
        self._client = client
        self._url = url
        self._params = {} if api_key is None else {"key": api_key}
        self._timeout = timeout
        self._metrics = metrics
        self._monotonic = monotonic

    def __repr__(self) -> str:  # never show the key
        return "IchnaeaGeolocator(<url hidden>)"

    async def locate(self, scan: Sequence[WifiAccessPoint]) -> Point | None:
        usable = locatable_scan(scan)
        if usable is None:
            return None
        body = {
            "considerIp": False,
            "wifiAccessPoints": [
                {"macAddress": mac, "signalStrength": rssi} for mac, rssi in usable
            ],
        }
        started = self._monotonic()
        try:
            response = await self._client.post(
                self._url, json=body, params=self._params, timeout=self._timeout
            )
        except httpx.HTTPError:
            self._answered(started, failed=True)
            raise SourceUnavailable(UNAVAILABLE) from None
        if response.status_code == 404:
            self._answered(started, failed=False)
            return None
        point = _point(response) if response.status_code == 200 else None
        self._answered(started, failed=point is None)
        if point is None:
            raise SourceUnavailable(UNAVAILABLE)
        return point

    def _answered(self, started: float, *, failed: bool) -> None:
        seconds = self._monotonic() - started
        self._metrics.upstream_request(Upstream.ICHNAEA, seconds, failed=failed)

    async def aclose(self) -> None:
        await self._client.aclose()


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _point(response: httpx.Response) -> Point | None:
    """The location of a 200 answer, or None when the answer is not a valid one."""
    try:
        payload = response.json()
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both are ValueErrors
        return None
    location = payload.get("location") if isinstance(payload, dict) else None
    if not isinstance(location, dict):
        return None
    lat, lon = _number(location.get("lat")), _number(location.get("lng"))
    if lat is None or lon is None or not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
        return None
    return Point(lat, lon)
