"""`GET /explore/air-layers`: the explorer's air layer reads every tile layer's palettes from
the core (so its legend is the very colours a tile holds) and the hours the tile endpoint
serves; public and free like the explorer's other data, and the page may show the blob URLs
it makes of the tiles it fetched."""

from __future__ import annotations

from typing import Any

import pytest

from cleanair_core import CleanAir
from cleanair_core.air.tiles.layers import LAYERS
from cleanair_core.air.tiles.palettes import hex_of
from cleanair_core.routes.times import FORWARD_HORIZON, PAST_WINDOW
from support.http import Client, bearer, pair

PATH = "/explore/air-layers"


@pytest.fixture
def answer(client: Client) -> dict[str, Any]:
    served = client.get(PATH)
    assert served.status_code == 200
    body: dict[str, Any] = served.json()
    return body


def test_it_is_public_free_and_cacheable(client: Client) -> None:
    served = client.get(PATH)  # no Authorization header
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("application/json")
    assert served.headers["cache-control"] == "public, max-age=3600"
    assert PATH not in client.get("/schema/openapi.json").json()["paths"]


def test_every_tile_layer_is_offered_in_the_cores_order(answer: dict[str, Any]) -> None:
    assert [layer["name"] for layer in answer["layers"]] == list(LAYERS)
    for layer in answer["layers"]:
        core = LAYERS[layer["name"]]
        assert (layer["title"], layer["unit"]) == (core.title, core.unit)
        assert layer["high_is_clean"] is core.cleaner_above


@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.parametrize("palette", ["default", "colorblind"])
def test_a_legend_is_the_palette_a_tile_is_painted_with(
    answer: dict[str, Any], name: str, palette: str
) -> None:
    [layer] = [layer for layer in answer["layers"] if layer["name"] == name]
    core = LAYERS[name].palette_named(palette)
    steps = layer[palette]
    assert [step["colour"] for step in steps] == [hex_of(c) for c in core.colours]
    assert [step["label"] for step in steps] == list(core.labels)
    if LAYERS[name].unit == "index category":  # named categories, no values to print
        assert {step["low"] for step in steps} | {step["high"] for step in steps} == {None}
    else:  # each step's bounds are the thresholds either side of it, the ends open
        assert [step["low"] for step in steps] == [None, *core.thresholds]
        assert [step["high"] for step in steps] == [*core.thresholds, None]


def test_it_is_the_extension_apis_legend_for_the_page(
    answer: dict[str, Any], client: Client, core: CleanAir
) -> None:
    headers = bearer(pair(core, client))
    api = client.get("/ext/v1/airquality/tiles/layers", headers=headers)
    assert api.status_code == 200
    assert answer["layers"] == api.json()["layers"]


def test_the_two_palettes_differ_in_colour_only(answer: dict[str, Any]) -> None:
    for layer in answer["layers"]:
        default, colorblind = layer["default"], layer["colorblind"]
        assert len(default) == len(colorblind)
        assert [s["colour"] for s in default] != [s["colour"] for s in colorblind]
        assert [s["label"] for s in default] == [s["label"] for s in colorblind]


def test_it_names_the_tile_endpoint_and_its_window(answer: dict[str, Any]) -> None:
    assert answer["tiles"] == "/ext/v1/airquality/tiles/{layer}/{z}/{x}/{y}.png"
    assert answer["past_hours"] * 3600 == PAST_WINDOW.total_seconds() == 30 * 24 * 3600
    assert answer["ahead_hours"] * 3600 == FORWARD_HORIZON.total_seconds() == 84 * 3600
    assert answer["max_zoom"] == 18


def test_the_page_may_show_images_it_made_from_blobs_and_nothing_foreign(client: Client) -> None:
    policy = client.get("/explore").headers["content-security-policy"]
    assert "img-src 'self' blob:;" in policy
    assert "connect-src 'self';" in policy
