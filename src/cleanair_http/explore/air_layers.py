"""The explorer's air layer: what it may draw, in the core's own palettes (issue 33).

`GET /explore/air-layers` hands the page every tile layer with its title, unit and both
palettes, step by step, taken from `cleanair_core.air.tiles.layers.LAYERS`: the legend is
built from the very colours and thresholds a tile is painted with, so it cannot drift from
the tiles. It also says which hours the tile endpoint serves (the contract's data window),
so the page's time slider offers exactly those. Free and public, like the networks: it is
the same for every user and holds nothing about anyone.
"""

from __future__ import annotations

import msgspec

from cleanair_core.air.tiles.geometry import MAX_ZOOM
from cleanair_core.air.tiles.layers import CONCENTRATION_UNIT, LAYERS, PALETTES, Layer
from cleanair_core.air.tiles.palettes import Palette, hex_of
from cleanair_core.routes.times import FORWARD_HORIZON, PAST_WINDOW

#: The tile endpoint the page fetches (controllers/tiles.py), with its placeholders.
TILE_TEMPLATE = "/ext/v1/airquality/tiles/{layer}/{z}/{x}/{y}.png"


class LegendStep(msgspec.Struct):
    """One colour of a palette and the values it holds: from `low` (None: no lower bound)
    to `high` (None: open above), the bounds in the layer's unit."""

    colour: str
    label: str
    low: float | None
    high: float | None


class AirLayer(msgspec.Struct):
    name: str
    title: str
    unit: str
    #: Whether a higher value is cleaner air (the score) rather than dirtier.
    cleaner_above: bool
    #: Whether the steps are numeric ranges worth printing (concentrations), not categories.
    ranges: bool
    #: Each palette (`default`, `colorblind`) by name, its steps in ascending order of value.
    palettes: dict[str, list[LegendStep]]


class AirLayers(msgspec.Struct):
    layers: list[AirLayer]
    #: The tile URL template (`{layer}`, `{z}`, `{x}`, `{y}`); `time` and `palette` go in its
    #: query.
    tiles: str
    #: Whole hours before and after now that the endpoint draws (30 days back, 84 h ahead).
    past_hours: int
    ahead_hours: int
    #: The deepest zoom the endpoint draws.
    max_zoom: int


def legend(palette: Palette) -> list[LegendStep]:
    """`palette`'s steps in ascending order of value, each with its colour and bounds."""
    bounds = (None, *palette.thresholds, None)
    labels = palette.labels or tuple("" for _ in palette.colours)
    return [
        LegendStep(hex_of(colour), label, bounds[k], bounds[k + 1])
        for k, (colour, label) in enumerate(zip(palette.colours, labels, strict=True))
    ]


def air_layer(layer: Layer) -> AirLayer:
    return AirLayer(
        name=layer.name,
        title=layer.title,
        unit=layer.unit,
        cleaner_above=layer.cleaner_above,
        ranges=layer.unit == CONCENTRATION_UNIT,
        palettes={name: legend(layer.palette_named(name)) for name in PALETTES},
    )


def air_layers() -> AirLayers:
    """Every tile layer, in the core's order (the score, the indexes, the pollutants)."""
    return AirLayers(
        layers=[air_layer(layer) for layer in LAYERS.values()],
        tiles=TILE_TEMPLATE,
        past_hours=int(PAST_WINDOW.total_seconds()) // 3600,
        ahead_hours=int(FORWARD_HORIZON.total_seconds()) // 3600,
        max_zoom=MAX_ZOOM,
    )


#: The answer never changes while the server runs: encoded once.
AIR_LAYERS_JSON = msgspec.json.encode(air_layers())
