"""msgspec structs of the heatmap tiles' legend (`GET /ext/v1/airquality/tiles/layers`)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from cleanair_core.air.tiles.layers import LAYERS, Layer
from cleanair_core.air.tiles.palettes import Palette, hex_of


class LegendStep(msgspec.Struct):
    colour: Annotated[str, msgspec.Meta(description="#RRGGBB", pattern="^#[0-9A-F]{6}$")]
    label: Annotated[str, msgspec.Meta(description="The step's name: a band, a category")]
    low: Annotated[
        float | None,
        msgspec.Meta(description="The lowest value of the step in the layer's unit; null: none"),
    ]
    high: Annotated[
        float | None,
        msgspec.Meta(description="The highest value of the step; null: none (the last step)"),
    ]


class LegendLayer(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(description="The layer's name in a tile's path")]
    title: Annotated[str, msgspec.Meta(description="What the layer shows, in words")]
    unit: Annotated[str, msgspec.Meta(description="µg/m³, `score 0-100` or `index category`")]
    high_is_clean: Annotated[
        bool, msgspec.Meta(description="Whether a higher value is cleaner air (the score)")
    ]
    high_inclusive: Annotated[
        bool,
        msgspec.Meta(
            description="Whether a value equal to a step's `high` belongs to that step (the "
            "EEA's band limits); else to the next"
        ),
    ]
    default: Annotated[list[LegendStep], msgspec.Meta(description="The layer's own colours")]
    colorblind: Annotated[list[LegendStep], msgspec.Meta(description="Viridis, reversed")]


class LegendResponse(msgspec.Struct):
    layers: Annotated[
        list[LegendLayer], msgspec.Meta(description="Every layer, in the service's order")
    ]


def _steps(layer: Layer, palette: Palette) -> list[LegendStep]:
    categories = layer.unit == "index category"
    bounds = [None, *palette.thresholds, None]
    labels = palette.labels or tuple(str(k) for k in range(len(palette.colours)))
    return [
        LegendStep(
            hex_of(colour),
            label,
            None if categories else bounds[k],
            None if categories else bounds[k + 1],
        )
        for k, (colour, label) in enumerate(zip(palette.colours, labels, strict=True))
    ]


def legend() -> LegendResponse:
    """Every layer's palettes, their steps in order (the lowest values first)."""
    return LegendResponse(
        [
            LegendLayer(
                layer.name,
                layer.title,
                layer.unit,
                layer.cleaner_above,
                layer.palette.upper_inclusive,
                _steps(layer, layer.palette),
                _steps(layer, layer.colorblind),
            )
            for layer in LAYERS.values()
        ]
    )
