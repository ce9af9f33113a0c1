"""Use case: a heatmap tile of one layer at one hour (`GET /ext/v1/airquality/tiles/...`).

A tile is named by what changes its picture: the layer, the palette, the tile, the hour and
the data version (the stored observations' version, which every import of station data
changes, and the loaded street networks). Its ETag is a digest of that name, so a client's
`If-None-Match` is answered (304) before any render, and a station's late data gives every
tile a new name, rendered anew. Tiles cost no credits; each one served (not a 304) counts
against its owner's daily tile allowance (`Policy.tile_allowance`), after the connection's
general rate limit its admission counted (docs/api-choices.md).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta

import attrs

from cleanair_core.access.connections import Authorized
from cleanair_core.access.scopes import Scope
from cleanair_core.air.point_score import current_hour
from cleanair_core.air.quality_source import GriddedAir
from cleanair_core.air.tiles.field import (
    Streets,
    TileAir,
    boxed,
    gridded_tile_air,
    no_streets,
    sampled_tile_air,
)
from cleanair_core.air.tiles.geometry import MAX_ZOOM, MIN_ZOOM, Tile, valid_tile
from cleanair_core.air.tiles.layers import LAYERS, PALETTES
from cleanair_core.air.tiles.render import MAX_LINE_PX, render_png
from cleanair_core.credits import rate_limits
from cleanair_core.errors import (
    NotFound,
    OutsideDataWindow,
    RateLimited,
    Unprocessable,
    Violation,
)
from cleanair_core.routes.network import RoadClass, StreetNetwork
from cleanair_core.routes.times import FORWARD_HORIZON, PAST_WINDOW, as_utc
from cleanair_core.use_cases.context import Context

#: Changes whenever the same data would be drawn differently: part of every ETag.
RENDER_VERSION = 1
#: Hours that ended longer ago than this are past: their data changes only by a late import.
SETTLED_AFTER = timedelta(hours=2)
#: How long a client may keep a past hour's tile before revalidating it, seconds.
PAST_MAX_AGE = 3600
#: The least a current or future hour's tile is kept, seconds (just before the hour turns).
MIN_MAX_AGE = 60

#: How wide each class of road is drawn, metres (carriageway and kerbs, roughly): paths
#: carry no traffic and are not drawn (the background is their air).
STREET_WIDTH_M: dict[RoadClass, float] = {
    RoadClass.LOCAL: 8.0,
    RoadClass.COLLECTOR: 12.0,
    RoadClass.ARTERIAL: 18.0,
    RoadClass.MOTORWAY: 24.0,
}

ALLOWANCE_SPENT = "The daily tile allowance of this account is spent"
OUTSIDE_WINDOW = "The tile's time must lie between 30 days ago and 84 hours from now"


@attrs.frozen
class TileAnswer:
    """A tile to send (`png`), or None when the client's copy is current (304), with its
    strong ETag (quoted) and how many seconds it may be kept."""

    png: bytes | None
    etag: str
    max_age: int


def _invalid(field: str, rule: str, message: str) -> Unprocessable:
    return Unprocessable(violations=[Violation(field, rule, message)])


def tile_hour(at: datetime | None, now: datetime) -> datetime:
    """The hour a tile of `at` (default: now) draws; OutsideDataWindow unless it lies
    between 30 days ago and 84 hours from now (the contract's data window)."""
    try:
        instant = now if at is None else as_utc(at)
    except OutsideDataWindow:  # a time UTC cannot hold
        raise OutsideDataWindow(OUTSIDE_WINDOW) from None
    if not now - PAST_WINDOW <= instant <= now + FORWARD_HORIZON:
        raise OutsideDataWindow(OUTSIDE_WINDOW)
    return current_hour(instant, 3600)


def max_age(hour: datetime, now: datetime) -> int:
    """Seconds a tile of `hour` stays as it is, as far as anyone can tell: a past hour's
    until a late import might change it; a current or future hour's until the next hour,
    whose observations move the fused air of every hour ahead."""
    if hour + timedelta(hours=1) + SETTLED_AFTER <= now:
        return PAST_MAX_AGE
    left = 3600 - int(now.timestamp()) % 3600
    return max(MIN_MAX_AGE, left)


def _network_version(networks: Sequence[StreetNetwork]) -> tuple[tuple[str, str, int], ...]:
    return tuple(
        (n.name, n.imported_at.isoformat() if n.imported_at else "", n.edge_count) for n in networks
    )


def streets_of(networks: Sequence[StreetNetwork]) -> Streets:
    """The drawn streets of `networks`: every edge carrying motor traffic, as a segment, with
    its bounding box (CPU work for a large network: off the event loop)."""
    import numpy as np

    parts: list[Streets] = []
    widths = np.zeros(max(RoadClass) + 1, dtype=np.float64)
    for road_class, width in STREET_WIDTH_M.items():
        widths[road_class] = width
    for network in networks:
        classes = np.asarray(network.edge_class, dtype=np.intp)
        drawn = widths[classes] > 0
        start, end = network.edge_from[drawn], network.edge_to[drawn]
        parts.append(
            Streets(
                network.node_lat[start].astype(np.float64),
                network.node_lon[start].astype(np.float64),
                network.node_lat[end].astype(np.float64),
                network.node_lon[end].astype(np.float64),
                widths[classes[drawn]],
            )
        )
    if not parts:
        return no_streets()
    return boxed(Streets(*(np.concatenate([getattr(p, f) for p in parts]) for f in _STREET_FIELDS)))


_STREET_FIELDS = ("lat0", "lon0", "lat1", "lon1", "width_m")


class _StreetsKept:
    """The drawn streets of the loaded networks, built once per set of networks (two
    threads may both build them at first: the same streets, either kept)."""

    def __init__(self) -> None:
        # Built at the first tile: NumPy is not imported with the module (the CLI starts
        # faster without it).
        self._kept: tuple[object, Streets] | None = None

    def of(self, networks: Sequence[StreetNetwork]) -> Streets:
        key = _network_version(networks)
        kept = self._kept
        if kept is None or kept[0] != key:
            kept = self._kept = (key, streets_of(networks))
        return kept[1]


_kept_streets = _StreetsKept()


@attrs.frozen
class _TileName:
    layer: str
    palette: str
    tile: Tile
    hour: datetime
    observations: int
    networks: tuple[tuple[str, str, int], ...]

    def etag(self) -> str:
        text = repr((RENDER_VERSION, *attrs.astuple(self, recurse=False)))
        return '"' + hashlib.sha256(text.encode()).hexdigest()[:32] + '"'


def check_request(layer: str, palette: str, tile: Tile) -> None:
    """NotFound for an unknown layer; Unprocessable for an unknown palette or a tile outside
    zoom 0-18 and its 2^z x 2^z grid."""
    if layer not in LAYERS:
        raise NotFound("No such tile layer")
    if palette not in PALETTES:
        choices = ", ".join(f'"{name}"' for name in PALETTES)
        raise _invalid("palette", "enum", f"must be one of {choices}")
    if valid_tile(tile):
        return
    if not MIN_ZOOM <= tile.z <= MAX_ZOOM:
        raise _invalid("z", "maximum", f"must be at most {MAX_ZOOM}")
    # Each of x and y out of the zoom's grid is named (x first, as in the path).
    side = 1 << tile.z
    raise Unprocessable(
        violations=[
            Violation(field, "maximum", "must be at most 2^z - 1")
            for field, value in (("x", tile.x), ("y", tile.y))
            if not 0 <= value < side
        ]
    )


def etag_matches(etag: str, if_none_match: str | None) -> bool:
    """Whether an `If-None-Match` header names `etag` (or is `*`)."""
    if if_none_match is None:
        return False
    tags = [t.strip() for t in if_none_match.split(",")]
    return "*" in tags or etag in tags or f"W/{etag}" in tags


async def heatmap_tile(
    ctx: Context,
    proof: Authorized,
    *,
    layer: str,
    tile: Tile,
    at: datetime | None = None,
    palette: str = "default",
    if_none_match: str | None = None,
) -> TileAnswer:
    """The PNG of `tile` in `layer` at the hour of `at` (default: now), or a 304 answer when
    `if_none_match` names its ETag. Raises NotFound (layer), Unprocessable (palette, tile),
    OutsideDataWindow (time), RateLimited (the owner's daily tile allowance is spent) and
    SourceUnavailable (no air source)."""
    caller = proof.caller_for(Scope.AQ_READ)
    check_request(layer, palette, tile)
    now = ctx.now()
    hour = tile_hour(at, now)
    sources = ctx.require_sources()
    networks = list(sources.networks.loaded) if sources.networks is not None else []
    observations = await ctx.store_calls(ctx.store.observations_version)
    name = _TileName(layer, palette, tile, hour, observations, _network_version(networks))
    etag, keep = name.etag(), max_age(hour, now)
    if etag_matches(etag, if_none_match):
        return TileAnswer(None, etag, keep)
    await ctx.store_calls(lambda: _count_allowance(ctx, caller.owner.key, now))
    cached = ctx.tile_cache.get(name)
    if cached is not None:
        return TileAnswer(cached, etag, keep)
    return TileAnswer(await _rendered_once(ctx, name, networks), etag, keep)


async def _rendered_once(ctx: Context, name: _TileName, networks: Sequence[StreetNetwork]) -> bytes:
    """The tile's PNG: rendered and cached, or awaited from the render of it under way (a
    map view asked by many clients as the hour turns is rendered once)."""
    loop = asyncio.get_running_loop()
    under_way = ctx.tile_cache.under_way
    pending = under_way.get(name)
    if pending is not None and pending.get_loop() is loop:
        return await asyncio.shield(pending)
    future: asyncio.Future[bytes] = loop.create_future()
    under_way[name] = future
    try:
        async with ctx.tile_cache.render_slots():
            png = await _render(ctx, name, networks)
        ctx.tile_cache.rendered(name, png)
        future.set_result(png)
        return png
    except Exception as error:
        future.set_exception(error)
        future.exception()  # retrieved: a render no one else awaited is not a warning
        raise
    except BaseException:
        future.cancel()
        raise
    finally:
        if under_way.get(name) is future:
            del under_way[name]


def _count_allowance(ctx: Context, owner: str, now: datetime) -> None:
    """Count a tile served against `owner`'s daily allowance: RateLimited once spent, until
    the next UTC midnight."""
    try:
        rate_limits.enforce(ctx.store, ctx.policy.tile_allowance, owner, now)
    except RateLimited as spent:
        raise RateLimited(spent.retry_after, ALLOWANCE_SPENT) from None


async def _render(ctx: Context, name: _TileName, networks: Sequence[StreetNetwork]) -> bytes:
    source = ctx.require_sources().air_quality
    drawn = LAYERS[name.layer]
    palette = drawn.palette_named(name.palette)
    if isinstance(source, GriddedAir):
        gridded = source

        def compute() -> bytes:
            streets = _kept_streets.of(networks)
            air = gridded_tile_air(gridded, name.tile, name.hour, streets, MAX_LINE_PX)
            return render_png(air, drawn, palette)

        return await ctx.offload(compute)
    streets = await ctx.offload(lambda: _kept_streets.of(networks))
    air: TileAir = await sampled_tile_air(source, name.tile, name.hour, streets, MAX_LINE_PX)
    return await ctx.offload(lambda: render_png(air, drawn, palette))
