"""Stepped colour palettes: a value's step is found among ascending thresholds, and each step
has one colour, so a legend lists exactly the colours a tile can hold (docs/tiles.md).

Every layer has its own palette (an index's official category colours, the Clean Air Score's
band colours, the EEA's band colours for a concentration) and a colour-blind-safe one: the
viridis colour map (van der Walt and Smith, 2015; perceptually uniform and readable with
the common colour-vision deficiencies), sampled at as many steps, reversed so that, as in the
official palettes, the darker the colour the dirtier the air.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import attrs

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.intp]
    ByteArray = npt.NDArray[np.uint8]

RGB = tuple[int, int, int]

#: viridis at 0, 1/8, ..., 1 (the 9-colour sampling of viridisLite and matplotlib, CC0).
VIRIDIS_ANCHORS: tuple[str, ...] = (
    "#440154", "#472D7B", "#3B528B", "#2C728E", "#21908C",
    "#27AD81", "#5DC863", "#AADC32", "#FDE725",
)  # fmt: skip


def rgb(colour: str) -> RGB:
    """`#RRGGBB` as a tuple of three 0-255 integers."""
    value = colour.removeprefix("#")
    if len(value) != 6:
        raise ValueError("a colour is #RRGGBB")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


def hex_of(colour: RGB) -> str:
    return "#{:02X}{:02X}{:02X}".format(*colour)


def blend(a: RGB, b: RGB, share: float) -> RGB:
    """`share` of the way from `a` to `b`, channel by channel."""
    return tuple(round(x + (y - x) * share) for x, y in zip(a, b, strict=True))  # type: ignore[return-value]


def viridis(steps: int) -> tuple[RGB, ...]:
    """`steps` colours from reversed viridis: bright yellow (clean) to dark purple (dirty)."""
    anchors = [rgb(c) for c in reversed(VIRIDIS_ANCHORS)]
    if steps == 1:
        return (anchors[0],)
    found: list[RGB] = []
    for step in range(steps):
        at = step / (steps - 1) * (len(anchors) - 1)
        low = min(int(at), len(anchors) - 2)
        found.append(blend(anchors[low], anchors[low + 1], at - low))
    return tuple(found)


@attrs.frozen
class Palette:
    """Colours by step: step k holds the values between `thresholds[k - 1]` and
    `thresholds[k]`; a value on a threshold belongs to the step below it when
    `upper_inclusive` (as the EEA bands' limits do), else to the step above."""

    thresholds: tuple[float, ...]
    colours: tuple[RGB, ...]
    upper_inclusive: bool = False
    #: The legend's label of each step.
    labels: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if len(self.colours) != len(self.thresholds) + 1:
            raise ValueError("a palette has one colour more than thresholds")
        if list(self.thresholds) != sorted(self.thresholds):
            raise ValueError("a palette's thresholds ascend")
        if self.labels and len(self.labels) != len(self.colours):
            raise ValueError("a palette labels every step or none")

    def steps(self, values: FloatArray) -> IntArray:
        """Each value's step; -1 where it is unknown (NaN)."""
        import numpy as np

        side: Literal["left", "right"] = "left" if self.upper_inclusive else "right"
        found = np.searchsorted(np.asarray(self.thresholds), values, side=side).astype(np.intp)
        return np.where(np.isnan(values), -1, found)

    def rgba(self, values: FloatArray) -> ByteArray:
        """One RGBA row per value: its step's colour, opaque; transparent where unknown."""
        import numpy as np

        table = np.array([(*c, 255) for c in self.colours] + [(0, 0, 0, 0)], dtype=np.uint8)
        return table[self.steps(values)]  # -1 picks the transparent last row


def colour_blind(palette: Palette, *, cleanest_first: bool = True) -> Palette:
    """`palette`'s steps in viridis colours, the darkest for the dirtiest air: the last step
    when `cleanest_first`, else the first (the score's lowest band)."""
    colours = viridis(len(palette.colours))
    return attrs.evolve(palette, colours=colours if cleanest_first else colours[::-1])


def split_bands(limits: Sequence[float], colours: Sequence[RGB], labels: Sequence[str]) -> Palette:
    """Bands (upper limits inclusive, the last open) each split at its middle, the upper half
    a colour halfway to the next band's: twice the steps, so that street-level contrasts within
    one band still show, with every official band limit kept as a step's edge."""
    thresholds: list[float] = []
    split_colours: list[RGB] = []
    split_labels: list[str] = []
    lower = 0.0
    for index, upper in enumerate(limits):
        middle = (lower + upper) / 2.0
        thresholds += [middle, upper]
        split_colours += [colours[index], blend(colours[index], colours[index + 1], 0.5)]
        split_labels += [f"{labels[index]} (low)", f"{labels[index]} (high)"]
        lower = upper
    split_colours.append(colours[len(limits)])
    split_labels.append(labels[len(limits)])
    return Palette(tuple(thresholds), tuple(split_colours), True, tuple(split_labels))
