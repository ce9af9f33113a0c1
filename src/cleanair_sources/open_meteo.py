"""Open-Meteo air quality: the `AirQualitySource` port over `GET {base_url}/v1/air-quality`.

Attribution and terms
---------------------
The data are CAMS forecasts: "Contains modified Copernicus Atmosphere Monitoring Service
information" (CAMS European air quality forecasts and CAMS global atmospheric composition
forecasts), served by Open-Meteo (https://open-meteo.com). Both the CAMS data and Open-Meteo's
API output are licensed CC BY 4.0: anything we show from this source must credit CAMS and
Open-Meteo. The public endpoint (https://air-quality-api.open-meteo.com) needs no key and is for
non-commercial use only, under fair-use limits of fewer than 10,000 calls a day, 5,000 an hour
and 600 a minute. Open-Meteo counts a multi-location request as one call per location (at
least; more with many variables or a long date range), so batching saves round trips, not
quota. Commercial use needs Open-Meteo's paid API (another host, with an API key) or a
self-hosted Open-Meteo, which serves the same API: pass its address as `base_url`.

Grid snapping
-------------
Open-Meteo answers from the nearest point of a regular model grid (and reports that point's
centre as `latitude`/`longitude`). Its `domains=auto` mode reads the CAMS Europe grid where that
grid covers the point and fills gaps from CAMS global. The grids, as Open-Meteo defines them
(`CamsDomain.grid` in open-meteo/open-meteo):

- CAMS Europe: 700 x 420 cells of 0.1 degree; centres at longitudes -24.95, -24.85 .. 44.95
  and latitudes 30.05 .. 71.95, so cells cover longitude [-25, 45) and latitude (30, 72].
- CAMS global: 0.4 degree grid points at every multiple of 0.4 degree, longitudes
  -180 .. 179.6, latitudes -90 .. 90.

A point inside the Europe box (longitude -25 <= lon < 45 and latitude 30 < lat <= 72) snaps to
the centre of the 0.1 degree cell containing it (a point exactly on a cell edge goes to the
cell on its east or south side). Any other point snaps to the nearest 0.4 degree grid point;
longitude 180 is the same point as -180, so both sides of the dateline meet at -180. The
request asks for the snapped centre, so the server's own nearest-point search lands exactly on
that cell, and the cache is keyed by it: every point inside one cell shares one cache entry and
one location in a request. (A global point on latitude 30.0 or 72.0 inside the Europe box may
be answered by the adjoining Europe cell; either is a valid neighbour.)

Requests and caching
--------------------
Missing (cell, hour) pairs are fetched in requests of at most `max_locations_per_request`
cells (default 100, the most waypoints a route enrichment may have, so a whole route is one
request) with comma-separated `latitude`/`longitude` lists, `timeformat=unixtime`,
`timezone=GMT`, and `start_date`/`end_date` covering the UTC dates of the hours needed. Every
hour of the fetched dates is cached per cell until `cache_ttl` seconds after the fetch (on the
injected monotonic clock); an hour absent from the answer is cached as unknown (all None).

Deadline and circuit breaker
----------------------------
One upstream call (all its attempts and the backoffs between them) has `deadline` seconds
(on the event loop's clock, the request's own timeouts included): an upstream that accepts
connections and never answers costs a request that long, not attempts x timeout plus backoff.
A backoff that would end past the deadline is not waited. Failed calls feed a
`CircuitBreaker`: after `breaker_failures` in a row, every call fails at once (503 with
`Retry-After`) for `breaker_cooldown` seconds, then one trial call decides whether it closes.

Coordinates are personal data: nothing here logs them or a request URL above DEBUG. Note that
httpx itself logs every request URL at INFO on the "httpx" logger; whoever configures logging
should raise that logger to WARNING.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, date, datetime
from typing import Any

import attrs
import httpx

from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.air.street_level import GridCell as StreetGridCell
from cleanair_core.errors import SourceUnavailable
from cleanair_core.geo import Point
from cleanair_core.metrics import NO_METRICS, Metrics, Upstream
from cleanair_sources.circuit_breaker import BreakerState, CircuitBreaker

__all__ = [
    "DEFAULT_BASE_URL",
    "HOURLY_VARIABLES",
    "GridCell",
    "OpenMeteoSource",
    "snap",
]

DEFAULT_BASE_URL = "https://air-quality-api.open-meteo.com"
PATH = "/v1/air-quality"

#: Open-Meteo's hourly variable names, in request order, and the pollutant each one reports.
HOURLY_VARIABLES: tuple[tuple[str, Pollutant], ...] = (
    ("pm10", Pollutant.PM10),
    ("pm2_5", Pollutant.PM25),
    ("nitrogen_dioxide", Pollutant.NO2),
    ("ozone", Pollutant.O3),
    ("sulphur_dioxide", Pollutant.SO2),
)

HOUR = 3600
DAY = 86400

# Grid geometry in hundredths of a degree, so cell identity is exact integer arithmetic.
EUROPE = "cams_europe"
GLOBAL = "cams_global"
_EUROPE_WEST, _EUROPE_EAST = -2500, 4500  # cell edges; centres are 5 inside
_EUROPE_SOUTH, _EUROPE_NORTH = 3000, 7200
_EUROPE_STEP = 10
_GLOBAL_STEP = 40

_log = logging.getLogger("cleanair.sources.open_meteo")
#: How logs name this upstream.
LABEL = "Open-Meteo air quality"

_Values = tuple[float | None, ...]  # one entry per HOURLY_VARIABLES, in that order
_Key = tuple["GridCell", int]  # (cell, UTC hour as unix seconds)


@attrs.frozen
class GridCell:
    """One model grid cell, named by its centre in hundredths of a degree (`lat`/`lon`: degrees)."""

    domain: str
    lat_e2: int
    lon_e2: int

    @property
    def lat(self) -> float:
        return self.lat_e2 / 100

    @property
    def lon(self) -> float:
        return self.lon_e2 / 100


def _floor_steps(value_e2: float, step: int) -> int:
    # Round away representation error (13.4 * 100 = 1340.0000000000002) before flooring.
    return math.floor(round(value_e2 / step, 6))


def snap(point: Point) -> GridCell:
    """The CAMS grid cell Open-Meteo answers `point` from (see the module docstring)."""
    lat_e2, lon_e2 = point.lat * 100, point.lon * 100
    if _EUROPE_WEST <= lon_e2 < _EUROPE_EAST and _EUROPE_SOUTH < lat_e2 <= _EUROPE_NORTH:
        column = _floor_steps(lon_e2 - _EUROPE_WEST, _EUROPE_STEP)
        row = _floor_steps(_EUROPE_NORTH - lat_e2, _EUROPE_STEP)
        half = _EUROPE_STEP // 2
        return GridCell(
            EUROPE,
            _EUROPE_NORTH - row * _EUROPE_STEP - half,
            _EUROPE_WEST + column * _EUROPE_STEP + half,
        )
    # Nearest 0.4 degree point, halves rounded up; longitude wraps so that 180 becomes -180.
    lat_steps = _floor_steps(lat_e2 + _GLOBAL_STEP / 2, _GLOBAL_STEP)
    lon_steps = _floor_steps(lon_e2 + _GLOBAL_STEP / 2, _GLOBAL_STEP)
    lon_steps = (lon_steps + 450) % 900 - 450
    return GridCell(GLOBAL, lat_steps * _GLOBAL_STEP, lon_steps * _GLOBAL_STEP)


def _utc_hour(at: datetime) -> int:
    """Unix seconds of the start of `at`'s UTC hour; a naive datetime is taken as UTC."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return math.floor(at.timestamp() / HOUR) * HOUR


