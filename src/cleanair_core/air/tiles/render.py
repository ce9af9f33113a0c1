"""A tile's picture: its air in a layer's palette, the streets drawn over the background,
encoded as a 256 x 256 PNG by Pillow (an indexed-colour image: a palette's few colours,
transparent where the air is unknown)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from cleanair_core.air.tiles.field import TileAir
from cleanair_core.air.tiles.geometry import TILE_SIZE, metres_per_pixel, px_of, py_of
from cleanair_core.air.tiles.layers import Layer
from cleanair_core.air.tiles.palettes import Palette

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    IntArray = npt.NDArray[np.intp]

#: The widest a street is drawn, pixels (a motorway at zoom 18 would be 60).
MAX_LINE_PX = 40
#: Round ends from this width up, so that a street's segments join without notches.
ROUND_ENDS_PX = 3


def tile_steps(air: TileAir, layer: Layer, palette: Palette) -> IntArray:
    """The background's palette step at every pixel (row-major; -1 unknown)."""
    return palette.steps(layer.values(air.background))


def render_png(air: TileAir, layer: Layer, palette: Palette) -> bytes:
    """The tile as PNG bytes: the background's colours, then each street in the colour of
    its own value, the cleanest first so that the dirtiest lie on top."""
    import numpy as np
    from PIL import Image, ImageDraw

    transparent = len(palette.colours)
    steps = tile_steps(air, layer, palette)
    indices = np.where(steps < 0, transparent, steps).astype(np.uint8)
    image = Image.frombytes("P", (TILE_SIZE, TILE_SIZE), indices.tobytes())
    flat = [channel for colour in palette.colours for channel in colour]
    image.putpalette([*flat, 0, 0, 0])
    if len(air.streets):
        _draw_streets(ImageDraw.Draw(image), air, layer, palette)
    out = io.BytesIO()
    # Level 1: tiles are encoded on every cold request, and a few colours compress well.
    image.save(out, format="PNG", transparency=transparent, compress_level=1)
    return out.getvalue()


def _draw_streets(draw: object, air: TileAir, layer: Layer, palette: Palette) -> None:
    import numpy as np
    from PIL import ImageDraw

    assert isinstance(draw, ImageDraw.ImageDraw)
    tile, streets = air.tile, air.streets
    steps = palette.steps(layer.values(air.street_air))
    left, top = tile.x * TILE_SIZE, tile.y * TILE_SIZE
    x0 = (px_of(streets.lon0, tile.z) - left).tolist()
    x1 = (px_of(streets.lon1, tile.z) - left).tolist()
    y0 = (py_of(streets.lat0, tile.z) - top).tolist()
    y1 = (py_of(streets.lat1, tile.z) - top).tolist()
    scale = metres_per_pixel(float(np.mean(streets.lat0)), tile.z)
    widths = np.clip(np.rint(streets.width_m / scale), 1, MAX_LINE_PX).astype(np.intp).tolist()
    # Dirtiest last: the higher step for a pollutant or an index, the lower for the score.
    dirt = -steps if layer.cleaner_above else steps
    for i in np.argsort(dirt, kind="stable").tolist():
        step = int(steps[i])
        if step < 0:
            continue
        width = widths[i]
        draw.line([(x0[i], y0[i]), (x1[i], y1[i])], fill=step, width=width)
        if width >= ROUND_ENDS_PX:
            r = width / 2.0
            for x, y in ((x0[i], y0[i]), (x1[i], y1[i])):
                draw.ellipse([x - r, y - r, x + r, y + r], fill=step)
