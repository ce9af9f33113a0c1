"""OpenAQ v3: a live source of station observations, and the poller that stores them.

What is asked, and what it answers
----------------------------------
The API as documented at https://docs.openaq.org (checked for this module: "Quick start",
"API Key", "Geospatial queries", "Latest", the operation `GET /v3/locations/{id}/latest`,
"Dates, times and timezones" and "Rate limits"):

- Every request carries the key in the `X-API-Key` header.
- `GET {base}/locations?bbox=minlon,minlat,maxlon,maxlat&limit=1000&page=N` lists the
  locations in a box: `{"meta": {"page", "limit", "found", ...}, "results": [{"id", "name",
  "coordinates": {"latitude", "longitude"}, "sensors": [{"id", "name", "parameter": {"id",
  "name", "units", "displayName"}}], "datetimeLast": {"utc", "local"}, ...}]}`. `found` may be
  a number or a string such as ">1000", so paging stops on a short page, not on `found`.
- `GET {base}/locations/{id}/latest` answers each sensor's latest value: `{"results":
  [{"datetime": {"utc", "local"}, "value", "coordinates", "sensorsId", "locationsId"}]}`.
- OpenAQ's datetimes end their period ("a time stamp for an hourly measurement 03:00
  represents the data from 02:00 until 02:59"), which is what `Observation.hour_end` means.
- Over the key's limit (60 a minute, 2,000 an hour for general use) the answer is 429; every
  answer carries `x-ratelimit-remaining` and `x-ratelimit-reset`. The docs call the latter a
  timestamp while their example and OpenAQ's Python SDK show seconds until the reset (58):
  both readings are accepted (`_reset_seconds`).

Only pm25, pm10, no2 and o3 sensors are kept (`OBSERVED`), in µg/m³ or in ppm/ppb, which are
converted at 25 °C and 1 atm (µg/m³ = ppb * M / 24.45; M = 46.0055 g/mol for NO2, 47.9982 for
O3). A latest value counts only when it ends on the hour and is at most `max_age` old; any
entry that is malformed or of another parameter or unit is skipped and counted, never fatal.
The values kept then pass the intake screening every import passes
(`cleanair_core.air.screening`): one over its pollutant's upper bound or ending after now is
held back, counted and logged, never stored.

Licence: OpenAQ aggregates data from many providers and the data carry their providers'
licences; OpenAQ's terms require attributing the source (see docs/deployment.md).

Nothing here logs the key, a request's headers or a URL with its query.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import httpx

from cleanair_core.air.observations import (
    Observation,
    ObservationStore,
    ObservationsWritten,
    Station,
)
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.screening import HeldBack, HeldBackCounts, screen_observations
from cleanair_core.air.units import MOLAR_MASS, MOLAR_VOLUME_25C
from cleanair_core.clock import Clock, SystemClock
from cleanair_core.errors import StoreUnavailable
from cleanair_core.geo import Point
from cleanair_core.metrics import NO_METRICS, Metrics, Upstream
from cleanair_core.offload import Offload

__all__ = [
    "DEFAULT_BASE_URL",
    "Box",
    "Location",
    "OpenAQClient",
    "OpenAQError",
    "OpenAQPoller",
    "PollResult",
    "RateLimitSpent",
    "Skipped",
]

DEFAULT_BASE_URL = "https://api.openaq.org/v3"
#: (south, west, north, east) in degrees.
Box = tuple[float, float, float, float]
PAGE_LIMIT = 1000
#: A box with more locations than this is a configuration mistake, not a city.
MAX_PAGES = 20
STATION_PREFIX = "openaq:"

#: OpenAQ's parameter names and the pollutants they are.
PARAMETERS: dict[str, Pollutant] = {
    "pm25": Pollutant.PM25,
    "pm10": Pollutant.PM10,
    "no2": Pollutant.NO2,
    "o3": Pollutant.O3,
}

_log = logging.getLogger("cleanair.sources.openaq")


class OpenAQError(Exception):
    """A request gave no usable answer. `cause` is safe to log (never the key, a URL or the
    body); `retry_after` is the seconds the API asked to wait (429, or the limit spent)."""

    def __init__(self, cause: str, retry_after: float | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.retry_after = retry_after


class RateLimitSpent(OpenAQError):
    """No request was sent: the key's requests are spent until `retry_after` seconds on."""