def _utc_date(unix_seconds: int) -> date:
    return datetime.fromtimestamp(unix_seconds, UTC).date()


def _as_concentrations(values: _Values) -> Concentrations:
    return {
        pollutant: value for (_, pollutant), value in zip(HOURLY_VARIABLES, values, strict=True)
    }


_UNKNOWN: _Values = (None,) * len(HOURLY_VARIABLES)


class _Malformed(Exception):
    """The body was not the documented Open-Meteo answer; carries no data (it could leak)."""


class _Unavailable(SourceUnavailable):
    """A failed call, with its `cause` for the breaker's log: a fixed phrase, never data."""

    def __init__(self, cause: str) -> None:
        super().__init__()
        self.cause = cause


class OpenMeteoSource:
    """Hourly CAMS concentrations from Open-Meteo's air-quality API, cached per grid cell."""

    update_interval: int = 3600

    def __init__(
        self,
        client: httpx.AsyncClient,
        base_url: str = DEFAULT_BASE_URL,
        *,
        deadline: float = 5.0,
        retries: int = 2,
        backoff: float = 0.5,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        cache_ttl: float = 3600.0,
        cache_size: int = 200_000,
        max_locations_per_request: int = 100,
        metrics: Metrics = NO_METRICS,
        breaker_failures: int = 3,
        breaker_cooldown: float = 30.0,
    ) -> None:
        """`metrics` hears of every HTTP request: its time (on `monotonic`) and whether it
        failed. `deadline` bounds each upstream call, retries included (module docstring)."""
        if deadline <= 0:
            raise ValueError("deadline must be > 0")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        if cache_size < 0:
            raise ValueError("cache_size must be >= 0")
        if max_locations_per_request < 1:
            raise ValueError("max_locations_per_request must be >= 1")
        self._client = client
        self._url = base_url.rstrip("/") + PATH
        self._deadline = deadline
        self._retries = retries
        self._backoff = backoff
        self._sleep = sleep
        self._monotonic = monotonic
        self._cache_ttl = cache_ttl
        self._cache_size = cache_size
        self._max_locations = max_locations_per_request
        self._metrics = metrics
        # (cell, hour) -> (expires at, values); least recently used first.
        self._cache: OrderedDict[_Key, tuple[float, _Values]] = OrderedDict()
        self.breaker = CircuitBreaker(
            Upstream.OPEN_METEO,
            LABEL,
            failures=breaker_failures,
            cooldown=breaker_cooldown,
            monotonic=monotonic,
        )

    @property
    def upstream(self) -> Upstream:
        return Upstream.OPEN_METEO

    def state(self) -> BreakerState:
        """The breaker's state, for the readiness probe."""
        return self.breaker.state

    def cell_of(self, lat: float, lon: float) -> StreetGridCell:
        """The area of the CAMS cell a point's value comes from (see `snap`): the street-level
        downscaling subtracts the mean traffic increment over it."""
        cell = snap(Point(lat, lon))
        half = (_EUROPE_STEP if cell.domain == EUROPE else _GLOBAL_STEP) / 200
        return StreetGridCell(cell.lat - half, cell.lon - half, cell.lat + half, cell.lon + half)

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        """One `Concentrations` per sample, in order; the value of the sample's UTC hour."""
        keys = [(snap(sample.point), _utc_hour(sample.at)) for sample in samples]
        found: dict[_Key, _Values] = {}
        wanted: dict[GridCell, set[int]] = {}  # insertion order = first appearance
        for key in keys:
            if key in found:
                continue
            cached = self._cached(key)
            if cached is not None:
                found[key] = cached
            else:
                wanted.setdefault(key[0], set()).add(key[1])

        cells = list(wanted)
        for start in range(0, len(cells), self._max_locations):
            chunk = cells[start : start + self._max_locations]
            hours = [hour for cell in chunk for hour in wanted[cell]]
            fetched = await self._fetch(chunk, _utc_date(min(hours)), _utc_date(max(hours)))
            found.update(fetched)
            self._store(fetched)

        return [_as_concentrations(found.get(key, _UNKNOWN)) for key in keys]

    def answers_at_once(self, samples: Sequence[Sample]) -> bool:
        """See `CachingAir`: every sample's cell and hour is cached and not expired."""
        return bool(samples) and all(
            self._cached((snap(sample.point), _utc_hour(sample.at))) is not None
            for sample in samples
        )

    async def aclose(self) -> None:
        """Close the HTTP client this source was given."""
        await self._client.aclose()

    # cache --------------------------------------------------------------------------------
    def _cached(self, key: _Key) -> _Values | None:
        entry = self._cache.get(key)
        if entry is None:
            return None
        expires, values = entry
        if self._monotonic() >= expires:
            del self._cache[key]
            return None
        self._cache.move_to_end(key)
        return values

    def _store(self, fetched: dict[_Key, _Values]) -> None:
        if self._cache_size == 0:
            return
        expires = self._monotonic() + self._cache_ttl
        for key, values in fetched.items():
            self._cache[key] = (expires, values)
            self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    # HTTP ---------------------------------------------------------------------------------
    async def _fetch(self, cells: list[GridCell], first: date, last: date) -> dict[_Key, _Values]:
        """Every hour of `first`..`last` (UTC dates) for each cell, None where unanswered."""
        params = {
            "latitude": ",".join(repr(cell.lat) for cell in cells),
            "longitude": ",".join(repr(cell.lon) for cell in cells),
            "hourly": ",".join(name for name, _ in HOURLY_VARIABLES),
            "timeformat": "unixtime",
            "timezone": "GMT",
            "start_date": first.isoformat(),
            "end_date": last.isoformat(),
            "domains": "auto",
        }
        with self.breaker.call():
            payload, seconds = await self._get(params)
            try:
                answers = _parse(payload, len(cells))
            except _Malformed as exc:
                _warn("unexpected response shape (%s)", "malformed answer", exc)
                self._metrics.upstream_request(Upstream.OPEN_METEO, seconds, failed=True)
                raise _Unavailable("malformed answer") from None
            self._metrics.upstream_request(Upstream.OPEN_METEO, seconds, failed=False)

        range_start = int(datetime(first.year, first.month, first.day, tzinfo=UTC).timestamp())
        range_end = range_start + ((last - first).days + 1) * DAY
        fetched: dict[_Key, _Values] = {}
        for cell, by_hour in zip(cells, answers, strict=True):
            for hour in range(range_start, range_end, HOUR):
                fetched[cell, hour] = by_hour.get(hour, _UNKNOWN)
        return fetched

    async def _get(self, params: dict[str, str]) -> tuple[Any, float]:
        """The JSON answer and the seconds its request took, within the deadline. Every
        failed attempt is told to the metrics here; the caller tells of the answered one
        once it has read it."""
        attempts = 1 + self._retries
        loop = asyncio.get_running_loop()
        # The loop's clock, not the injected one: the deadline cancels real waits.
        ends = loop.time() + self._deadline
        cause = "no attempt"
        made = 0
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                delay = self._backoff * 2 ** (attempt - 2)
                if loop.time() + delay >= ends:
                    break
                await self._sleep(delay)
            left = ends - loop.time()
            if left <= 0:
                break
            started = self._monotonic()
            made = attempt
            try:
                async with asyncio.timeout(left):
                    response = await self._client.get(
                        self._url, params=params, timeout=httpx.Timeout(left)
                    )
            except (TimeoutError, httpx.TransportError) as exc:  # every httpx timeout too
                self._failed(started)
                cause = "deadline passed" if isinstance(exc, TimeoutError) else type(exc).__name__
                _warn("%s (attempt %d of %d)", cause, cause, attempt, attempts)
                continue
            except httpx.HTTPError as exc:
                self._failed(started)
                cause = type(exc).__name__
                _warn("%s, not retried", cause, cause)
                raise _Unavailable(cause) from None

            status = response.status_code
            if status != 200:
                self._failed(started)
                cause = f"HTTP {status}"
            if status == 429 or status >= 500:
                _warn("HTTP %d (attempt %d of %d)", cause, status, attempt, attempts)
                continue
            if status != 200:
                # The reason may quote the request's coordinates, so only DEBUG sees it.
                _warn("HTTP %d, not retried", cause, status)
                _log.debug("Open-Meteo air quality error body: %s", response.text[:500])
                raise _Unavailable(cause)
            try:
                return response.json(), self._monotonic() - started
            except ValueError:
                self._failed(started)
                _warn("response is not JSON", "not JSON")
                raise _Unavailable("not JSON") from None

        _warn(
            "giving up after %d attempts within the %g s deadline (%s)",
            cause,
            made,
            self._deadline,
            cause,
        )
        raise _Unavailable(cause)

    def _failed(self, started: float) -> None:
        self._metrics.upstream_request(
            Upstream.OPEN_METEO, self._monotonic() - started, failed=True
        )


