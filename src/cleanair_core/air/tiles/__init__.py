"""Heatmap tiles of the air (issue 33): Web-Mercator XYZ tiles of 256 x 256 pixels, each
pixel the colour of one hour's air there in one layer's palette.

`geometry` places tiles and pixels on the globe, `palettes` turns concentrations into a
layer's values and colours, `field` samples the air a tile draws (the fused background, and
the street level along the loaded streets) and `render` paints and encodes it. All of it is
pure: the air comes in as arrays from the caller (docs/tiles.md).
"""