@attrs.define
class Skipped:
    """Entries of the answers that were left out, by why."""

    malformed: int = 0
    unknown_parameter: int = 0
    unknown_unit: int = 0
    off_hour: int = 0
    too_old: int = 0

    @property
    def total(self) -> int:
        return (
            self.malformed
            + self.unknown_parameter
            + self.unknown_unit
            + self.off_hour
            + self.too_old
        )


@attrs.frozen
class Sensor:
    """A kept sensor: the pollutant it measures and the factor to µg/m³."""

    pollutant: Pollutant
    to_ugm3: float


@attrs.frozen
class Location:
    """An OpenAQ location with the sensors kept of it; `last` is when it last reported."""

    id: int
    station: Station
    sensors: dict[int, Sensor]
    last: datetime | None = None


def _unit_factor(pollutant: Pollutant, units: str) -> float | None:
    """The factor from `units` to µg/m³, or None for a unit this module does not convert."""
    # OpenAQ writes µg/m³ with the micro sign; be lenient about its look-alikes.
    unit = units.strip().lower().replace("μ", "u").replace("µ", "u").replace("³", "3")
    if unit in {"ug/m3", "ugm-3"}:
        return 1.0
    mass = MOLAR_MASS.get(pollutant)
    if mass is None:
        return None
    if unit == "ppb":
        return mass / MOLAR_VOLUME_25C
    if unit == "ppm":
        return 1000.0 * mass / MOLAR_VOLUME_25C
    return None


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _instant(value: Any) -> datetime | None:
    """An aware UTC datetime from `{"utc": "...Z"}`, or None."""
    if not isinstance(value, dict) or not isinstance(value.get("utc"), str):
        return None
    try:
        parsed = datetime.fromisoformat(value["utc"].replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(UTC)


def parse_location(raw: Any, skipped: Skipped) -> Location | None:
    """A location with at least one kept sensor, or None (counted in `skipped` when it was
    malformed; a location with no sensor of ours is simply of no use)."""
    if not isinstance(raw, dict):
        skipped.malformed += 1
        return None
    location_id = _whole(raw.get("id"))
    coordinates = raw.get("coordinates")
    sensors = raw.get("sensors")
    if location_id is None or not isinstance(coordinates, dict) or not isinstance(sensors, list):
        skipped.malformed += 1
        return None
    lat, lon = _number(coordinates.get("latitude")), _number(coordinates.get("longitude"))
    try:
        point = Point(lat, lon) if lat is not None and lon is not None else None
    except ValueError:
        point = None
    if point is None:
        skipped.malformed += 1
        return None
    kept: dict[int, Sensor] = {}
    for sensor in sensors:
        parameter = sensor.get("parameter") if isinstance(sensor, dict) else None
        sensor_id = _whole(sensor.get("id")) if isinstance(sensor, dict) else None
        if sensor_id is None or not isinstance(parameter, dict):
            skipped.malformed += 1
            continue
        pollutant = PARAMETERS.get(str(parameter.get("name", "")).lower())
        if pollutant is None:
            skipped.unknown_parameter += 1
            continue
        units = parameter.get("units")
        factor = _unit_factor(pollutant, units) if isinstance(units, str) else None
        if factor is None:
            skipped.unknown_unit += 1
            continue
        kept[sensor_id] = Sensor(pollutant, factor)
    if not kept:
        return None
    name = raw.get("name")
    station = Station(
        f"{STATION_PREFIX}{location_id}",
        name.strip() if isinstance(name, str) and name.strip() else f"OpenAQ {location_id}",
        point,
    )
    return Location(location_id, station, kept, _instant(raw.get("datetimeLast")))


def parse_latest(
    raw: Any, location: Location, now: datetime, max_age: timedelta, skipped: Skipped
) -> list[Observation]:
    """The hourly observations of one `latest` answer's results: on the hour, at most
    `max_age` old, of a kept sensor of `location`. One ending after `now` is left in, for the
    intake screening to hold back and count as such (`screen_observations`)."""
    observations: list[Observation] = []
    for entry in raw:
        if not isinstance(entry, dict):
            skipped.malformed += 1
            continue
        sensor_id = _whole(entry.get("sensorsId"))
        hour_end = _instant(entry.get("datetime"))
        value = _number(entry.get("value"))
        if sensor_id is None or hour_end is None or value is None or value < 0:
            skipped.malformed += 1
            continue
        sensor = location.sensors.get(sensor_id)
        if sensor is None:  # another parameter's, counted when the location was listed
            continue
        if hour_end.minute or hour_end.second or hour_end.microsecond:
            skipped.off_hour += 1
            continue
        if hour_end < now - max_age:
            skipped.too_old += 1
            continue
        observations.append(
            Observation(location.station.id, sensor.pollutant, hour_end, value * sensor.to_ugm3)
        )
    return observations


def _results(payload: Any) -> list[Any]:
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise OpenAQError("unexpected response shape")
    results: list[Any] = payload["results"]
    return results


class OpenAQClient:
    """The two OpenAQ v3 requests the poller makes, over an `httpx.AsyncClient`.

    Each request is told to `metrics` (upstream `openaq`): its time on `monotonic` and whether
    it failed. Once an answer says the key's requests are spent (`x-ratelimit-remaining: 0`),
    no request is sent until its reset: `OpenAQError` with `retry_after` instead.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        *,
        timeout: float = 10.0,
        metrics: Metrics = NO_METRICS,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        page_limit: int = PAGE_LIMIT,
    ) -> None:
        """`page_limit` is the locations asked per page (the API's maximum, 1000, by default)."""
        self._client = client
        self._page_limit = page_limit
        self._headers = {"X-API-Key": api_key, "Accept": "application/json"}
        self._base = base_url.rstrip("/")
        self._timeout = httpx.Timeout(timeout)
        self._metrics = metrics
        self._monotonic = monotonic
        self._wall = wall
        #: While the limit is spent: the monotonic time it resets at.
        self._spent_until: float | None = None

    def __repr__(self) -> str:  # the default would be harmless, but say so: no key here
        return f"OpenAQClient({self._base!r})"

    async def locations(self, box: Box, skipped: Skipped) -> list[Location]:
        """Every location with a kept sensor in `box`, page after page."""
        south, west, north, east = box
        bbox = ",".join(repr(round(v, 6)) for v in (west, south, east, north))
        found: list[Location] = []
        for page in range(1, MAX_PAGES + 1):
            params = {"bbox": bbox, "limit": str(self._page_limit), "page": str(page)}
            results = _results(await self._get("/locations", params))
            for raw in results:
                location = parse_location(raw, skipped)
                if location is not None:
                    found.append(location)
            if len(results) < self._page_limit:
                return found
        _log.warning(
            "OpenAQ: a box holds more than %d locations; the rest are left out",
            MAX_PAGES * self._page_limit,
        )
        return found

    async def latest(self, location_id: int) -> list[Any]:
        """The raw results of one location's latest values."""
        return _results(
            await self._get(f"/locations/{location_id}/latest", {"limit": str(PAGE_LIMIT)})
        )

    def rate_limit_wait(self) -> float | None:
        """Seconds until the key's spent requests reset, or None when some are left."""
        if self._spent_until is None:
            return None
        left = self._spent_until - self._monotonic()
        return left if left > 0 else None

    async def aclose(self) -> None:
        """Close the HTTP client this client was given."""
        await self._client.aclose()

    async def _get(self, path: str, params: dict[str, str]) -> Any:
        left = self.rate_limit_wait()
        if left is not None:
            raise RateLimitSpent("rate limit spent", retry_after=left)
        self._spent_until = None
        started = self._monotonic()
        try:
            response = await self._client.get(
                self._base + path, params=params, headers=self._headers, timeout=self._timeout
            )
        except httpx.TimeoutException:
            self._failed(started)
            raise OpenAQError("timeout") from None
        except httpx.HTTPError as exc:  # the exception's text may hold the URL: type only
            self._failed(started)
            raise OpenAQError(type(exc).__name__) from None
        reset = self._reset_seconds(response.headers)
        if response.headers.get("x-ratelimit-remaining", "").strip() == "0" and reset:
            self._spent_until = self._monotonic() + reset
        if response.status_code == 429:
            self._failed(started)
            retry = _retry_after(response.headers)
            raise OpenAQError("HTTP 429", retry_after=retry if retry is not None else reset)
        if response.status_code != 200:
            self._failed(started)
            raise OpenAQError(f"HTTP {response.status_code}")
        try:
            payload = response.json()
        except ValueError:
            self._failed(started)
            raise OpenAQError("response is not JSON") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
            self._failed(started)
            raise OpenAQError("unexpected response shape")
        self._metrics.upstream_request(Upstream.OPENAQ, self._monotonic() - started, failed=False)
        return payload

    def _failed(self, started: float) -> None:
        self._metrics.upstream_request(Upstream.OPENAQ, self._monotonic() - started, failed=True)

    def _reset_seconds(self, headers: httpx.Headers) -> float | None:
        return _reset_seconds(headers.get("x-ratelimit-reset"), self._wall())


def _reset_seconds(raw: str | None, wall: float) -> float | None:
    """Seconds until the limit resets: the header holds seconds, or (as the docs' table says)
    a unix timestamp, told apart by size."""
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    if not math.isfinite(value) or value < 0:
        return None
    if value > 1e9:  # a timestamp (2001 onwards), not a wait of 31 years
        value -= wall
    return max(value, 0.0)


def _retry_after(headers: httpx.Headers) -> float | None:
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


@attrs.frozen
class PollResult:
    """What one poll did: stations and observations stored, entries skipped, the failure
    (a loggable cause) if any, the seconds until the next poll, and the observations the
    intake screening held back."""

    stations: int
    written: ObservationsWritten
    skipped: Skipped
    next_in: float
    failure: str | None = None
    held_back: HeldBackCounts = attrs.Factory(HeldBackCounts)


class OpenAQPoller:
    """Polls OpenAQ for the latest hourly values in `boxes` and stores them.

    `poll_once` is one round and never raises: it says what it stored and how long to wait;
    `run` repeats it, awaiting the injected `sleep`. The locations (the stations) are listed
    again every `locations_every` seconds, their latest values every `interval`. A failed
    round waits `backoff` seconds, doubled with each failure in a row up to `max_backoff`,
    jittered down by up to half, and never less than a rate limit's reset (a 429); a round
    the spent limit paused is no failure and goes on when it resets. Store writes go through
    `offload` (a worker thread in the service), never on the event loop.
    """

    def __init__(
        self,
        client: OpenAQClient,
        store: ObservationStore,
        boxes: Sequence[Box],
        offload: Offload,
        *,
        interval: float = 900.0,
        locations_every: float = 86400.0,
        backoff: float = 60.0,
        max_backoff: float = 3600.0,
        max_age: timedelta = timedelta(hours=3),
        stale_location: timedelta = timedelta(days=2),
        clock: Clock | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
        metrics: Metrics = NO_METRICS,
    ) -> None:
        self._client = client
        self._store = store
        self._boxes = list(boxes)
        self._offload = offload
        self._interval = interval
        self._locations_every = locations_every
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._max_age = max_age
        self._stale_location = stale_location
        self._clock = clock or SystemClock()
        self._monotonic = monotonic
        self._jitter = jitter
        self._metrics = metrics
        self._locations: list[Location] | None = None
        self._listed_at = 0.0
        #: The locations of the current round not yet asked (a round the limit paused).
        self._pending: list[Location] = []
        self.failures = 0

    async def poll_once(self) -> PollResult:
        """One round: list the locations if due, fetch and store their latest values.

        A round that spends the key's requests stops there, stores what it has and resumes
        with the locations not yet asked once the limit resets: an area with more stations
        than a minute's requests is polled in several steps, not its first ones only."""
        skipped = Skipped()
        stations = 0
        written = ObservationsWritten()
        held = HeldBackCounts()
        failure: OpenAQError | None = None
        paused: float | None = None
        try:
            if self._locations is None or (
                self._monotonic() - self._listed_at >= self._locations_every
            ):
                locations = await self._list(skipped)
                listed = [location.station for location in locations]
                stations = await self._offload(lambda: self._store.put_stations(listed))
                self._locations, self._listed_at = locations, self._monotonic()
                self._pending = []
            if not self._pending:
                self._pending = self._due(self._locations)
            observations: list[Observation] = []
            try:
                while self._pending:
                    raw = await self._client.latest(self._pending[0].id)
                    observations += parse_latest(
                        raw, self._pending[0], self._clock.now(), self._max_age, skipped
                    )
                    self._pending.pop(0)
            except RateLimitSpent as exc:
                paused = exc.retry_after
            except OpenAQError as exc:  # keep what came before it: those are good values
                failure = exc
                # Unless told to wait (a 429), the location that failed is not asked again this
                # round: one that always fails (gone, or broken upstream) must not keep every
                # other one from being polled.
                del self._pending[: 0 if exc.retry_after is not None else 1]
            kept, held = screen_observations(observations, self._clock.now())
            self._held_back(held)
            if kept:
                written = await self._offload(lambda: self._store.put_observations(kept))
                self._metrics.observations_stored(Upstream.OPENAQ, written.added + written.replaced)
        except RateLimitSpent as exc:  # while listing: the listing starts again after it
            paused = exc.retry_after
        except OpenAQError as exc:
            failure = exc
        except Exception as exc:  # the store, or a bug: the service goes on without
            failure = OpenAQError(_store_cause(exc))
        if skipped.total:  # every round has some (a temperature sensor, an old value)
            _log.debug(
                "OpenAQ: entries skipped",
                extra={"upstream": Upstream.OPENAQ.value, **attrs.asdict(skipped)},
            )
        if failure is not None:
            wait = self._failed(failure)
            return PollResult(stations, written, skipped, wait, failure.cause, held)
        if paused is not None:  # not a failure: the limit is as documented, and it resets
            return PollResult(stations, written, skipped, paused, held_back=held)
        return PollResult(stations, written, skipped, self._succeeded(), held_back=held)

    async def run(self, sleep: Callable[[float], Awaitable[object]]) -> None:
        """Poll until cancelled, awaiting `sleep(seconds)` between rounds."""
        while True:
            result = await self.poll_once()
            await sleep(result.next_in)

    async def _list(self, skipped: Skipped) -> list[Location]:
        by_id: dict[int, Location] = {}
        for box in self._boxes:
            for location in await self._client.locations(box, skipped):
                by_id.setdefault(location.id, location)  # boxes may overlap
        return list(by_id.values())

    def _held_back(self, held: HeldBackCounts) -> None:
        """Tell the operator of values a station reported that the screening kept out: a
        warning, as a sensor or the upstream is at fault, with the counts only."""
        if not held.total:
            return
        for reason in HeldBack:
            if held.count(reason):
                self._metrics.observations_held_back(Upstream.OPENAQ, reason, held.count(reason))
        _log.warning(
            "OpenAQ: held back %d observations (over the pollutant's upper bound: %d, hour in "
            "the future: %d); they are not stored",
            held.total,
            held.over_bound,
            held.future,
            extra={
                "upstream": Upstream.OPENAQ.value,
                "over_bound": held.over_bound,
                "future": held.future,
            },
        )

    def _due(self, locations: Iterable[Location]) -> list[Location]:
        """The locations worth a request: those that reported lately (or do not say)."""
        oldest = self._clock.now() - self._stale_location
        return [loc for loc in locations if loc.last is None or loc.last >= oldest]

    def _succeeded(self) -> float:
        if self.failures:
            _log.info(
                "OpenAQ polling recovered",
                extra={"upstream": Upstream.OPENAQ.value, "failed_polls": self.failures},
            )
        self.failures = 0
        wait = self._interval
        spent = self._client.rate_limit_wait()
        if spent is not None:  # the round spent the key's requests: not before their reset
            wait = max(wait, spent)
        return wait

    def _failed(self, error: OpenAQError) -> float:
        self.failures += 1
        doubled = self._backoff * 2.0 ** min(self.failures - 1, 30)
        capped = min(self._max_backoff, doubled)
        wait = capped * (1.0 - 0.5 * self._jitter())  # spread processes that failed together
        if error.retry_after is not None:
            wait = max(wait, error.retry_after)
        _log.warning(
            "OpenAQ poll failed: %s; the service goes on without new observations",
            error.cause,
            extra={
                "upstream": Upstream.OPENAQ.value,
                "cause": error.cause,
                "failed_polls": self.failures,
                "retry_in_seconds": round(wait, 1),
            },
        )
        return wait


def _store_cause(exc: Exception) -> str:
    if isinstance(exc, StoreUnavailable):
        return "the database is unavailable"
    return f"could not store the observations ({type(exc).__name__})"