def _warn(message: str, cause: str, *args: object) -> None:
    """A warning naming the upstream and the cause, in the text and as fields."""
    _log.warning(
        f"{LABEL}: {message}", *args, extra={"upstream": Upstream.OPEN_METEO.value, "cause": cause}
    )


# Parsing ----------------------------------------------------------------------------------
def _parse(payload: Any, locations: int) -> list[dict[int, _Values]]:
    """Per location, in request order: UTC hour (unix seconds) -> values."""
    if isinstance(payload, dict) and locations == 1:
        objects: list[Any] = [payload]
    elif isinstance(payload, list):
        objects = payload
    else:
        raise _Malformed(f"top level is {type(payload).__name__}")
    if len(objects) != locations:
        raise _Malformed(f"{len(objects)} locations answered, {locations} asked")
    return [_parse_location(obj, index) for index, obj in enumerate(objects)]


def _parse_location(obj: Any, index: int) -> dict[int, _Values]:
    if not isinstance(obj, dict):
        raise _Malformed(f"location {index} is {type(obj).__name__}")
    if obj.get("error") is True:
        raise _Malformed(f"location {index} is an error object")
    # The server writes location_id (its 0-based position) only when it is not 0.
    location_id = obj.get("location_id", index)
    if location_id != index:
        raise _Malformed(f"location {index} says it is location {location_id}")
    hourly = obj.get("hourly")
    if not isinstance(hourly, dict):
        raise _Malformed(f"location {index} has no hourly object")
    times = hourly.get("time")
    if not isinstance(times, list) or not all(_is_int(t) for t in times):
        raise _Malformed(f"location {index}: hourly.time is not a list of unix seconds")
    columns = [_column(hourly.get(name), len(times), index, name) for name, _ in HOURLY_VARIABLES]
    return {int(t): tuple(column[row] for column in columns) for row, t in enumerate(times)}


def _column(raw: Any, length: int, index: int, name: str) -> list[float | None]:
    if raw is None:  # variable not served (e.g. by a trimmed self-hosted instance): unknown
        return [None] * length
    if not isinstance(raw, list) or len(raw) != length:
        raise _Malformed(f"location {index}: hourly.{name} does not match hourly.time")
    return [_value(v, index, name) for v in raw]


def _value(raw: Any, index: int, name: str) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise _Malformed(f"location {index}: hourly.{name} holds a {type(raw).__name__}")
    value = float(raw)
    return value if math.isfinite(value) else None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
