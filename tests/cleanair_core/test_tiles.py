"""Heatmap tiles in the core: the geometry, the layers against the functions they vectorise,
the street-level tile over the shipped Helsinki network, and the render cache."""

from __future__ import annotations

import io
import math
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cleanair_core.air.gridded_fused_air import GriddedFusedAir, fused_air
from cleanair_core.air.indexes.registry import INDEX_CODES, OFFICIAL_INDEXES
from cleanair_core.air.pollutants import SCORED, Pollutant
from cleanair_core.air.score import clean_air_score
from cleanair_core.air.street_level import street_level_air
from cleanair_core.air.tiles.cache import TileCache
from cleanair_core.air.tiles.field import LATTICE_STEP, gridded_tile_air, interpolated, lattice
from cleanair_core.air.tiles.geometry import (
    MAX_LATITUDE,
    MAX_ZOOM,
    TILE_SIZE,
    Tile,
    bounds,
    lat_of,
    lon_of,
    pixel_centres,
    px_of,
    py_of,
    valid_tile,
)
from cleanair_core.air.tiles.layers import LAYERS
from cleanair_core.air.tiles.render import render_png
from cleanair_core.routes.network import RoadClass
from cleanair_core.use_cases.tiles import streets_of
from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer
from cleanair_sources.osm_import import import_network
from cleanair_sources.street_increments import NetworkIncrements
from cleanair_storage.memory import MemoryStore

zooms = st.integers(0, MAX_ZOOM)


@st.composite
def tiles(draw: st.DrawFn) -> Tile:
    z = draw(zooms)
    return Tile(z, draw(st.integers(0, (1 << z) - 1)), draw(st.integers(0, (1 << z) - 1)))


# -- geometry -------------------------------------------------------------------------------


@given(st.floats(-MAX_LATITUDE, MAX_LATITUDE), st.floats(-180.0, 180.0), zooms)
def test_a_place_and_its_pixel_coordinates_round_trip(lat: float, lon: float, z: int) -> None:
    assert float(lat_of(py_of(lat, z), z)) == pytest.approx(lat, abs=1e-9)
    assert float(lon_of(px_of(lon, z), z)) == pytest.approx(lon, abs=1e-9)


@given(tiles())
def test_tiles_tile_the_world_without_gaps_or_overlaps(tile: Tile) -> None:
    south, west, north, east = bounds(tile)
    assert south < north
    assert west < east
    side = 1 << tile.z
    if tile.x + 1 < side:
        assert bounds(Tile(tile.z, tile.x + 1, tile.y))[1] == east
    else:
        assert east == pytest.approx(180.0)
    if tile.y + 1 < side:
        assert bounds(Tile(tile.z, tile.x, tile.y + 1))[2] == south
    else:
        assert south == pytest.approx(-MAX_LATITUDE)
    if tile.x == 0:
        assert west == -180.0
    if tile.y == 0:
        assert north == pytest.approx(MAX_LATITUDE)


