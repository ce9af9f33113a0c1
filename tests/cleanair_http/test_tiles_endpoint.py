"""GET /ext/v1/airquality/tiles/{layer}/{z}/{x}/{y}.png: heatmap tiles with the extension
API's auth and error envelope, cached by name, free of credits but counted against a daily
tile allowance (issue 33)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from litestar.testing import TestClient
from PIL import Image

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.access.scopes import Scope
from cleanair_core.air.observations import Observation, Station
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.tiles.geometry import px_of, py_of
from cleanair_core.air.tiles.layers import LAYERS
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.geo import Point
from cleanair_core.ports import Sources
from cleanair_http.app import create_app
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_runtime.composition.bootstrap import Deployment, build_sources
from cleanair_runtime.composition.settings import Settings
from cleanair_storage.sqlite import SqliteStore
from support.fakes import FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import Client, bearer, pair, user_token

NOW = datetime(2026, 1, 15, 12, 20, tzinfo=UTC)
HOUR = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
KALLIO = Point(60.187, 24.951)
Z = 12


def tile_of(point: Point, z: int = Z) -> tuple[int, int, float, float]:
    """The tile holding `point`, and the point's pixel within it."""
    px, py = float(px_of(point.lon, z)), float(py_of(point.lat, z))
    return int(px // 256), int(py // 256), px % 256, py % 256


X, Y, _, _ = tile_of(KALLIO)
PATH = f"/ext/v1/airquality/tiles/no2/{Z}/{X}/{Y}.png"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def sources(tmp_path: Path, clock: ManualClock) -> Sources:
    """The real sources (embedded model, fusion) over the test core's file, no network."""
    store = SqliteStore(tmp_path / "cleanair.db")
    settings = Settings.from_env({"CLEANAIR_DEFAULT_NETWORK": "false"})
    return build_sources(settings, store, TokenKeys(generate_key()), Deployment(), clock=clock)


def png_of(body: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(body))
    assert (image.format, image.size) == ("PNG", (256, 256))
    return image.convert("RGBA")


def test_a_tile_is_a_png_with_a_strong_etag_and_how_long_to_keep_it(
    core: CleanAir, client: Client
) -> None:
    headers = bearer(pair(core, client))
    before = client.get("/v1/quota", headers=headers).json()["remaining"]
    answer = client.get(
        PATH, headers={**headers, "Accept-Encoding": "gzip"}, params={"time": HOUR.isoformat()}
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "image/png"
    etag = answer.headers["etag"]
    assert etag.startswith('"')
    assert etag.endswith('"')
    assert not etag.startswith("W/")
    # The current hour's tile is kept until the next hour: 40 minutes from 12:20.
    assert answer.headers["cache-control"] == "private, max-age=2400"
    png_of(answer.content)
    assert client.get("/v1/quota", headers=headers).json()["remaining"] == before  # free


def test_a_png_is_not_gzipped_again(core: CleanAir, client: Client) -> None:
    headers = {**bearer(pair(core, client)), "Accept-Encoding": "gzip"}
    answer = client.get("/ext/v1/airquality/tiles/clean_air_score/0/0/0.png", headers=headers)
    assert len(answer.content) >= 1024  # over the size the app's compression starts at
    assert "content-encoding" not in answer.headers


def test_a_past_hour_is_kept_an_hour_and_revalidates(core: CleanAir, client: Client) -> None:
    headers = bearer(pair(core, client))
    past = (HOUR - timedelta(days=3)).isoformat()
    answer = client.get(PATH, headers=headers, params={"time": past})
    assert answer.headers["cache-control"] == "private, max-age=3600"
    again = client.get(
        PATH, headers={**headers, "If-None-Match": answer.headers["etag"]}, params={"time": past}
    )
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == answer.headers["etag"]


def test_a_cache_hit_renders_nothing_and_a_304_renders_nothing(
    core: CleanAir, client: Client
) -> None:
    headers = bearer(pair(core, client))
    cache = core.context.tile_cache
    first = client.get(PATH, headers=headers)
    assert cache.renders == 1
    second = client.get(PATH, headers=headers)
    assert second.content == first.content
    assert second.headers["etag"] == first.headers["etag"]
    client.get(PATH, headers={**headers, "If-None-Match": first.headers["etag"]})
    assert cache.renders == 1
    client.get(PATH, headers=headers, params={"palette": "colorblind"})
    assert cache.renders == 2  # another palette is another picture


def test_the_pixel_at_a_station_has_the_colour_of_the_fused_value_there(
    core: CleanAir, client: Client, clock: ManualClock
) -> None:
    """A station reading far above the model moves the tile's colour at its place to that
    of the fused value there (the conditions' value), within one step of the palette; the
    new observations give the tile a new ETag, so it is rendered anew."""
    headers = bearer(pair(core, client))
    _, _, sx, sy = tile_of(KALLIO)
    before = client.get(PATH, headers=headers)
    core.store.put_stations([Station("test:1", "Kallio", KALLIO)])
    core.store.put_observations([Observation("test:1", Pollutant.NO2, HOUR, 90.0)])
    clock.advance(seconds=1)
    after = client.get(PATH, headers={**headers, "If-None-Match": before.headers["etag"]})
    assert after.status_code == 200  # the late data is drawn, not answered 304
    assert after.headers["etag"] != before.headers["etag"]
    conditions = client.post(
        "/ext/v1/airquality/conditions",
        json={"lat": KALLIO.lat, "lon": KALLIO.lon},
        headers=headers,
    ).json()
    fused = conditions["pollutants"]["no2"]["concentration"]
    assert fused > 60.0  # corrected towards the station's 90
    palette = LAYERS["no2"].palette
    import numpy as np

    step = int(palette.steps(np.array([fused]))[0])
    allowed = {
        palette.colours[s] for s in (step - 1, step, step + 1) if 0 <= s < len(palette.colours)
    }
    pixel = png_of(after.content).getpixel((int(sx), int(sy)))
    assert isinstance(pixel, tuple)
    assert pixel[3] == 255
    assert tuple(pixel[:3]) in allowed
    old = png_of(before.content).getpixel((int(sx), int(sy)))
    assert old != pixel  # the station changed what the tile shows there


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_every_layer_renders(core: CleanAir, client: Client, layer: str) -> None:
    headers = bearer(pair(core, client))
    answer = client.get(f"/ext/v1/airquality/tiles/{layer}/{Z}/{X}/{Y}.png", headers=headers)
    assert answer.status_code == 200, answer.text
    colours = {
        tuple(c[:3]) for _, c in png_of(answer.content).getcolors(256) or [] if isinstance(c, tuple)
    }
    assert colours <= set(LAYERS[layer].palette.colours)


@pytest.mark.parametrize(
    ("path", "params", "errors"),
    [
        ("/ext/v1/airquality/tiles/no2/19/0/0.png", {}, [("z", "maximum")]),
        ("/ext/v1/airquality/tiles/no2/2/4/0.png", {}, [("x", "maximum")]),
        ("/ext/v1/airquality/tiles/no2/2/0/4.png", {}, [("y", "maximum")]),
        ("/ext/v1/airquality/tiles/no2/2/4/4.png", {}, [("x", "maximum"), ("y", "maximum")]),
        ("/ext/v1/airquality/tiles/no2/x/0/0.png", {}, [("z", "type")]),
        ("/ext/v1/airquality/tiles/no2/2/-1/0.png", {}, [("x", "type")]),
        ("/ext/v1/airquality/tiles/no2/2/0/0.jpg", {}, [("y", "pattern")]),
        ("/ext/v1/airquality/tiles/no2/2/0/0", {}, [("y", "pattern")]),
        ("/ext/v1/airquality/tiles/no2/2/0/0.png", {"palette": "rainbow"}, [("palette", "enum")]),
        ("/ext/v1/airquality/tiles/no2/2/0/0.png", {"time": "yesterday"}, [("time", "format")]),
    ],
)
def test_a_malformed_tile_is_422_and_names_the_field(
    core: CleanAir,
    client: Client,
    path: str,
    params: dict[str, str],
    errors: list[tuple[str, str]],
) -> None:
    headers = bearer(pair(core, client))
    answer = client.get(path, headers=headers, params=params)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == "Request validation failed"
    assert [(e["field"], e["rule"]) for e in answer.json()["errors"]] == errors
    assert "rainbow" not in answer.text
    assert "yesterday" not in answer.text


def test_an_unknown_layer_is_404(core: CleanAir, client: Client) -> None:
    headers = bearer(pair(core, client))
    answer = client.get("/ext/v1/airquality/tiles/co2/2/0/0.png", headers=headers)
    assert answer.status_code == 404
    assert answer.json() == {"detail": "No such tile layer"}


@pytest.mark.parametrize(
    "when", [NOW - timedelta(days=30, seconds=1), NOW + timedelta(hours=84, seconds=1)]
)
def test_a_time_outside_the_data_window_is_400(
    core: CleanAir, client: Client, when: datetime
) -> None:
    headers = bearer(pair(core, client))
    answer = client.get(PATH, headers=headers, params={"time": when.isoformat()})
    assert answer.status_code == 400
    assert "30 days ago" in answer.json()["detail"]


def test_the_window_edges_are_inside(core: CleanAir, client: Client) -> None:
    headers = bearer(pair(core, client))
    for when in (NOW - timedelta(days=30), NOW + timedelta(hours=84)):
        answer = client.get(PATH, headers=headers, params={"time": when.isoformat()})
        assert answer.status_code == 200, answer.text


def test_no_token_is_401_and_no_aq_read_scope_is_403(core: CleanAir, client: Client) -> None:
    assert client.get(PATH).status_code == 401
    token = user_token(core, "bob", [Scope.ROUTES_PLAN])
    answer = client.get(PATH, headers=bearer(token))
    assert answer.status_code == 403
    assert "aq:read" in answer.json()["detail"]


@pytest.fixture
def small_allowance(tmp_path: Path, clock: ManualClock, sources: Sources) -> Iterator[Client]:
    store = SqliteStore(tmp_path / "allowance.db")
    policy = Policy(credits=CreditLimits(monthly=1000, daily=100), tiles_per_day=3)
    core = CleanAir(
        store, TokenKeys(generate_key()), policy, clock, sources=sources,
        offload=in_thread, store_calls=here_or_in_thread,
    )  # fmt: skip
    with TestClient(create_app(core)) as client:
        client.app.state.test_core = core
        yield client
    store.close()


def test_the_daily_tile_allowance_is_429_per_owner_and_a_304_is_free(
    small_allowance: Client, clock: ManualClock
) -> None:
    client = small_allowance
    core: CleanAir = client.app.state.test_core
    first, second = bearer(pair(core, client)), bearer(pair(core, client, name="second"))
    answer = client.get(PATH, headers=first)
    etag = answer.headers["etag"]
    for _ in range(5):  # revalidations cost nothing
        assert client.get(PATH, headers={**first, "If-None-Match": etag}).status_code == 304
    assert client.get(PATH, headers=first).status_code == 200
    assert client.get(PATH, headers=second).status_code == 200  # the owner's, not per connection
    refused = client.get(PATH, headers=second)
    assert refused.status_code == 429
    assert "tile allowance" in refused.json()["detail"]
    midnight = datetime(2026, 1, 16, tzinfo=UTC)
    assert int(refused.headers["retry-after"]) == int((midnight - clock.now()).total_seconds())
    clock.set(midnight + timedelta(seconds=1))
    later = client.get(PATH, headers=first, params={"time": HOUR.isoformat()})
    assert later.status_code == 200  # a new day's allowance


def test_a_source_that_cannot_answer_is_503(tmp_path: Path, clock: ManualClock) -> None:
    store = SqliteStore(tmp_path / "failing.db")
    sources = Sources(FakeSource(fail=True), FakeGeolocator(None), FakeIp(), FakeNamer())
    core = CleanAir(
        store, TokenKeys(generate_key()), Policy(), clock, sources=sources,
        offload=in_thread, store_calls=here_or_in_thread,
    )  # fmt: skip
    with TestClient(create_app(core)) as client:
        answer = client.get(PATH, headers=bearer(pair(core, client)))
        assert answer.status_code == 503
        assert "retry-after" in answer.headers
    store.close()


def test_tiles_asked_at_once_are_rendered_once(core: CleanAir, client: Client) -> None:
    """Many clients asking one tile as the hour turns: the first renders it, the rest wait
    for that render (the cache is empty until it ends)."""
    import asyncio

    from cleanair_core.air.tiles.geometry import Tile

    pair(core, client)
    proof = core.authorize(core.authenticate(pair(core, client, name="direct")), Scope.AQ_READ)

    async def many() -> list[bytes | None]:
        answers = await asyncio.gather(
            *(core.heatmap_tile(proof, layer="no2", tile=Tile(Z, X, Y)) for _ in range(5))
        )
        return [answer.png for answer in answers]

    pngs = asyncio.run(many())
    assert core.context.tile_cache.renders == 1
    assert len(set(pngs)) == 1


def test_a_time_utc_cannot_hold_is_outside_the_window(core: CleanAir, client: Client) -> None:
    headers = bearer(pair(core, client))
    answer = client.get(PATH, headers=headers, params={"time": "9999-12-31T23:00:00-05:00"})
    assert answer.status_code == 400
    assert "tile's time" in answer.json()["detail"]


def test_a_browser_page_on_an_allowed_origin_may_revalidate_its_tiles(
    make_client: object, core: CleanAir
) -> None:
    app_origin = "https://app.example"
    client = make_client(Settings(plan_workers=0, cors_allow_origins=(app_origin,)))  # type: ignore[operator]
    preflight = client.options(
        PATH,
        headers={
            "Origin": app_origin,
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization, if-none-match",
        },
    )
    assert preflight.status_code in (200, 204)
    allowed = preflight.headers["access-control-allow-headers"].lower()
    assert "if-none-match" in allowed
    answer = client.get(PATH, headers={**bearer(pair(core, client)), "Origin": app_origin})
    assert "etag" in answer.headers["access-control-expose-headers"].lower()


def test_a_source_answering_samples_draws_its_values(tmp_path: Path, clock: ManualClock) -> None:
    """A source without array answers (a remote one) is asked at the coarse lattice's
    points; its uniform air gives a uniform tile in the colour of its value."""
    import numpy as np

    from cleanair_core.air.tiles.field import SAMPLED_STEP

    store = SqliteStore(tmp_path / "sampled.db")
    air = FakeSource({Pollutant.NO2: 30.0, Pollutant.PM25: 4.0})
    sources = Sources(air, FakeGeolocator(None), FakeIp(), FakeNamer())
    core = CleanAir(
        store, TokenKeys(generate_key()), Policy(), clock, sources=sources,
        offload=in_thread, store_calls=here_or_in_thread,
    )  # fmt: skip
    with TestClient(create_app(core)) as client:
        answer = client.get(PATH, headers=bearer(pair(core, client)))
        assert answer.status_code == 200, answer.text
    store.close()
    assert len(air.samples) == (256 // SAMPLED_STEP + 1) ** 2
    assert {sample.at for sample in air.samples} == {HOUR}
    palette = LAYERS["no2"].palette
    expected = palette.colours[int(palette.steps(np.array([30.0]))[0])]
    colours = png_of(answer.content).getcolors(4)
    assert colours == [(256 * 256, (*expected, 255))]


def test_the_operator_sets_the_daily_tile_allowance() -> None:
    from cleanair_runtime.composition.bootstrap import policy_from

    assert policy_from(Settings.from_env({})).tiles_per_day == 20_000
    assert policy_from(Settings.from_env({"CLEANAIR_TILES_PER_DAY": "50"})).tiles_per_day == 50


def test_the_legend_lists_every_layer_and_its_steps(core: CleanAir, client: Client) -> None:
    headers = bearer(pair(core, client))
    before = client.get("/v1/quota", headers=headers).json()["remaining"]
    answer = client.get("/ext/v1/airquality/tiles/layers", headers=headers)
    assert answer.status_code == 200, answer.text
    layers = {layer["name"]: layer for layer in answer.json()["layers"]}
    assert set(layers) == set(LAYERS)
    no2 = layers["no2"]
    assert no2["unit"] == "µg/m³"
    assert no2["high_inclusive"] is True
    steps = no2["default"]
    assert steps[0]["low"] is None
    assert steps[-1]["high"] is None
    assert [s["high"] for s in steps[:-1]] == [s["low"] for s in steps[1:]]
    assert 10.0 in [s["high"] for s in steps]  # the EEA's Good band ends at 10 µg/m³
    assert next(s["colour"] for s in steps) == "#50F0E6"
    epa = layers["us_epa_2024"]
    assert next(s["label"] for s in epa["default"]) == "Good"
    assert all(s["low"] is None for s in epa["default"])
    assert layers["clean_air_score"]["high_is_clean"] is True
    assert len(layers["uk_daqi"]["colorblind"]) == 10
    assert client.get("/v1/quota", headers=headers).json()["remaining"] == before
    assert client.get("/ext/v1/airquality/tiles/layers").status_code == 401


def test_renders_take_turns_so_the_event_loop_keeps_the_gil(
    tmp_path: Path, clock: ManualClock, sources: Sources
) -> None:
    """Four different tiles asked at once: their renders run one at a time (each one, in a
    thread, holds Python's GIL for much of its time: several at once starved the loop)."""
    import asyncio
    from collections.abc import Callable
    from typing import TypeVar

    from cleanair_core.air.tiles.geometry import Tile

    T = TypeVar("T")
    active: list[int] = []
    running = 0

    async def offload(work: Callable[[], T]) -> T:
        nonlocal running
        running += 1
        active.append(running)
        for _ in range(10):  # as a thread hand-over does: other tasks get the loop meanwhile
            await asyncio.sleep(0)
        try:
            return work()
        finally:
            running -= 1

    store = SqliteStore(tmp_path / "turns.db")
    core = CleanAir(
        store, TokenKeys(generate_key()), Policy(), clock, sources=sources,
        offload=offload, store_calls=here_or_in_thread,
    )  # fmt: skip
    core.add_user("alice")
    token = core.redeem_pairing_code(core.create_pairing_code("alice"), "app", "127.0.0.1")
    proof = core.authorize(core.authenticate(token.token), Scope.AQ_READ)

    async def four() -> None:
        await asyncio.gather(
            *(
                core.heatmap_tile(proof, layer=layer, tile=Tile(Z, X, Y))
                for layer in ("no2", "pm25", "o3", "clean_air_score")
            )
        )

    asyncio.run(four())
    store.close()
    assert core.context.tile_cache.renders == 4
    assert max(active) == 1
