"""Air use cases: the score of a point now (contract 4.2) and a day's forecast (4.3); the
operator's access points and station observations."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime

from cleanair_core.access.connections import Authorized
from cleanair_core.access.scopes import Scope
from cleanair_core.air import fusion_evaluation, wifi_location
from cleanair_core.air.activities import ActivityType
from cleanair_core.air.conditions import Conditions, conditions_at
from cleanair_core.air.exposure import EnvironmentType
from cleanair_core.air.forecast import Forecast, forecast_hours
from cleanair_core.air.forecast_window import check_in_window, local_day_hours, parse_timezone
from cleanair_core.air.fusion_evaluation import PollutantEvaluation
from cleanair_core.air.indexes.registry import INDEX_CODES, indexes_for
from cleanair_core.air.observations import (
    OBSERVED,
    Observation,
    ObservationsWritten,
    Station,
    StationSummary,
)
from cleanair_core.air.places import Place
from cleanair_core.air.point_score import PointScore, resolve_point, score_at, score_sample
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.retention import retention_cutoff
from cleanair_core.air.screening import HeldBack, HeldBackCounts, ObservationImport, held_back
from cleanair_core.air.wifi import WifiAccessPoint
from cleanair_core.air.wifi_location import IMPORT_BATCH_SIZE, PROGRESS_EVERY_ROWS, ImportReport
from cleanair_core.credits.ledger import Billable
from cleanair_core.errors import LocationUnresolved, Unprocessable, Violation
from cleanair_core.geo import Point
from cleanair_core.ports import Sources
from cleanair_core.use_cases.context import Context, needs_upstream
from cleanair_core.use_cases.credits import PendingHit, charged


async def score(
    ctx: Context,
    proof: Authorized,
    *,
    point: Point | None = None,
    wifi: Sequence[WifiAccessPoint] = (),
    client: str | None = None,
    pending: PendingHit | None = None,
) -> PointScore:
    """The Clean Air Score at a point, or at the place a Wi-Fi scan resolves to (1 credit).

    Coordinates win over the scan (no lookup is made). Raises Unprocessable (not charged)
    when neither is given, LocationUnresolved (refunded) when the scan cannot be resolved
    and SourceUnavailable (refunded) without data. `pending` is the request's rate-limit hit
    when its admission left it to the charge.
    """
    caller = proof.caller_for(Scope.AQ_READ)
    if point is None and not wifi:
        raise Unprocessable()  # at least one location source is a rule of the request
    sources = ctx.require_sources()
    now = ctx.now()
    # With coordinates the air asked for is known now: a remote source that holds it already
    # answers at once, and the call is charged once answered, as on local air. Local air
    # never waits, whatever is asked (`needs_upstream`): no sample is made for it.
    asked = (
        (score_sample(sources.air_quality, point, now),)
        if point is not None and not sources.local_air
        else ()
    )
    upstream = needs_upstream(sources, wifi_lookup=point is None, samples=asked)
    async with charged(
        ctx, caller, Billable.SCORE, upstream=upstream, client=client, pending=pending
    ):
        located = await resolve_point(point, wifi, sources.wifi)
        return await score_at(sources.air_quality, located, now)


async def conditions(
    ctx: Context,
    proof: Authorized,
    *,
    point: Point | None = None,
    wifi: Sequence[WifiAccessPoint] = (),
    client: str | None = None,
    indexes: Sequence[str] | None = None,
    pending: PendingHit | None = None,
) -> Conditions:
    """A point's conditions now (the extension API; 1 credit, the score's scope): the score,
    the concentrations, the official indexes asked for (default: the point's country's,
    else all) and the provenance. Located as a score is; an unknown index code is
    Unprocessable (not charged)."""
    caller = proof.caller_for(Scope.AQ_READ)
    if point is None and not wifi:
        raise Unprocessable(violations=[_NO_LOCATION])
    if indexes is not None:
        check_index_codes(indexes)
    sources = ctx.require_sources()
    upstream = needs_upstream(sources, wifi_lookup=point is None)
    async with charged(
        ctx, caller, Billable.CONDITIONS, upstream=upstream, client=client, pending=pending
    ):
        located = await resolve_point(point, wifi, sources.wifi)
        places = sources.places
        # The first lookup reads the place data (half a second): never on the event loop.
        country = None if places is None else await ctx.offload(lambda: places.country_of(located))
        chosen = indexes_for(country, indexes)
        return await conditions_at(
            sources.air_quality, located, ctx.now(), chosen, sources.background
        )


_NO_LOCATION = Violation("lat", "required", "lat and lon, or a Wi-Fi scan, are required")


def check_index_codes(indexes: Sequence[str]) -> None:
    """Unprocessable unless `indexes` names 1 or more known index codes, each once."""
    allowed = ", ".join(INDEX_CODES)
    violations = [
        Violation(f"indexes.{i}", "enum", f"must be one of {allowed}")
        for i, code in enumerate(indexes)
        if code not in INDEX_CODES
    ]
    if not indexes:
        violations.append(Violation("indexes", "too_short", "must have at least 1 item"))
    if len(set(indexes)) != len(indexes):
        # Asking twice would compute and bill nothing more; it is a client's mistake.
        violations.append(Violation("indexes", "unique", "must not name a code twice"))
    if violations:
        raise Unprocessable(violations=violations)


async def forecast(
    ctx: Context,
    proof: Authorized,
    *,
    day: date,
    timezone: str,
    point: Point | None = None,
    activity: ActivityType = ActivityType.OTHER,
    environment: EnvironmentType = EnvironmentType.OUTDOOR,
    client_address: str | None = None,
    pending: PendingHit | None = None,
) -> Forecast:
    """Hourly scores and concentrations for the local `day` in `timezone` (2 credits).

    Without a point the caller's address gives an approximate one. Raises Unprocessable for
    an unknown timezone, OutsideForecastWindow outside today .. today + 3 there, and
    LocationUnresolved without a location; none of them is charged.
    """
    caller = proof.caller_for(Scope.AQ_READ)
    zone = parse_timezone(timezone)
    check_in_window(day, zone, ctx.now())
    sources = ctx.require_sources()
    place = forecast_place(sources, point, client_address)
    upstream = needs_upstream(sources)
    async with charged(ctx, caller, Billable.FORECAST, upstream=upstream, pending=pending):
        return await forecast_hours(
            sources.air_quality,
            place.point,
            place.name,
            local_day_hours(day, zone),
            activity,
            environment,
        )


def forecast_place(sources: Sources, point: Point | None, client_address: str | None) -> Place:
    """The named point of a forecast: the given one, else the caller's address's country."""
    if point is not None:
        if sources.places is not None:
            return Place(sources.places.name_of(point), point)
        return Place(f"{point.lat:.4f}, {point.lon:.4f}", point)
    place = None
    if client_address is not None and sources.ip is not None:
        place = sources.ip.locate(client_address)
    if place is None:
        raise LocationUnresolved()
    return place


def import_access_points(
    ctx: Context,
    lines: Iterable[str],
    *,
    report: ImportReport | None = None,
    batch_size: int = IMPORT_BATCH_SIZE,
    on_progress: Callable[[ImportReport], None] | None = None,
    progress_every: int = PROGRESS_EVERY_ROWS,
) -> ImportReport:
    """Import the operator's access points from CSV text, stored under the server key's
    hash of each BSSID (`cleanair_core.air.wifi_location.import_access_points`)."""
    return wifi_location.import_access_points(
        ctx.store,
        ctx.keys,
        lines,
        report=report,
        batch_size=batch_size,
        on_progress=on_progress,
        progress_every=progress_every,
    )


#: Observations written per `put_observations` call of an import: its one transaction is
#: written a chunk at a time, so memory stays flat and progress shows, all or nothing still.
OBSERVATION_CHUNK = 5_000


def import_observations(
    ctx: Context,
    parsed: Iterable[Station | Observation],
    *,
    chunk_size: int = OBSERVATION_CHUNK,
    on_chunk: Callable[[int, ObservationsWritten], None] | None = None,
) -> ObservationImport:
    """Store stations and their observations as one unit of work: the stations given, what
    writing the observations did, and the observations held back by the intake screening
    (over their pollutant's upper bound, or ending after now: `cleanair_core.air.screening`),
    which are counted and not stored. Each station must come before its observations (as
    `cleanair_sources.openaq_archive` yields them). Anything raised while `parsed` is read
    (a file truncated half way, say) or written undoes the whole import. `on_chunk` hears
    the running totals after each chunk written."""
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    now = ctx.now()
    stations: list[Station] = []
    chunk: list[Observation] = []
    station_count, written = 0, ObservationsWritten()
    over_bound = future = 0
    with ctx.store.transaction() as tx:

        def flush() -> None:
            nonlocal station_count, written
            if stations:  # before the observations naming them
                station_count += tx.put_stations(stations)
                stations.clear()
            if chunk:
                written += tx.put_observations(chunk)
                chunk.clear()
            if on_chunk is not None:
                on_chunk(station_count, written)

        for item in parsed:
            if isinstance(item, Station):
                stations.append(item)
                continue
            reason = held_back(item, now)
            if reason is HeldBack.OVER_BOUND:
                over_bound += 1
            elif reason is HeldBack.FUTURE:
                future += 1
            else:
                chunk.append(item)
                if len(chunk) >= chunk_size:
                    flush()
        if stations or chunk:
            flush()
    return ObservationImport(station_count, written, HeldBackCounts(over_bound, future))


def station_summaries(ctx: Context) -> list[StationSummary]:
    """Every stored station, by id, with its count of observations and their span."""
    return ctx.store.station_summaries()


def prune_observations(ctx: Context) -> int:
    """Delete observations older than the retention period (none when it is 0, for ever);
    how many were deleted."""
    cutoff = retention_cutoff(ctx.now(), ctx.policy.observation_retention_seconds)
    if cutoff is None:
        return 0
    return ctx.store.delete_observations_before(cutoff)


async def evaluate_stations(
    ctx: Context,
    *,
    pollutants: Sequence[Pollutant] = OBSERVED,
    since: datetime | None = None,
    until: datetime | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[PollutantEvaluation]:
    """Leave-one-station-out over the stored observations: the service's own error against
    them, for the raw background, the fused field and inverse distance
    (`cleanair_core.air.fusion_evaluation`); `progress` hears what is being fitted."""
    return await fusion_evaluation.evaluate_stations(
        ctx.store,
        ctx.require_sources().air_quality,
        pollutants=pollutants,
        since=since,
        until=until,
        offload=ctx.offload,
        progress=progress,
    )
