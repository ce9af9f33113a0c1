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
#: Round ends from this width up, so that a street's segments join without notches (narrower,
#: a notch is a pixel or two: not worth two more draw calls a segment).
ROUND_ENDS_PX = 6


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
        _draw_streets(image, ImageDraw.Draw(image), air, layer, palette)
    out = io.BytesIO()
    # Level 1: tiles are encoded on every cold request, and a few colours compress well.
    image.save(out, format="PNG", transparency=transparent, compress_level=1)
    return out.getvalue()


def _draw_streets(
    image: object, draw: object, air: TileAir, layer: Layer, palette: Palette
) -> None:
    import numpy as np
    from PIL import Image, ImageDraw

    assert isinstance(image, Image.Image)
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
    order = np.argsort(dirt, kind="stable")
    thin = np.asarray(widths)[order] == 1
    if thin.all():  # a city at zoom 13 or less: thousands of streets one pixel wide
        _thin_lines(image, order[steps[order] >= 0], air, steps)
        return
    for i in order.tolist():
        step = int(steps[i])
        if step < 0:
            continue
        width = widths[i]
        draw.line([(x0[i], y0[i]), (x1[i], y1[i])], fill=step, width=width)
        if width >= ROUND_ENDS_PX:
            r = width / 2.0
            for x, y in ((x0[i], y0[i]), (x1[i], y1[i])):
                draw.ellipse([x - r, y - r, x + r, y + r], fill=step)


def _thin_lines(image: object, order: IntArray, air: TileAir, steps: IntArray) -> None:
    """One-pixel lines of the segments `order` names, in that order (the last wins where
    they cross), in NumPy: a point every half pixel along each, rounded to its pixel."""
    import numpy as np
    from PIL import Image

    assert isinstance(image, Image.Image)
    tile, streets = air.tile, air.streets
    left, top = tile.x * TILE_SIZE, tile.y * TILE_SIZE
    x0 = px_of(streets.lon0[order], tile.z) - left
    x1 = px_of(streets.lon1[order], tile.z) - left
    y0 = py_of(streets.lat0[order], tile.z) - top
    y1 = py_of(streets.lat1[order], tile.z) - top
    length = np.hypot(x1 - x0, y1 - y0)
    # Segments far beyond the tile are not walked: the visible part is at most its diagonal.
    counts = np.minimum(np.ceil(length * 2.0).astype(np.intp), 4 * TILE_SIZE) + 1
    which = np.repeat(np.arange(order.size), counts)
    starts = np.cumsum(counts) - counts
    share = (np.arange(which.size) - starts[which]) / np.maximum(counts[which] - 1, 1)
    xs = np.floor(x0[which] + (x1 - x0)[which] * share).astype(np.intp)
    ys = np.floor(y0[which] + (y1 - y0)[which] * share).astype(np.intp)
    inside = (xs >= 0) & (xs < TILE_SIZE) & (ys >= 0) & (ys < TILE_SIZE)
    pixels = np.frombuffer(image.tobytes(), dtype=np.uint8).copy()
    # Assigned in order, so the dirtiest (last) win where lines cross.
    pixels[ys[inside] * TILE_SIZE + xs[inside]] = steps[order][which[inside]].astype(np.uint8)
    image.frombytes(pixels.tobytes())
