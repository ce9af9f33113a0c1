"""The explorer's air layer: what it may draw, in the core's own palettes (issue 33).

`GET /explore/air-layers` hands the page every tile layer's legend as the extension API's
`GET /ext/v1/airquality/tiles/layers` gives it to an app (`cleanair_http.tile_schemas`,
built from `cleanair_core.air.tiles.layers.LAYERS`): the legend is the very colours and
thresholds a tile is painted with, so it cannot drift from the tiles. It adds the tile URL
and the hours the endpoint serves (the contract's data window), so the page's time slider
offers exactly those. Free and public, like the networks: the page needs it before a token
is pasted, it is the same for everyone and holds nothing about anyone.
"""

from __future__ import annotations

import msgspec

from cleanair_core.air.tiles.geometry import MAX_ZOOM
from cleanair_core.routes.times import FORWARD_HORIZON, PAST_WINDOW
from cleanair_http.tile_schemas import LegendLayer, legend

#: The tile endpoint the page fetches (controllers/tiles.py), with its placeholders.
TILE_TEMPLATE = "/ext/v1/airquality/tiles/{layer}/{z}/{x}/{y}.png"


class AirLayers(msgspec.Struct):
    #: Every layer with both palettes, as `GET /ext/v1/airquality/tiles/layers` has them.
    layers: list[LegendLayer]
    #: The tile URL template (`{layer}`, `{z}`, `{x}`, `{y}`); `time` and `palette` go in its
    #: query.
    tiles: str
    #: Whole hours before and after now that the endpoint draws (30 days back, 84 h ahead).
    past_hours: int
    ahead_hours: int
    #: The deepest zoom the endpoint draws.
    max_zoom: int


def air_layers() -> AirLayers:
    """Every tile layer, in the core's order (the score, the indexes, the pollutants)."""
    return AirLayers(
        layers=legend().layers,
        tiles=TILE_TEMPLATE,
        past_hours=int(PAST_WINDOW.total_seconds()) // 3600,
        ahead_hours=int(FORWARD_HORIZON.total_seconds()) // 3600,
        max_zoom=MAX_ZOOM,
    )


#: The answer never changes while the server runs: encoded once.
AIR_LAYERS_JSON = msgspec.json.encode(air_layers())
