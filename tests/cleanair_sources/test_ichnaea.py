"""The Ichnaea-compatible geolocator over `httpx.MockTransport`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence

import httpx
import pytest

from cleanair_core.air.wifi import WifiAccessPoint
from cleanair_core.errors import SourceUnavailable
from cleanair_core.geo import Point
from cleanair_sources.ichnaea import IchnaeaGeolocator

URL = "https://location.example/v1/geolocate"
KEY = "secret-api-key-123"
A, B = "00:11:22:33:44:01", "00:11:22:33:44:02"
SCAN = [WifiAccessPoint(A, -60), WifiAccessPoint(B, -70)]
FIX = {"location": {"lat": 52.52, "lng": 13.405}, "accuracy": 42.0}

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A MockTransport handler that records requests and answers with `respond`."""

    def __init__(self, respond: Handler) -> None:
        self.respond = respond
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.respond(request)


def answer(status: int, body: object = None, content: bytes | None = None) -> Handler:
    def respond(_: httpx.Request) -> httpx.Response:
        if content is not None:
            return httpx.Response(status, content=content)
        return httpx.Response(status, json=body)

    return respond


def locate(
    handler: Handler, scan: Sequence[WifiAccessPoint] = SCAN, api_key: str | None = None
) -> Point | None:
    async def run() -> Point | None:
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        geolocator = IchnaeaGeolocator(client, URL, api_key, timeout=2.0)
        try:
            return await geolocator.locate(scan)
        finally:
            await geolocator.aclose()
            assert client.is_closed

    return asyncio.run(run())


def test_a_fix_is_a_point_and_the_body_has_the_ichnaea_shape() -> None:
    recorder = Recorder(answer(200, FIX))
    assert locate(recorder) == Point(52.52, 13.405)

    (request,) = recorder.requests
    assert request.method == "POST"
    assert str(request.url) == URL  # no key configured, no key sent
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == {
        "considerIp": False,
        "wifiAccessPoints": [
            {"macAddress": A, "signalStrength": -60},
            {"macAddress": B, "signalStrength": -70},
        ],
    }
    assert request.extensions["timeout"]["read"] == 2.0


def test_the_key_goes_in_the_query() -> None:
    recorder = Recorder(answer(200, FIX))
    locate(recorder, api_key=KEY)
    (request,) = recorder.requests
    assert request.url.params["key"] == KEY
    assert request.url.copy_with(query=None) == httpx.URL(URL)


def test_the_scan_is_filtered_before_it_is_sent() -> None:
    recorder = Recorder(answer(200, FIX))
    scan = [
        WifiAccessPoint("00-11-22-33-44-02", -80),
        WifiAccessPoint("0011.2233.4402", -70),  # the same one, stronger
        WifiAccessPoint("02:11:22:33:44:03", -20),  # randomised
        WifiAccessPoint("01:00:5e:00:00:01", -20),  # multicast
        WifiAccessPoint("ff:ff:ff:ff:ff:ff", -20),
        WifiAccessPoint("00:00:00:00:00:00", -20),
        WifiAccessPoint("not-a-mac", -20),
        WifiAccessPoint("00:11:22:33:44:01", -60),
    ]
    assert locate(recorder, scan) is not None
    sent = json.loads(recorder.requests[0].content)["wifiAccessPoints"]
    assert sent == [
        {"macAddress": A, "signalStrength": -60},
        {"macAddress": B, "signalStrength": -70},
    ]


@pytest.mark.parametrize(
    "scan",
    [
        [],
        [WifiAccessPoint(A, -50)],
        [WifiAccessPoint(A, -50), WifiAccessPoint("00-11-22-33-44-01", -40)],  # one, twice
        [WifiAccessPoint(A, -50), WifiAccessPoint("02:11:22:33:44:02", -40)],  # one usable
    ],
)
def test_fewer_than_two_usable_access_points_send_nothing(
    scan: list[WifiAccessPoint],
) -> None:
    recorder = Recorder(answer(200, FIX))
    assert locate(recorder, scan) is None
    assert recorder.requests == []


def test_no_fix_is_none() -> None:
    body = {"error": {"code": 404, "message": "Not found", "errors": [{"reason": "notFound"}]}}
    assert locate(answer(404, body)) is None


@pytest.mark.parametrize("status", [400, 401, 403, 429, 500, 502, 503, 301])
def test_other_statuses_are_unavailable(status: int) -> None:
    with pytest.raises(SourceUnavailable):
        locate(answer(status, {"error": {}}))


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"\xff\xfe",
        b"[]",
        b"{}",
        b'{"location": null}',
        b'{"location": {"lat": 52.5}}',
        b'{"location": {"lat": "52.5", "lng": "13.4"}}',
        b'{"location": {"lat": true, "lng": 13.4}}',
        b'{"location": {"lat": 95.0, "lng": 13.4}}',
        b'{"location": {"lat": 52.5, "lng": 181}}',
        b'{"location": {"lat": NaN, "lng": 13.4}}',
    ],
)
def test_malformed_answers_are_unavailable(content: bytes) -> None:
    with pytest.raises(SourceUnavailable):
        locate(answer(200, content=content))


def test_an_answer_without_accuracy_still_locates() -> None:
    assert locate(answer(200, {"location": {"lat": -33.9, "lng": 151}})) == Point(-33.9, 151.0)


@pytest.mark.parametrize(
    "error",
    [
        httpx.ReadTimeout("timed out"),
        httpx.ConnectTimeout("timed out"),
        httpx.ConnectError("refused"),
        httpx.RemoteProtocolError("bad"),
    ],
)
def test_timeouts_and_transport_errors_are_unavailable(error: httpx.HTTPError) -> None:
    def fail(_: httpx.Request) -> httpx.Response:
        raise error

    with pytest.raises(SourceUnavailable):
        locate(fail)


@pytest.mark.parametrize("status", [200, 500])
def test_errors_carry_neither_the_body_nor_the_key_nor_a_bssid(status: int) -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        # An upstream that echoes the request and the URL back in its error body.
        content = request.content + str(request.url).encode()
        return httpx.Response(status, content=content)

    def boom(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"failed {request.url} {request.content!r}", request=request)

    for handler in (echo, boom):
        with pytest.raises(SourceUnavailable) as raised:
            locate(handler, api_key=KEY)
        error = raised.value
        assert error.__cause__ is None
        assert error.__suppress_context__ or error.__context__ is None
        shown = str(error) + repr(error) + error.detail
        for secret in (KEY, A, B, "001122334401", "00-11-22-33-44-01"):
            assert secret not in shown


def test_the_repr_hides_url_and_key() -> None:
    geolocator = IchnaeaGeolocator(httpx.AsyncClient(), f"{URL}?key={KEY}", KEY)
    assert KEY not in repr(geolocator)
    assert "location.example" not in repr(geolocator)