@given(st.floats(-MAX_LATITUDE + 1e-6, MAX_LATITUDE - 1e-6), st.floats(-180.0, 179.999), zooms)
def test_every_place_lies_in_the_tile_and_pixel_its_coordinates_name(
    lat: float, lon: float, z: int
) -> None:
    px, py = float(px_of(lon, z)), float(py_of(lat, z))
    tile = Tile(z, int(px // TILE_SIZE), int(py // TILE_SIZE))
    assert valid_tile(tile)
    south, west, north, east = bounds(tile)
    assert south - 1e-9 <= lat <= north + 1e-9
    assert west - 1e-9 <= lon <= east + 1e-9
    # The pixel's centre is within half a pixel of the place.
    lats, lons = pixel_centres(tile)
    column, row = int(px % TILE_SIZE), int(py % TILE_SIZE)
    assert abs(float(px_of(lons[column], z)) - px) <= 0.5 + 1e-6
    assert abs(float(py_of(lats[row], z)) - py) <= 0.5 + 1e-6


def test_tiles_outside_the_grid_or_zoom_are_invalid() -> None:
    assert valid_tile(Tile(0, 0, 0))
    assert valid_tile(Tile(18, (1 << 18) - 1, 0))
    for tile in (Tile(19, 0, 0), Tile(-1, 0, 0), Tile(2, 4, 0), Tile(2, 0, -1)):
        assert not valid_tile(tile)


def test_interpolation_keeps_the_lattice_values_and_is_linear_between() -> None:
    tile = Tile(3, 2, 2)
    lats, _lons = lattice(tile)
    n = lats.size
    ramp = np.tile(np.arange(n, dtype=np.float64), n).reshape(-1, 1)  # grows west to east
    pixels = interpolated(ramp).reshape(TILE_SIZE, TILE_SIZE)
    # Pixel centre c lies at (c + 0.5) / LATTICE_STEP lattice steps.
    assert pixels[0] == pytest.approx((np.arange(TILE_SIZE) + 0.5) / LATTICE_STEP)
    assert np.all(pixels == pixels[0])


# -- layers -------------------------------------------------------------------------------------


concentration = st.floats(0.0, 700.0, allow_nan=False)


@given(st.sampled_from(SCORED), concentration)
@settings(max_examples=400)
def test_each_index_layer_has_the_official_functions_category(
    pollutant: Pollutant, value: float
) -> None:
    """One pollutant known, one hour of history: the layer's category is the index's own."""
    air = np.full((1, len(SCORED)), np.nan)
    air[0, SCORED.index(pollutant)] = value
    for index in OFFICIAL_INDEXES:
        official = index.compute({pollutant: [value]})
        step = int(LAYERS[index.code].values(air)[0]) if official is not None else None
        if official is None:
            assert math.isnan(LAYERS[index.code].values(air)[0])
            continue
        palette = LAYERS[index.code].palette
        assert step is not None
        assert palette.colours[step] == tuple(
            int(official.colour[i : i + 2], 16) for i in (1, 3, 5)
        )


@given(st.lists(st.one_of(st.none(), concentration), min_size=5, max_size=5))
def test_the_score_layer_is_the_clean_air_score(values: list[float | None]) -> None:
    air = np.array([[np.nan if v is None else v for v in values]])
    expected = clean_air_score(dict(zip(SCORED, values, strict=True)))
    found = LAYERS["clean_air_score"].values(air)[0]
    assert (math.isnan(found) and expected is None) or found == expected


def test_every_registry_index_and_the_pollutants_have_a_layer_with_a_colour_blind_palette() -> None:
    assert set(LAYERS) == {"clean_air_score", *INDEX_CODES, "no2", "pm25", "pm10", "o3"}
    for layer in LAYERS.values():
        assert len(layer.colorblind.colours) == len(layer.palette.colours)
        assert layer.colorblind.colours != layer.palette.colours
        # Darker for dirtier air: the colour-blind palette's luminance falls with dirt.
        luma = [0.2126 * r + 0.7152 * g + 0.0722 * b for r, g, b in layer.colorblind.colours]
        assert luma == sorted(luma, reverse=not layer.cleaner_above)


# -- the street-level tile over Helsinki ----------------------------------------------------------


def test_a_main_road_is_drawn_in_its_own_street_level_colour_over_the_background() -> None:
    """Zoom 16 over central Helsinki's arterial roads: the pixel at an arterial's middle has
    the colour of its street-level NO2, which differs from the background cell's there, and
    along the arterials most such pixels are darker (a higher step) than the background."""
    network = import_network(DEFAULT_NETWORK_FILE, "helsinki")
    model = EmbeddedModel(Gazetteer.load())
    source = fused_air(street_level_air(model, model, NetworkIncrements([network])), MemoryStore())
    assert isinstance(source, GriddedFusedAir)
    streets = streets_of([network])
    hour = datetime(2026, 11, 25, 8, tzinfo=UTC)  # a weekday's morning rush
    arterial = np.flatnonzero(network.edge_class == RoadClass.ARTERIAL)
    assert arterial.size > 0
    layer = LAYERS["no2"]
    darker = same = 0
    for edge in arterial[:: max(1, arterial.size // 12)].tolist():
        a, b = network.edge_from[edge], network.edge_to[edge]
        lat = float(network.node_lat[a] + network.node_lat[b]) / 2
        lon = float(network.node_lon[a] + network.node_lon[b]) / 2
        z = 16
        px, py = float(px_of(lon, z)), float(py_of(lat, z))
        tile = Tile(z, int(px // TILE_SIZE), int(py // TILE_SIZE))
        air = gridded_tile_air(source, tile, hour, streets, 40)
        png = Image.open(io.BytesIO(render_png(air, layer, layer.palette))).convert("RGB")
        column, row = int(px % TILE_SIZE), int(py % TILE_SIZE)
        background = layer.values(air.background[row * TILE_SIZE + column][None, :])
        street = layer.values(source.air_at_hour(np.array([lat]), np.array([lon]), hour))
        assert street[0] > background[0]  # the traffic's increment
        step = int(layer.palette.steps(street)[0])
        drawn = png.getpixel((column, row))
        assert drawn == layer.palette.colours[step]
        if step > int(layer.palette.steps(background)[0]):
            darker += 1
        else:
            same += 1
    assert darker > same


# -- the cache ------------------------------------------------------------------------------------


def test_the_cache_keeps_its_byte_budget_least_recently_used_out_first() -> None:
    cache = TileCache(budget_bytes=10)
    cache.rendered("a", b"1234")
    cache.rendered("b", b"1234")
    assert cache.get("a") == b"1234"  # a is now the most recent
    cache.rendered("c", b"1234")
    assert cache.get("b") is None
    assert cache.get("a") is not None
    assert cache.get("c") is not None
    assert cache.size_bytes == 8
    assert cache.renders == 3
    cache.rendered("huge", b"x" * 11)
    assert cache.get("huge") is None
    assert cache.size_bytes == 8


@given(
    st.lists(
        st.tuples(
            st.floats(-80, 80), st.floats(-179, 179), st.floats(-0.05, 0.05), st.floats(-0.05, 0.05)
        ),
        min_size=1,
        max_size=20,
    ),
    tiles(),
)
def test_boxes_worked_out_once_find_the_same_streets(
    segments: list[tuple[float, float, float, float]], tile: Tile
) -> None:
    from cleanair_core.air.tiles.field import Streets, boxed, crossing

    lat0 = np.array([s[0] for s in segments])
    lon0 = np.array([s[1] for s in segments])
    streets = Streets(
        lat0, lon0, lat0 + [s[2] for s in segments], lon0 + [s[3] for s in segments],
        np.full(len(segments), 8.0),
    )  # fmt: skip
    # The reference: the segments' ends in world pixels at the tile's zoom, against the tile
    # widened by 40 pixels on every side.
    x0, x1 = px_of(streets.lon0, tile.z), px_of(streets.lon1, tile.z)
    y0, y1 = py_of(streets.lat0, tile.z), py_of(streets.lat1, tile.z)
    left, top = tile.x * TILE_SIZE - 40, tile.y * TILE_SIZE - 40
    expected = (
        (np.maximum(x0, x1) >= left)
        & (np.minimum(x0, x1) <= left + TILE_SIZE + 80)
        & (np.maximum(y0, y1) >= top)
        & (np.minimum(y0, y1) <= top + TILE_SIZE + 80)
    )
    assert np.array_equal(crossing(boxed(streets), tile, 40), expected)
    assert np.array_equal(crossing(streets, tile, 40), expected)
